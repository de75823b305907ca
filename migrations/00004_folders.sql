-- +goose Up
-- Folders (ADR-0008): an operator-defined tree of slash-separated paths
-- ("prod/web-stack"). Every ancestor of a folder has a row of its own, so
-- the tree has no holes; a move rewrites the paths of a whole subtree.
CREATE TABLE folders (
    path       TEXT PRIMARY KEY,
    created_at TEXT NOT NULL
) STRICT;

-- Membership by canonical ref: the primary key is what makes an instance
-- belong to at most one folder. A member row outlives its instance (the
-- tree shows it as missing); it follows its folder's renames and goes with
-- its folder's deletion, which never touches the instance itself.
CREATE TABLE folder_members (
    ref      TEXT PRIMARY KEY,
    folder   TEXT NOT NULL REFERENCES folders (path) ON UPDATE CASCADE ON DELETE CASCADE,
    added_at TEXT NOT NULL
) STRICT;

CREATE INDEX folder_members_folder ON folder_members (folder);

-- +goose Down
DROP TABLE folder_members;
DROP TABLE folders;
