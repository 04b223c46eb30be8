-- Browser sessions of the admin calendar (R-H4). A session is created by
-- exchanging an API token at the login form; the cookie carries a random id of
-- which only the SHA-256 is stored. Permissions are read from the token at every
-- request, so revoking the token ends its sessions at once.

CREATE TABLE pgwake.admin_sessions (
    id_hash     bytea PRIMARY KEY,
    token_id    bigint NOT NULL REFERENCES pgwake.api_tokens (id) ON DELETE CASCADE,
    csrf_token  text NOT NULL,              -- synchronizer token of the session's forms
    timezone    text,                       -- the browser's zone, sent at login
    created_at  timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz NOT NULL
);

CREATE INDEX admin_sessions_expires_idx ON pgwake.admin_sessions (expires_at);
-- A token's sessions, newest first: the per-token cap and ON DELETE CASCADE.
CREATE INDEX admin_sessions_token_idx ON pgwake.admin_sessions (token_id, created_at);

-- The calendar's history: events dispatched or failed in the last day, newest first.
CREATE INDEX scheduled_events_history_idx ON pgwake.scheduled_events (updated_at)
    WHERE status IN ('dispatched', 'failed');
