-- +goose Up
-- VDI pools (spec/vdi.md): a pool is a set of clones of one golden
-- instance. The pool and its members are registered here on every backend
-- (on KubeVirt the members also carry the corral.dev/vdi-pool label).
-- id is the pool ID "vm/NAMESPACE/POOL"; namespace is "-" on backends
-- without namespaces.
CREATE TABLE vdi_pools (
    id         TEXT PRIMARY KEY,
    kind       TEXT NOT NULL,
    namespace  TEXT NOT NULL,
    name       TEXT NOT NULL,
    golden     TEXT NOT NULL, -- canonical ref of the golden instance
    ephemeral  INTEGER NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL
) STRICT;

-- A member is one clone. desktop is the desktop ID "vm/NAMESPACE/MEMBER",
-- unique across pools, so a desktop ID names one instance.
CREATE TABLE vdi_members (
    desktop TEXT PRIMARY KEY,
    pool    TEXT NOT NULL REFERENCES vdi_pools (id) ON DELETE CASCADE,
    idx     INTEGER NOT NULL,
    ref     TEXT NOT NULL UNIQUE, -- canonical ref of the instance
    UNIQUE (pool, idx)
) STRICT;

-- Claims for backends that are not Kubernetes (there they are Leases).
-- One row per claimed desktop; version is the compare-and-swap token,
-- incremented by every change. Times are Unix milliseconds so expiry
-- compares as numbers.
CREATE TABLE vdi_claims (
    desktop         TEXT PRIMARY KEY,
    pool            TEXT NOT NULL,
    holder          TEXT NOT NULL,
    session         TEXT NOT NULL,
    acquired_ms     INTEGER NOT NULL,
    renewed_ms      INTEGER NOT NULL,
    expires_ms      INTEGER NOT NULL,
    connected_ms    INTEGER NOT NULL DEFAULT 0,
    disconnected_ms INTEGER NOT NULL DEFAULT 0,
    version         INTEGER NOT NULL
) STRICT;

CREATE INDEX vdi_claims_pool ON vdi_claims (pool);

-- +goose Down
DROP TABLE vdi_claims;
DROP TABLE vdi_members;
DROP TABLE vdi_pools;
