-- A recurring template can be paused: it creates no job until resumed, and counts its next slot from the moment it
-- is resumed (the slots it passed paused are not made up). While paused, next_slot_at is NULL, so that the writer's
-- lookup of due templates (`recurring_due`) never meets it.
ALTER TABLE recurring ADD COLUMN paused INTEGER NOT NULL DEFAULT 0;
