-- Recurring templates: a cron schedule and the job to create at each of its slots.

CREATE TABLE recurring (
    key           TEXT    PRIMARY KEY,
    cron          TEXT    NOT NULL,
    time_zone     TEXT    NOT NULL,
    missed        TEXT    NOT NULL,  -- skip, once or all: what to do with slots that passed while nobody ran them
    template      TEXT    NOT NULL,  -- the job to create, as JSON (queue, name, data, priority, weight, retry, lease, tags)
    next_slot_at  INTEGER,           -- the earliest slot not yet created; NULL once the schedule has no more runs
    last_slot_at  INTEGER,           -- the latest slot a job was created for
    created_at    INTEGER NOT NULL
) WITHOUT ROWID;

-- Serves the writer's lookup of due templates and of its next wake-up. Advancing next_slot_at in the transaction
-- that creates a slot's job is what makes a slot run at most once, across restarts and clock jumps.
CREATE INDEX recurring_due ON recurring (next_slot_at) WHERE next_slot_at IS NOT NULL;
