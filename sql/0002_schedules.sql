-- Recurring schedules (R-S1-R-S10). Fire times come from service.recurrence only.

CREATE TABLE pgwake.schedules (
    name           text PRIMARY KEY,
    spec           text NOT NULL,
    timezone       text NOT NULL,
    queue          text NOT NULL,
    payload        jsonb NOT NULL,
    priority       integer NOT NULL DEFAULT 0,
    max_attempts   integer CHECK (max_attempts >= 1),
    catch_up       integer NOT NULL DEFAULT 64 CHECK (catch_up >= 0),
    grace_seconds  double precision CHECK (grace_seconds > 0),
    anchor         timestamptz NOT NULL,
    next_fire_at   timestamptz NOT NULL,
    paused         boolean NOT NULL DEFAULT false,
    skips          timestamptz[] NOT NULL DEFAULT '{}',
    fired_total    bigint NOT NULL DEFAULT 0,
    skipped_total  bigint NOT NULL DEFAULT 0,
    missed_total   bigint NOT NULL DEFAULT 0,
    last_fired_at  timestamptz,
    created_at     timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now()
);

-- The leader's tick: due schedules, soonest first; paused ones never scanned.
CREATE INDEX schedules_due_idx ON pgwake.schedules (next_fire_at) WHERE NOT paused;

-- R-S9: schedule()/resume() wake the leader at commit.
CREATE FUNCTION pgwake.notify_schedules() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM new_rows WHERE NOT paused) THEN
        PERFORM pg_notify('pgwake', 'schedules');
    END IF;
    RETURN NULL;
END;
$$;

CREATE TRIGGER schedules_notify_insert AFTER INSERT ON pgwake.schedules
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION pgwake.notify_schedules();
CREATE TRIGGER schedules_notify_update AFTER UPDATE ON pgwake.schedules
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION pgwake.notify_schedules();
