"""SQL for scheduled events (R-E1–R-E6)."""

_COLS = "event_type, subject_id, tenant_id, trigger_at, facts, external_key"

# $1..$6 as _COLS. With an external key, a second store rewrites the row and
# resets it to pending — also when it was already dispatched (R-E2).
STORE = f"""
INSERT INTO pgwake.scheduled_events ({_COLS})
VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (external_key) DO UPDATE SET
    event_type = EXCLUDED.event_type,
    subject_id = EXCLUDED.subject_id,
    tenant_id = EXCLUDED.tenant_id,
    trigger_at = EXCLUDED.trigger_at,
    facts = EXCLUDED.facts,
    status = 'pending',
    dispatched_at = NULL,
    last_error = NULL,
    updated_at = now()
RETURNING *, (xmax = 0) AS created
"""

GET = "SELECT * FROM pgwake.scheduled_events WHERE id = $1"

# $1 status or NULL, $2 before id (keyset, newest first) or NULL, $3 limit
LIST = """
SELECT * FROM pgwake.scheduled_events
WHERE ($1::text IS NULL OR status = $1) AND id < coalesce($2::bigint, 9223372036854775807)
ORDER BY id DESC
LIMIT $3
"""

# $1 batch size. Takes due events oldest trigger first — replicas skip each other's
# rows (R-E3) — and marks them dispatched in the same statement. The dispatch
# transaction commits that mark only with the handlers' work; a handler that
# raises turns its row to failed (MARK_FAILED) before the commit.
CLAIM_DUE = """
WITH due AS (
    SELECT id FROM pgwake.scheduled_events
    WHERE status = 'pending' AND trigger_at <= now()
    ORDER BY trigger_at, id
    LIMIT $1
    FOR UPDATE SKIP LOCKED
)
UPDATE pgwake.scheduled_events e
SET status = 'dispatched', dispatched_at = clock_timestamp(), last_error = NULL,
    attempts = e.attempts + 1, updated_at = clock_timestamp()
FROM due
WHERE e.id = due.id
RETURNING e.*
"""

# $1 id $2 error text
MARK_FAILED = """
UPDATE pgwake.scheduled_events
SET status = 'failed', dispatched_at = NULL, last_error = $2, updated_at = clock_timestamp()
WHERE id = $1
"""

NEXT_DUE_IN = """
SELECT extract(epoch FROM min(trigger_at) - now())::float8
FROM pgwake.scheduled_events WHERE status = 'pending'
"""

# Compare-and-set admin controls (R-H6): $1 id.
RETRY_FAILED = """
UPDATE pgwake.scheduled_events
SET status = 'pending', updated_at = now()
WHERE id = $1 AND status = 'failed'
RETURNING *
"""

CANCEL_PENDING = """
UPDATE pgwake.scheduled_events
SET status = 'cancelled', updated_at = now()
WHERE id = $1 AND status = 'pending'
RETURNING *
"""

COUNT_BY_STATUS = """
SELECT status, count(*)::bigint AS n FROM pgwake.scheduled_events GROUP BY status
"""

# Scheduled events per open status (/metrics).
OPEN_COUNTS = """
SELECT status, count(*)::bigint AS n FROM pgwake.scheduled_events
WHERE status IN ('pending', 'failed') GROUP BY status
"""
