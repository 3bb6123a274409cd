-- Which node leads the timed work (promotion, lease expiry, recurring slots, retention), for a term: the node
-- renews its row while it can reach the database, and any node may take the row once its term has run out, whether
-- its holder died, hung or was cut off, or at once when the holder's session (`pid`, the backend that renewed it)
-- is gone. It replaces a session advisory lock, which a node whose link went silent kept for as long as PostgreSQL
-- took to notice the dead session (two hours of TCP keepalive by default).
CREATE TABLE cairn_leader (
    role       TEXT        PRIMARY KEY,
    node       TEXT        NOT NULL,
    pid        INTEGER     NOT NULL,
    elected_at TIMESTAMPTZ NOT NULL,
    expires_at TIMESTAMPTZ NOT NULL
);
