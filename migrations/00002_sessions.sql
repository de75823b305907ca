-- +goose Up
-- Sign-in sessions of the dashboard (alexedwards/scs). The token column
-- holds the SHA-256 of the cookie's token (scs HashTokenInStore), so a
-- copy of the database does not hand out live sessions. expiry is Unix
-- nanoseconds; expired rows are never found and are deleted periodically.
CREATE TABLE sessions (
    token  TEXT PRIMARY KEY,
    data   BLOB NOT NULL,
    expiry INTEGER NOT NULL
) STRICT;
CREATE INDEX sessions_expiry ON sessions (expiry);

-- +goose Down
DROP INDEX sessions_expiry;
DROP TABLE sessions;
