"""SQL for API tokens (R-H1). Only SHA-256 hashes are stored."""

CREATE = """
INSERT INTO pgwake.api_tokens (name, token_hash, permissions)
VALUES ($1, $2, $3)
RETURNING id, name, permissions, created_at
"""

LIST = """
SELECT id, name, permissions, created_at, revoked_at FROM pgwake.api_tokens ORDER BY id
"""

REVOKE = """
UPDATE pgwake.api_tokens SET revoked_at = now()
WHERE name = $1 AND revoked_at IS NULL
RETURNING id
"""

LOOKUP = """
SELECT name, permissions, token_hash FROM pgwake.api_tokens
WHERE token_hash = $1 AND revoked_at IS NULL
"""
