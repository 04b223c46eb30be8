"""SQL for queues and jobs (R-Q1–R-Q10). Parameters are documented per statement."""

# Enqueue: one statement for one job or many, from one template (the defaults
# resolution of R-Q2 and the dedupe rule of R-Q7 are written once). Engine defaults
# are parameters ($9..$12) so they live in one place (service.queues). ``{jobs}`` is a
# relation ``j(queue, payload, priority, run_at, delay_s, max_attempts, dedupe_key,
# scheduled_for)``.
_ENQUEUE = """
INSERT INTO pgwake.jobs (queue, payload, priority, run_at, max_attempts, lease_seconds,
                         backoff_base_seconds, backoff_cap_seconds, dedupe_key, scheduled_for)
SELECT j.queue, j.payload, j.priority,
       coalesce(j.run_at, now() + make_interval(secs => coalesce(j.delay_s, 0))),
       coalesce(j.max_attempts, q.max_attempts, $9),
       coalesce(q.lease_seconds, $10),
       coalesce(q.backoff_base_seconds, $11),
       coalesce(q.backoff_cap_seconds, $12),
       j.dedupe_key, j.scheduled_for
FROM {jobs}
LEFT JOIN pgwake.queues q ON q.name = j.queue
{order}
ON CONFLICT (queue, dedupe_key) WHERE dedupe_key IS NOT NULL AND status IN ('pending', 'running')
DO NOTHING
RETURNING id, queue, dedupe_key
"""
_JOB_COLUMNS = "queue, payload, priority, run_at, delay_s, max_attempts, dedupe_key, scheduled_for"

# Many jobs: $1 queue[] $2 payload[] $3 priority[] $4 run_at[] $5 delay_s[]
# $6 max_attempts[] $7 dedupe_key[] $8 scheduled_for[]; rows inserted in input order.
ENQUEUE = _ENQUEUE.format(
    jobs=f"""unnest($1::text[], $2::jsonb[], $3::int[], $4::timestamptz[], $5::float8[],
            $6::int[], $7::text[], $8::timestamptz[])
     WITH ORDINALITY AS j({_JOB_COLUMNS}, ord)""",
    order="ORDER BY j.ord",
)

# One job, the same parameters as scalars: no arrays to encode and unnest (the
# single ``enqueue`` call, issue 6).
ENQUEUE_ONE = _ENQUEUE.format(
    jobs=f"""(VALUES ($1::text, $2::jsonb, $3::int, $4::timestamptz, $5::float8, $6::int,
             $7::text, $8::timestamptz)) AS j({_JOB_COLUMNS})""",
    order="",
)

# $1 queue[] $2 dedupe_key[]
FIND_LIVE_BY_DEDUPE = """
SELECT j.id, j.queue, j.dedupe_key
FROM unnest($1::text[], $2::text[]) AS k(queue, dedupe_key)
JOIN pgwake.jobs j ON j.queue = k.queue AND j.dedupe_key = k.dedupe_key
WHERE j.status IN ('pending', 'running')
"""

# The distinct priorities of queue $1's pending jobs, highest first: a loose index
# scan over jobs_claim_idx, one descent per level (CLAIM and NEXT_RUN_IN).
_LEVELS = """levels AS (
    (SELECT priority FROM pgwake.jobs
     WHERE queue = $1 AND status = 'pending'
     ORDER BY priority DESC LIMIT 1)
    UNION ALL
    SELECT (SELECT j.priority FROM pgwake.jobs j
            WHERE j.queue = $1 AND j.status = 'pending' AND j.priority < levels.priority
            ORDER BY j.priority DESC LIMIT 1)
    FROM levels WHERE levels.priority IS NOT NULL
)"""

# $1 queue $2 worker_id $3 limit. Claim order: priority DESC, run_at, id (R-Q3).
#
# A plain walk of jobs_claim_idx (queue, priority DESC, run_at, id) in that order
# passes every not-yet-due job of a higher priority before it reaches a due one:
# 300,000 jobs due in ten days at priority 5 made each claim of priority-1 work read
# 1,611 buffers (19 ms). So the claim steps through the queue's pending priority
# levels, highest first (a loose index scan, one descent per level), and reads each
# level's due jobs only, stopping at its first future job (run_at <= now() is an
# index condition within a level). Levels come out of the recursion highest first
# and the nested loop keeps that order, so the outer LIMIT stops after the first $3
# jobs in claim order without a sort, and locks no row it does not return
# (tests/integration/test_queues.py and test_query_plans.py pin both).
CLAIM = f"""
WITH RECURSIVE {_LEVELS}, due AS (
    SELECT c.id FROM levels CROSS JOIN LATERAL (
        SELECT j.id FROM pgwake.jobs j
        WHERE j.queue = $1 AND j.status = 'pending' AND j.priority = levels.priority
          AND j.run_at <= now()
        ORDER BY j.priority DESC, j.run_at, j.id
        LIMIT $3
        FOR UPDATE SKIP LOCKED
    ) c
    WHERE levels.priority IS NOT NULL
    LIMIT $3
)
UPDATE pgwake.jobs j
SET status = 'running', attempts = j.attempts + 1, worker_id = $2,
    lease_expires_at = now() + make_interval(secs => j.lease_seconds)
FROM due
WHERE j.id = due.id
RETURNING j.*
"""

# Fence shared by ack / retry / heartbeat / dead-letter: $1 id $2 worker_id $3 attempt.
_FENCE = "id = $1 AND worker_id = $2 AND attempts = $3 AND status = 'running'"

# Ack one or many jobs in one statement: $1 ids $2 worker_id $3 attempts (same order
# as the ids). Each row is fenced on its own lease; returns the ids acked. Deleted,
# or kept as 'done' when the queue has a retention period (R-Q10).
ACK = """
WITH target AS (
    SELECT j.id, coalesce(q.retention_seconds, 0) > 0 AS keep
    FROM pgwake.jobs j
    JOIN unnest($1::bigint[], $3::int[]) AS a (id, attempts)
      ON j.id = a.id AND j.attempts = a.attempts
    LEFT JOIN pgwake.queues q ON q.name = j.queue
    WHERE j.worker_id = $2 AND j.status = 'running'
    FOR UPDATE OF j
), deleted AS (
    DELETE FROM pgwake.jobs WHERE id IN (SELECT id FROM target WHERE NOT keep) RETURNING id
), kept AS (
    UPDATE pgwake.jobs SET status = 'done', finished_at = now(), lease_expires_at = NULL
    WHERE id IN (SELECT id FROM target WHERE keep) RETURNING id
)
SELECT id FROM deleted UNION ALL SELECT id FROM kept
"""

# $4 error text, $5 explicit delay seconds or NULL (then backoff with full jitter
# between base and min(cap, base * 2^attempts)).
RETRY = f"""
UPDATE pgwake.jobs
SET status = CASE WHEN attempts >= max_attempts THEN 'dead' ELSE 'pending' END,
    run_at = CASE WHEN attempts >= max_attempts THEN run_at
             ELSE now() + make_interval(secs => coalesce($5::float8, least(
                 backoff_cap_seconds,
                 backoff_base_seconds + random() * greatest(0,
                     least(backoff_cap_seconds,
                           backoff_base_seconds * power(2, least(attempts, 60)))
                     - backoff_base_seconds))))
             END,
    finished_at = CASE WHEN attempts >= max_attempts THEN now() END,
    last_error = $4, worker_id = NULL, lease_expires_at = NULL
WHERE {_FENCE}
RETURNING status, run_at
"""

# $4 error text
DEAD_LETTER = f"""
UPDATE pgwake.jobs
SET status = 'dead', finished_at = now(), last_error = $4, worker_id = NULL,
    lease_expires_at = NULL
WHERE {_FENCE}
RETURNING status
"""

# Give a claimed job back untouched (the worker is stopping): pending now, and the
# attempt it was claimed with is not counted.
RELEASE = f"""
UPDATE pgwake.jobs
SET status = 'pending', attempts = attempts - 1, run_at = now(), worker_id = NULL,
    lease_expires_at = NULL
WHERE {_FENCE}
RETURNING id
"""

# $4 lease extension in seconds or NULL (the job's stamped lease)
HEARTBEAT = f"""
UPDATE pgwake.jobs
SET lease_expires_at = now() + make_interval(secs => coalesce($4::float8, lease_seconds))
WHERE {_FENCE}
RETURNING lease_expires_at
"""

# $1 max rows. Expired leases go back to pending, or dead when no attempts are left.
REAP_EXPIRED = """
WITH expired AS (
    SELECT id FROM pgwake.jobs
    WHERE status = 'running' AND lease_expires_at < now()
    ORDER BY lease_expires_at
    LIMIT $1
    FOR UPDATE SKIP LOCKED
)
UPDATE pgwake.jobs j
SET status = CASE WHEN j.attempts >= j.max_attempts THEN 'dead' ELSE 'pending' END,
    finished_at = CASE WHEN j.attempts >= j.max_attempts THEN now() END,
    run_at = now(),
    last_error = format('lease expired (worker %s, attempt %s)', j.worker_id, j.attempts),
    worker_id = NULL, lease_expires_at = NULL
FROM expired
WHERE j.id = expired.id
RETURNING j.id, j.queue, j.status
"""

# Seconds from the database's now() to the queue's soonest pending run_at (NULL when none).
# Seconds until the queue's soonest pending run_at, from jobs_claim_idx alone (the
# only index on pending jobs, so the claim can never be planned on another one): a
# loose index scan visits each distinct priority once and takes its earliest run_at,
# an index seek each. Cost: (distinct priorities) x log(pending jobs).
NEXT_RUN_IN = f"""
WITH RECURSIVE {_LEVELS}
SELECT extract(epoch FROM min(
    (SELECT j.run_at FROM pgwake.jobs j
     WHERE j.queue = $1 AND j.status = 'pending' AND j.priority = levels.priority
     ORDER BY j.priority DESC, j.run_at LIMIT 1)
) - now())::float8
FROM levels WHERE levels.priority IS NOT NULL
"""

NEXT_LEASE_EXPIRY_IN = """
SELECT extract(epoch FROM min(lease_expires_at) - now())::float8
FROM pgwake.jobs WHERE status = 'running'
"""

GET = "SELECT * FROM pgwake.jobs WHERE id = $1"

CANCEL = "DELETE FROM pgwake.jobs WHERE id = $1 AND status = 'pending' RETURNING id"

# $1 id; a dead job starts over with a fresh attempt budget.
REQUEUE_DEAD = """
UPDATE pgwake.jobs
SET status = 'pending', attempts = 0, run_at = now(), finished_at = NULL
WHERE id = $1 AND status = 'dead'
RETURNING id
"""

# $1 queue $2 limit $3 before id (keyset pagination, newest first)
# The row comparison matches jobs_dead_idx (queue, id) as an index condition, so the
# planner cannot prefer walking the primary key backwards through every newer row
# of other queues (it did, once another queue held many dead rows).
LIST_DEAD = """
SELECT * FROM pgwake.jobs
WHERE queue = $1 AND status = 'dead'
  AND (queue, id) < ($1, coalesce($3::bigint, 9223372036854775807))
ORDER BY id DESC
LIMIT $2
"""

STATS = """
SELECT status, count(*)::bigint AS n, min(run_at) FILTER (WHERE status = 'pending') AS oldest
FROM pgwake.jobs WHERE queue = $1 GROUP BY status
"""

# $1 max rows
PRUNE_DONE = """
DELETE FROM pgwake.jobs
WHERE id = ANY(ARRAY(
    SELECT j.id FROM pgwake.jobs j JOIN pgwake.queues q ON q.name = j.queue
    WHERE j.status = 'done'
      AND j.finished_at < now() - make_interval(secs => q.retention_seconds)
    LIMIT $1
))
"""

# $1 name $2 lease $3 max_attempts $4 base $5 cap $6 retention
CONFIGURE_QUEUE = """
INSERT INTO pgwake.queues (name, lease_seconds, max_attempts, backoff_base_seconds,
                           backoff_cap_seconds, retention_seconds)
VALUES ($1, $2, $3, $4, $5, coalesce($6::float8, 0))
ON CONFLICT (name) DO UPDATE SET
    lease_seconds = coalesce(EXCLUDED.lease_seconds, pgwake.queues.lease_seconds),
    max_attempts = coalesce(EXCLUDED.max_attempts, pgwake.queues.max_attempts),
    backoff_base_seconds = coalesce(EXCLUDED.backoff_base_seconds,
                                    pgwake.queues.backoff_base_seconds),
    backoff_cap_seconds = coalesce(EXCLUDED.backoff_cap_seconds,
                                   pgwake.queues.backoff_cap_seconds),
    retention_seconds = coalesce($6::float8, pgwake.queues.retention_seconds),
    updated_at = now()
RETURNING *
"""

# Insert the queue row only if absent (engine-defined defaults such as outboxes').
ENSURE_QUEUE = """
INSERT INTO pgwake.queues (name, lease_seconds, max_attempts, backoff_base_seconds,
                           backoff_cap_seconds)
VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (name) DO NOTHING
"""

# Live jobs per queue and status (/metrics, GET /queues). Finished jobs are left
# out: there can be millions, and they say nothing about health.
LIVE_COUNTS = """
SELECT queue, status, count(*)::bigint AS n,
       min(run_at) FILTER (WHERE status = 'pending') AS oldest
FROM pgwake.jobs
WHERE status IN ('pending', 'running', 'dead')
GROUP BY queue, status
ORDER BY queue, status
"""
