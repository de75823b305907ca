-- +goose Up
-- Contexts are the backend universes Corral reaches: a libvirt URI, a
-- kubeconfig context, an Incus remote. config holds backend-specific JSON.
CREATE TABLE contexts (
    backend    TEXT NOT NULL,
    name       TEXT NOT NULL,
    config     TEXT NOT NULL DEFAULT '{}',
    created_at TEXT NOT NULL,
    PRIMARY KEY (backend, name)
) STRICT;

-- The instance registry: metadata Corral keeps beside what the backend
-- reports. The live backend stays authoritative for existence.
CREATE TABLE instances (
    ref        TEXT PRIMARY KEY,
    vmid       INTEGER NOT NULL UNIQUE CHECK (vmid BETWEEN 100 AND 999999999),
    password   TEXT NOT NULL DEFAULT '',
    metadata   TEXT NOT NULL DEFAULT '{}',
    created_at TEXT NOT NULL
) STRICT;

CREATE TABLE tasks (
    id          TEXT PRIMARY KEY,
    action      TEXT NOT NULL,
    target      TEXT NOT NULL,
    actor       TEXT NOT NULL,
    surface     TEXT NOT NULL,
    status      TEXT NOT NULL CHECK (status IN ('running', 'done', 'error', 'interrupted')),
    progress    INTEGER NOT NULL DEFAULT 0,
    error       TEXT NOT NULL DEFAULT '',
    created_at  TEXT NOT NULL,
    finished_at TEXT NOT NULL DEFAULT ''
) STRICT;
CREATE INDEX tasks_created ON tasks (created_at);

CREATE TABLE task_log (
    task_id TEXT NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    seq     INTEGER NOT NULL,
    at      TEXT NOT NULL,
    line    TEXT NOT NULL,
    PRIMARY KEY (task_id, seq)
) STRICT;

-- The audit log is append-only: each row carries the hash of the previous
-- row, so an edit or a deletion breaks the chain at that point.
CREATE TABLE audit (
    id        INTEGER PRIMARY KEY,
    at        TEXT NOT NULL,
    actor     TEXT NOT NULL,
    surface   TEXT NOT NULL,
    action    TEXT NOT NULL,
    target    TEXT NOT NULL,
    outcome   TEXT NOT NULL,
    detail    TEXT NOT NULL DEFAULT '',
    prev_hash TEXT NOT NULL,
    hash      TEXT NOT NULL
) STRICT;
CREATE TRIGGER audit_no_update BEFORE UPDATE ON audit
BEGIN SELECT RAISE(ABORT, 'audit rows are append-only'); END;
CREATE TRIGGER audit_no_delete BEFORE DELETE ON audit
BEGIN SELECT RAISE(ABORT, 'audit rows are append-only'); END;

CREATE TABLE settings (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
) STRICT;

-- +goose Down
DROP TABLE settings;
DROP TRIGGER audit_no_delete;
DROP TRIGGER audit_no_update;
DROP TABLE audit;
DROP TABLE task_log;
DROP TABLE tasks;
DROP TABLE instances;
DROP TABLE contexts;
