-- As SQLite's 0023: a recurring template can be paused.
ALTER TABLE recurring ADD COLUMN paused BOOLEAN NOT NULL DEFAULT false;
