-- The engine's options set at run time (`Queue::set_config`, `cairn config set`), one row per option that was set.
-- An option without a row has the value the queue was opened with. Values are JSON: a number, or null for "off"
-- (keep forever, no limit).
CREATE TABLE config (
    key        TEXT    PRIMARY KEY,
    value      TEXT    NOT NULL,
    updated_at INTEGER NOT NULL
) WITHOUT ROWID;
