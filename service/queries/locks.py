"""SQL for TTL locks (R-L1): table rows, so a pool's session reset cannot drop them."""

# $1 name $2 owner $3 ttl seconds. Takes a free or expired lock, or re-takes one's own.
TRY_LOCK = """
INSERT INTO pgwake.locks (name, owner, expires_at)
VALUES ($1, $2, now() + make_interval(secs => $3::float8))
ON CONFLICT (name) DO UPDATE
SET owner = EXCLUDED.owner, expires_at = EXCLUDED.expires_at
WHERE pgwake.locks.expires_at <= now() OR pgwake.locks.owner = EXCLUDED.owner
RETURNING expires_at
"""

# $1 name $2 owner $3 ttl seconds. Only an unexpired lock of this owner is renewed:
# once past its TTL the lock is free, and its former owner must take it again.
# statement_timestamp(), not now(): inside a transaction (the leader's fenced tick)
# now() is the BEGIN instant, which a process stopped after BEGIN would carry stale.
RENEW = """
UPDATE pgwake.locks SET expires_at = statement_timestamp() + make_interval(secs => $3::float8)
WHERE name = $1 AND owner = $2 AND expires_at > statement_timestamp()
RETURNING expires_at
"""

UNLOCK = "DELETE FROM pgwake.locks WHERE name = $1 AND owner = $2 RETURNING name"

HOLDER = """
SELECT owner, expires_at FROM pgwake.locks WHERE name = $1 AND expires_at > now()
"""
