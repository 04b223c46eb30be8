"""SQL for recurring schedules (R-S1, R-S5, R-S9)."""

# $1 name $2 spec $3 timezone $4 queue $5 payload $6 priority $7 max_attempts
# $8 catch_up $9 grace_seconds $10 anchor $11 next_fire_at.
# R-S5: re-registering with the same spec and timezone keeps the anchor and the
# next fire time, so an app registering its schedules at every start neither
# resets nor double-fires them.
UPSERT = """
INSERT INTO pgwake.schedules (name, spec, timezone, queue, payload, priority, max_attempts,
                              catch_up, grace_seconds, anchor, next_fire_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
ON CONFLICT (name) DO UPDATE SET
    queue = EXCLUDED.queue,
    payload = EXCLUDED.payload,
    priority = EXCLUDED.priority,
    max_attempts = EXCLUDED.max_attempts,
    catch_up = EXCLUDED.catch_up,
    grace_seconds = EXCLUDED.grace_seconds,
    anchor = CASE WHEN pgwake.schedules.spec = EXCLUDED.spec
                   AND pgwake.schedules.timezone = EXCLUDED.timezone
                  THEN pgwake.schedules.anchor ELSE EXCLUDED.anchor END,
    next_fire_at = CASE WHEN pgwake.schedules.spec = EXCLUDED.spec
                         AND pgwake.schedules.timezone = EXCLUDED.timezone
                        THEN pgwake.schedules.next_fire_at ELSE EXCLUDED.next_fire_at END,
    skips = CASE WHEN pgwake.schedules.spec = EXCLUDED.spec
                  AND pgwake.schedules.timezone = EXCLUDED.timezone
                 THEN pgwake.schedules.skips ELSE '{}' END,
    spec = EXCLUDED.spec,
    timezone = EXCLUDED.timezone,
    updated_at = now()
RETURNING *, (xmax = 0) AS created
"""

GET = "SELECT * FROM pgwake.schedules WHERE name = $1"

# $1 limit $2 after name (keyset pagination by name)
LIST = """
SELECT * FROM pgwake.schedules WHERE name > coalesce($2::text, '') ORDER BY name LIMIT $1
"""

DELETE = "DELETE FROM pgwake.schedules WHERE name = $1 RETURNING name"

# Compare-and-set (R-H6): pause acts on a running schedule, resume on a paused one.
PAUSE = """
UPDATE pgwake.schedules SET paused = true, updated_at = now()
WHERE name = $1 AND NOT paused RETURNING *
"""

# Resume and skip compute an instant from the spec they read; $3 spec $4 timezone
# $5 anchor make the write a compare-and-set on that spec, so a concurrent
# re-registration with another spec cannot be given an instant of the old one.

# $2 the next fire time from now (resuming never fires the boundaries it slept through).
RESUME = """
UPDATE pgwake.schedules SET paused = false, next_fire_at = $2, updated_at = now()
WHERE name = $1 AND paused AND spec = $3 AND timezone = $4 AND anchor = $5
RETURNING *
"""

# $2 instant to skip; kept sorted and unique.
SKIP = """
UPDATE pgwake.schedules
SET skips = ARRAY(SELECT DISTINCT s FROM unnest(skips || $2::timestamptz) AS s
                  WHERE s >= now() - interval '1 day' ORDER BY s),
    updated_at = now()
WHERE name = $1 AND spec = $3 AND timezone = $4 AND anchor = $5
RETURNING *
"""

# First statement of a tick: a stalled tick must not hold the leader lock's row past
# the 10 s lease (its connection is closed by the server and the tick rolls back).
TICK_IDLE_TIMEOUT = "SET LOCAL idle_in_transaction_session_timeout = '10s'"

# The tick (R-S7): due, unpaused schedules, locked. A second ticker blocks here and
# then re-reads each row; one whose next_fire_at has moved past now() drops out.
DUE_FOR_UPDATE = """
SELECT *, payload::text AS payload_json, now() AS db_now FROM pgwake.schedules
WHERE NOT paused AND next_fire_at <= now()
ORDER BY next_fire_at
FOR UPDATE
"""

# $1 name $2 next_fire_at $3 fired $4 skipped $5 missed $6 last fired boundary or NULL
# $7 last_error (NULL after a good tick)
ADVANCE = """
UPDATE pgwake.schedules
SET next_fire_at = $2,
    fired_total = fired_total + $3,
    skipped_total = skipped_total + $4,
    missed_total = missed_total + $5,
    last_fired_at = coalesce($6, last_fired_at),
    last_error = $7,
    skips = ARRAY(SELECT s FROM unnest(skips) AS s WHERE s >= $2 ORDER BY s),
    updated_at = now()
WHERE name = $1
"""

# A schedule whose next fire time cannot be computed any more: $1 name $2 error.
PAUSE_BROKEN = """
UPDATE pgwake.schedules SET paused = true, last_error = $2, updated_at = now() WHERE name = $1
"""

# Seconds from this statement's start to the soonest unpaused fire time (NULL: none).
# statement_timestamp(), not now(): the leader reads it as the last statement of its
# tick transaction, whose now() is the tick's start.
NEXT_FIRE_IN = """
SELECT extract(epoch FROM min(next_fire_at) - statement_timestamp())::float8
FROM pgwake.schedules WHERE NOT paused
"""

# R-S7's backstop: $1 name $2 boundaries $3 the firing leader's token. Returns only
# boundaries never fired before; the primary key (schedule, boundary) refuses the
# rest, even when their jobs were acked and deleted long ago.
RECORD_FIRES = """
INSERT INTO pgwake.schedule_fires (schedule, boundary, fired_by)
SELECT $1, b, $3 FROM unnest($2::timestamptz[]) AS b
ON CONFLICT DO NOTHING
RETURNING boundary
"""

# $1 name $2 boundaries $3 job ids (same order)
LINK_FIRES = """
UPDATE pgwake.schedule_fires f SET job_id = x.job_id
FROM unnest($2::timestamptz[], $3::bigint[]) AS x (boundary, job_id)
WHERE f.schedule = $1 AND f.boundary = x.boundary
"""

# $1 retention seconds $2 max rows
PRUNE_FIRES = """
DELETE FROM pgwake.schedule_fires
WHERE (schedule, boundary) IN (
    SELECT schedule, boundary FROM pgwake.schedule_fires
    WHERE fired_at < now() - make_interval(secs => $1::float8)
    LIMIT $2
)
"""
