"""SQL for outbox configuration (R-O4). Messages themselves are jobs (queries.jobs)."""

# $1 name $2 webhook_url $3 webhook_secret $4 timeout_seconds
CONFIGURE = """
INSERT INTO pgwake.outboxes (name, webhook_url, webhook_secret, timeout_seconds)
VALUES ($1, $2, $3, coalesce($4::float8, 10))
ON CONFLICT (name) DO UPDATE SET
    webhook_url = EXCLUDED.webhook_url,
    webhook_secret = EXCLUDED.webhook_secret,
    timeout_seconds = coalesce($4::float8, pgwake.outboxes.timeout_seconds),
    updated_at = now()
RETURNING name, webhook_url, webhook_secret IS NOT NULL AS has_secret, timeout_seconds, updated_at
"""

GET = "SELECT * FROM pgwake.outboxes WHERE name = $1"

LIST_WEBHOOKS = "SELECT * FROM pgwake.outboxes WHERE webhook_url IS NOT NULL ORDER BY name"
