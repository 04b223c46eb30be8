-- One row per fired schedule boundary (R-S7): the database's own guarantee that a
-- boundary fires at most once, even after its job was acked and deleted and even
-- if a rogue second ticker runs. Also the fire history the calendar shows (R-H4).

CREATE TABLE pgwake.schedule_fires (
    schedule  text NOT NULL REFERENCES pgwake.schedules (name) ON DELETE CASCADE,
    boundary  timestamptz NOT NULL,
    job_id    bigint,
    fired_by  text NOT NULL,           -- the leader's instance token
    fired_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (schedule, boundary)
);

-- History and retention scan by fire time.
CREATE INDEX schedule_fires_fired_at_idx ON pgwake.schedule_fires (fired_at);

-- Why the last tick of a schedule could not fire it (NULL after a good tick).
ALTER TABLE pgwake.schedules ADD COLUMN last_error text;
