-- Signals (ops/signal.rs): data sent to a key, which a job waiting for that key receives as a step of its run. A
-- signal sent while no job waits for its key is kept here, oldest first, until one does (or retention's age
-- passes); each is received once.
CREATE TABLE signals (
    id      INTEGER PRIMARY KEY AUTOINCREMENT,
    key     TEXT    NOT NULL,
    data    TEXT    NOT NULL,
    sent_at INTEGER NOT NULL
);
CREATE INDEX signals_by_key ON signals (key, id);
CREATE INDEX signals_by_age ON signals (sent_at);

-- The signal a suspended job waits for: its key, the step that receives it, and when the wait times out. Cleared
-- when the step is recorded; kept on a job cancelled while it waits, so that a signal sent to it later is refused.
ALTER TABLE jobs ADD COLUMN signal_key TEXT;
ALTER TABLE jobs ADD COLUMN signal_step TEXT;
ALTER TABLE jobs ADD COLUMN signal_until INTEGER;
CREATE INDEX jobs_by_signal_key ON jobs (signal_key, id) WHERE signal_key IS NOT NULL;
