-- pgwake core schema: queues and jobs (R-Q*), scheduled events (R-E*),
-- outboxes (R-O*), API tokens (R-H1), locks (R-L1).
-- Everything lives in the "pgwake" schema of the application's own database.

CREATE TABLE pgwake.queues (
    name                 text PRIMARY KEY,
    lease_seconds        double precision CHECK (lease_seconds > 0),
    max_attempts         integer CHECK (max_attempts >= 1),
    backoff_base_seconds double precision CHECK (backoff_base_seconds >= 0),
    backoff_cap_seconds  double precision CHECK (backoff_cap_seconds >= 0),
    retention_seconds    double precision NOT NULL DEFAULT 0 CHECK (retention_seconds >= 0),
    updated_at           timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE pgwake.jobs (
    id                   bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    queue                text NOT NULL,
    status               text NOT NULL DEFAULT 'pending'
                         CHECK (status IN ('pending', 'running', 'done', 'dead')),
    payload              jsonb NOT NULL,
    priority             integer NOT NULL DEFAULT 0,
    run_at               timestamptz NOT NULL DEFAULT now(),
    attempts             integer NOT NULL DEFAULT 0,
    max_attempts         integer NOT NULL CHECK (max_attempts >= 1),
    lease_seconds        double precision NOT NULL CHECK (lease_seconds > 0),
    backoff_base_seconds double precision NOT NULL,
    backoff_cap_seconds  double precision NOT NULL,
    lease_expires_at     timestamptz,
    worker_id            text,
    dedupe_key           text,
    scheduled_for        timestamptz,
    last_error           text,
    created_at           timestamptz NOT NULL DEFAULT now(),
    finished_at          timestamptz
);

-- Claim: due pending jobs of one queue, highest priority, oldest run_at, id.
CREATE INDEX jobs_claim_idx ON pgwake.jobs (queue, priority DESC, run_at, id)
    WHERE status = 'pending';
-- Next deadline of a queue (soonest pending run_at).
CREATE INDEX jobs_pending_run_at_idx ON pgwake.jobs (queue, run_at)
    WHERE status = 'pending';
-- Lease reaper: soonest expiring lease.
CREATE INDEX jobs_lease_idx ON pgwake.jobs (lease_expires_at)
    WHERE status = 'running';
-- R-Q7: at most one pending or running job per (queue, dedupe_key).
CREATE UNIQUE INDEX jobs_dedupe_idx ON pgwake.jobs (queue, dedupe_key)
    WHERE dedupe_key IS NOT NULL AND status IN ('pending', 'running');
-- Dead-letter listing and retention pruning never scan live rows.
CREATE INDEX jobs_dead_idx ON pgwake.jobs (queue, id) WHERE status = 'dead';
CREATE INDEX jobs_done_idx ON pgwake.jobs (finished_at) WHERE status = 'done';

-- R-Q9: wake waiting workers at commit. One statement-level trigger per verb,
-- one NOTIFY per queue touched (identical payloads fold within a transaction).
CREATE FUNCTION pgwake.notify_jobs() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('pgwake', 'job:' || q.queue)
    FROM (SELECT DISTINCT queue FROM new_rows WHERE status = 'pending') AS q;
    RETURN NULL;
END;
$$;

CREATE TRIGGER jobs_notify_insert AFTER INSERT ON pgwake.jobs
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION pgwake.notify_jobs();
CREATE TRIGGER jobs_notify_update AFTER UPDATE ON pgwake.jobs
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION pgwake.notify_jobs();

CREATE TABLE pgwake.scheduled_events (
    id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    event_type     text NOT NULL,
    subject_id     text,
    tenant_id      text,
    trigger_at     timestamptz NOT NULL,
    facts          jsonb NOT NULL,
    external_key   text UNIQUE,
    status         text NOT NULL DEFAULT 'pending'
                   CHECK (status IN ('pending', 'dispatched', 'failed', 'cancelled')),
    attempts       integer NOT NULL DEFAULT 0,
    dispatched_at  timestamptz,
    last_error     text,
    created_at     timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now()
);

-- Dispatcher: due pending events, oldest trigger_at first.
CREATE INDEX scheduled_events_due_idx ON pgwake.scheduled_events (trigger_at, id)
    WHERE status = 'pending';
CREATE INDEX scheduled_events_status_idx ON pgwake.scheduled_events (status, id);

CREATE FUNCTION pgwake.notify_events() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM new_rows WHERE status = 'pending') THEN
        PERFORM pg_notify('pgwake', 'events');
    END IF;
    RETURN NULL;
END;
$$;

CREATE TRIGGER scheduled_events_notify_insert AFTER INSERT ON pgwake.scheduled_events
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION pgwake.notify_events();
CREATE TRIGGER scheduled_events_notify_update AFTER UPDATE ON pgwake.scheduled_events
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION pgwake.notify_events();

CREATE TABLE pgwake.outboxes (
    name            text PRIMARY KEY,
    webhook_url     text,
    webhook_secret  text,
    timeout_seconds double precision NOT NULL DEFAULT 10 CHECK (timeout_seconds > 0),
    updated_at      timestamptz NOT NULL DEFAULT now()
);

CREATE FUNCTION pgwake.notify_outboxes() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('pgwake', 'outboxes');
    RETURN NULL;
END;
$$;

CREATE TRIGGER outboxes_notify AFTER INSERT OR UPDATE OR DELETE ON pgwake.outboxes
    FOR EACH STATEMENT EXECUTE FUNCTION pgwake.notify_outboxes();

CREATE TABLE pgwake.api_tokens (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name        text NOT NULL UNIQUE,
    token_hash  bytea NOT NULL UNIQUE,
    permissions text[] NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    revoked_at  timestamptz
);

CREATE TABLE pgwake.locks (
    name       text PRIMARY KEY,
    owner      text NOT NULL,
    expires_at timestamptz NOT NULL
);
