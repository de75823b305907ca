-- +goose Up
-- Power and snapshot schedules. A schedule targets one instance by
-- canonical ref or one folder by path (target_kind says which: both are
-- slash-separated, so the text alone could not tell them apart).
-- evaluated_at is the instant up to which the tick has evaluated the
-- schedule: a tick claims the window (evaluated_at, now] by a
-- compare-and-swap on it, so two tickers (corral serve and a systemd
-- timer) never fire a boundary twice and a restart never replays a
-- backlog. Empty means "from created_at".
CREATE TABLE schedules (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    target_kind  TEXT NOT NULL CHECK (target_kind IN ('instance', 'folder')),
    target       TEXT NOT NULL,
    kind         TEXT NOT NULL CHECK (kind IN ('power', 'snapshot')),
    action       TEXT NOT NULL DEFAULT '',
    cron         TEXT NOT NULL,
    tz           TEXT NOT NULL,
    keep         INTEGER NOT NULL DEFAULT 0 CHECK (keep >= 0),
    enabled      INTEGER NOT NULL DEFAULT 1,
    in_cluster   INTEGER NOT NULL DEFAULT 0,
    evaluated_at TEXT NOT NULL DEFAULT '',
    last_run     TEXT NOT NULL DEFAULT '',
    last_result  TEXT NOT NULL DEFAULT '',
    last_message TEXT NOT NULL DEFAULT '',
    last_task    TEXT NOT NULL DEFAULT '',
    created_by   TEXT NOT NULL,
    created_at   TEXT NOT NULL
) STRICT;

-- +goose Down
DROP TABLE schedules;
