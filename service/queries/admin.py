"""SQL for the admin calendar (R-H4): browser sessions, the 14-day window and
the last day's history. Every statement here is served by an index."""

# -- sessions ----------------------------------------------------------------------

# $1 id hash $2 token hash $3 csrf token $4 timezone or NULL $5 lifetime seconds.
# Inserts nothing when the token is unknown or revoked.
CREATE_SESSION = """
WITH t AS (
    SELECT id, name, permissions FROM pgwake.api_tokens
    WHERE token_hash = $2 AND revoked_at IS NULL
), s AS (
    INSERT INTO pgwake.admin_sessions (id_hash, token_id, csrf_token, timezone, expires_at)
    SELECT $1, t.id, $3, $4, now() + make_interval(secs => $5) FROM t
    RETURNING token_id
)
SELECT t.id, t.name, t.permissions FROM t JOIN s ON s.token_id = t.id
"""

# $1 token id $2 sessions kept. A token's sessions beyond the newest $2 end.
TRIM_SESSIONS = """
DELETE FROM pgwake.admin_sessions
WHERE id_hash IN (
    SELECT id_hash FROM pgwake.admin_sessions WHERE token_id = $1
    ORDER BY created_at DESC OFFSET $2
)
"""

# $1 id hash. The token's live permissions: a revoked token's sessions end at once.
GET_SESSION = """
SELECT t.name, t.permissions, s.csrf_token, s.timezone
FROM pgwake.admin_sessions s
JOIN pgwake.api_tokens t ON t.id = s.token_id AND t.revoked_at IS NULL
WHERE s.id_hash = $1 AND s.expires_at > now()
"""

DELETE_SESSION = "DELETE FROM pgwake.admin_sessions WHERE id_hash = $1"

# $1 limit. Sessions past their expiry, oldest first (admin_sessions_expires_idx).
PRUNE_SESSIONS = """
DELETE FROM pgwake.admin_sessions
WHERE id_hash IN (
    SELECT id_hash FROM pgwake.admin_sessions WHERE expires_at <= now()
    ORDER BY expires_at LIMIT $1
)
"""

# -- the 14-day window ----------------------------------------------------------------

# $1 window end $2 schedule name or NULL $3 queue or NULL $4 limit.
# Running schedules whose next boundary falls before the window's end
# (schedules_due_idx); their fire instants come from service.recurrence.
WINDOW_SCHEDULES = """
SELECT name, spec, timezone, queue, anchor, next_fire_at, skips
FROM pgwake.schedules
WHERE NOT paused AND next_fire_at < $1
  AND ($2::text IS NULL OR name = $2) AND ($3::text IS NULL OR queue = $3)
ORDER BY next_fire_at, name
LIMIT $4
"""

# $1 window start $2 window end $3 event type or NULL $4 limit
# (scheduled_events_due_idx).
WINDOW_EVENTS = """
SELECT id, event_type, subject_id, tenant_id, trigger_at
FROM pgwake.scheduled_events
WHERE status = 'pending' AND trigger_at >= $1 AND trigger_at < $2
  AND ($3::text IS NULL OR event_type = $3)
ORDER BY trigger_at, id
LIMIT $4
"""

# -- history --------------------------------------------------------------------------

# $1 since $2 schedule or NULL $3 queue or NULL $4 limit (schedule_fires_fired_at_idx).
RECENT_FIRES = """
SELECT f.schedule, f.boundary, f.fired_at, f.job_id, s.queue, s.timezone
FROM pgwake.schedule_fires f
JOIN pgwake.schedules s ON s.name = f.schedule
WHERE f.fired_at >= $1
  AND ($2::text IS NULL OR f.schedule = $2) AND ($3::text IS NULL OR s.queue = $3)
ORDER BY f.fired_at DESC
LIMIT $4
"""

# $1 since $2 event type or NULL $3 statuses wanted (of dispatched, failed) $4 limit
# (scheduled_events_history_idx; the literal IN list lets the planner use it).
RECENT_EVENTS = """
SELECT id, event_type, subject_id, status, trigger_at, dispatched_at, updated_at,
       attempts, last_error
FROM pgwake.scheduled_events
WHERE status IN ('dispatched', 'failed') AND status = ANY($3::text[]) AND updated_at >= $1
  AND ($2::text IS NULL OR event_type = $2)
ORDER BY updated_at DESC
LIMIT $4
"""

# $1 since $2 outbox backing queue or NULL $3 limit. Dead messages of every
# outbox (their queues are named '__outbox:<name>'; jobs_dead_idx per queue).
RECENT_DEAD_MESSAGES = """
SELECT j.id, j.queue, j.attempts, j.finished_at, j.last_error
FROM pgwake.queues q
JOIN pgwake.jobs j ON j.queue = q.name AND j.status = 'dead'
WHERE starts_with(q.name, '__outbox:') AND ($2::text IS NULL OR q.name = $2)
  AND j.finished_at >= $1
ORDER BY j.finished_at DESC
LIMIT $3
"""
