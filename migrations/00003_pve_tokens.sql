-- +goose Up
-- API tokens of the Proxmox-compatible API (/api2/json). A token is
-- USERID!TOKENID=SECRET; only the SHA-256 of the secret is kept (hex), so
-- a copy of the database hands out no working token. userid is the PVE
-- user (user@realm), which is also the Corral login the token acts as.
CREATE TABLE pve_tokens (
    userid     TEXT NOT NULL,
    tokenid    TEXT NOT NULL,
    secret_sha256 TEXT NOT NULL,
    comment    TEXT NOT NULL DEFAULT '',
    created_at TEXT NOT NULL,
    PRIMARY KEY (userid, tokenid)
) STRICT;

-- The parts of a guest's PVE configuration that no backend keeps (MAC and
-- bridge of net0, the disk's storage and bus, description, ostype, boot
-- order...): a JSON object of key -> value strings per canonical ref. The
-- live backend stays authoritative for name, CPUs, memory, disk size and
-- state; a row without its instance is ignored and removed with it.
CREATE TABLE pve_guests (
    ref    TEXT PRIMARY KEY,
    config TEXT NOT NULL DEFAULT '{}'
) STRICT;

-- +goose Down
DROP TABLE pve_guests;
DROP TABLE pve_tokens;
