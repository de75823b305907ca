package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"hash/crc32"
	"time"
)

// Instance is the registry's record of one instance: what Corral keeps
// beside the backend's own inventory.
type Instance struct {
	Ref       string // canonical InstanceRef text
	VMID      int64
	Password  string
	Metadata  string // JSON
	CreatedAt time.Time
}

const (
	minVMID = 100
	maxVMID = 999999999
)

// Instance returns the registry entry for ref, or ErrNotFound.
func (s *Store) Instance(ctx context.Context, ref string) (Instance, error) {
	var in Instance
	var created string
	err := s.db.QueryRowContext(ctx, `SELECT ref, vmid, password, metadata, created_at FROM instances WHERE ref = ?`, ref).
		Scan(&in.Ref, &in.VMID, &in.Password, &in.Metadata, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return Instance{}, ErrNotFound
	}
	if err != nil {
		return Instance{}, fmt.Errorf("store: instance %s: %w", ref, err)
	}
	in.CreatedAt = parseTime(created)
	return in, nil
}

// VMIDs returns the vmid of every registered instance, keyed by ref.
func (s *Store) VMIDs(ctx context.Context) (map[string]int64, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT ref, vmid FROM instances`)
	if err != nil {
		return nil, fmt.Errorf("store: list vmids: %w", err)
	}
	defer rows.Close()
	out := make(map[string]int64)
	for rows.Next() {
		var ref string
		var id int64
		if err := rows.Scan(&ref, &id); err != nil {
			return nil, fmt.Errorf("store: list vmids: %w", err)
		}
		out[ref] = id
	}
	return out, rows.Err()
}

// EnsureInstance registers ref on first sight and returns its entry. The
// vmid is stable: the first free value from CRC32 of the ref (mapped into
// PVE's range), probing upwards on a collision, so the same ref gets the
// same vmid on a fresh database too when nothing collides.
func (s *Store) EnsureInstance(ctx context.Context, ref string) (Instance, error) {
	if in, err := s.Instance(ctx, ref); err == nil {
		return in, nil
	} else if !errors.Is(err, ErrNotFound) {
		return Instance{}, err
	}
	id := minVMID + int64(crc32.ChecksumIEEE([]byte(ref)))%(maxVMID-minVMID+1)
	for range 1000 {
		_, err := s.db.ExecContext(ctx, `INSERT INTO instances (ref, vmid, created_at) VALUES (?, ?, ?)
			ON CONFLICT (ref) DO NOTHING`, ref, id, formatTime(s.now()))
		if err == nil {
			return s.Instance(ctx, ref)
		}
		// A UNIQUE failure on vmid: probe the next one.
		id++
		if id > maxVMID {
			id = minVMID
		}
	}
	return Instance{}, fmt.Errorf("store: no free vmid for %s", ref)
}

// SetInstanceMetadata replaces the password and metadata of a registered
// instance, or returns ErrNotFound.
func (s *Store) SetInstanceMetadata(ctx context.Context, ref, password, metadata string) error {
	if metadata == "" {
		metadata = "{}"
	}
	res, err := s.db.ExecContext(ctx, `UPDATE instances SET password = ?, metadata = ? WHERE ref = ?`, password, metadata, ref)
	if err != nil {
		return fmt.Errorf("store: update instance %s: %w", ref, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return ErrNotFound
	}
	return nil
}

// DeleteInstance removes the registry entry of ref and its folder
// membership (a deleted instance leaves its folder); a missing entry is
// not an error, since many instances are never registered.
func (s *Store) DeleteInstance(ctx context.Context, ref string) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store: delete instance %s: %w", ref, err)
	}
	defer tx.Rollback()
	for _, q := range []string{`DELETE FROM instances WHERE ref = ?`, `DELETE FROM folder_members WHERE ref = ?`} {
		if _, err := tx.ExecContext(ctx, q, ref); err != nil {
			return fmt.Errorf("store: delete instance %s: %w", ref, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("store: delete instance %s: %w", ref, err)
	}
	return nil
}
