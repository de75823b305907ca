package store

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"
)

// PVEToken is an API token of the Proxmox-compatible API. The secret is
// never stored: only its SHA-256.
type PVEToken struct {
	UserID    string // user@realm
	TokenID   string
	Comment   string
	CreatedAt time.Time
}

// ErrExists is returned when a row to create exists already.
var ErrExists = errors.New("store: already exists")

func hashSecret(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// CreatePVEToken stores a token whose secret the caller generated and
// shows once. It returns ErrExists when userid already has tokenid.
func (s *Store) CreatePVEToken(ctx context.Context, t PVEToken, secret string) error {
	res, err := s.db.ExecContext(ctx, `INSERT INTO pve_tokens (userid, tokenid, secret_sha256, comment, created_at)
		VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`, t.UserID, t.TokenID, hashSecret(secret), t.Comment, formatTime(s.now()))
	if err != nil {
		return fmt.Errorf("store: create pve token: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return ErrExists
	}
	return nil
}

// DeletePVEToken revokes a token, or returns ErrNotFound.
func (s *Store) DeletePVEToken(ctx context.Context, userid, tokenid string) error {
	res, err := s.db.ExecContext(ctx, `DELETE FROM pve_tokens WHERE userid = ? AND tokenid = ?`, userid, tokenid)
	if err != nil {
		return fmt.Errorf("store: delete pve token: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return ErrNotFound
	}
	return nil
}

// PVETokens lists the tokens of userid, or of every user when userid is
// empty, ordered by user and token id.
func (s *Store) PVETokens(ctx context.Context, userid string) ([]PVEToken, error) {
	q := `SELECT userid, tokenid, comment, created_at FROM pve_tokens`
	var args []any
	if userid != "" {
		q += ` WHERE userid = ?`
		args = append(args, userid)
	}
	rows, err := s.db.QueryContext(ctx, q+` ORDER BY userid, tokenid`, args...)
	if err != nil {
		return nil, fmt.Errorf("store: list pve tokens: %w", err)
	}
	defer rows.Close()
	out := []PVEToken{}
	for rows.Next() {
		var t PVEToken
		var created string
		if err := rows.Scan(&t.UserID, &t.TokenID, &t.Comment, &created); err != nil {
			return nil, fmt.Errorf("store: list pve tokens: %w", err)
		}
		t.CreatedAt = parseTime(created)
		out = append(out, t)
	}
	return out, rows.Err()
}

// VerifyPVEToken reports whether secret is the secret of userid's token
// tokenid, comparing the hashes in constant time. A token that does not
// exist is ErrNotFound; a wrong secret is (false, nil).
func (s *Store) VerifyPVEToken(ctx context.Context, userid, tokenid, secret string) (bool, error) {
	var want string
	err := s.db.QueryRowContext(ctx, `SELECT secret_sha256 FROM pve_tokens WHERE userid = ? AND tokenid = ?`, userid, tokenid).Scan(&want)
	if errors.Is(err, sql.ErrNoRows) {
		return false, ErrNotFound
	}
	if err != nil {
		return false, fmt.Errorf("store: verify pve token: %w", err)
	}
	return subtle.ConstantTimeCompare([]byte(hashSecret(secret)), []byte(want)) == 1, nil
}

// VerifyPVEUserSecret reports which token of userid has secret, for the
// ticket login that takes a token secret as the password. It returns ""
// when none has.
func (s *Store) VerifyPVEUserSecret(ctx context.Context, userid, secret string) (string, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT tokenid, secret_sha256 FROM pve_tokens WHERE userid = ?`, userid)
	if err != nil {
		return "", fmt.Errorf("store: verify pve secret: %w", err)
	}
	defer rows.Close()
	h := []byte(hashSecret(secret))
	found := ""
	for rows.Next() {
		var id, want string
		if err := rows.Scan(&id, &want); err != nil {
			return "", fmt.Errorf("store: verify pve secret: %w", err)
		}
		if subtle.ConstantTimeCompare(h, []byte(want)) == 1 {
			found = id
		}
	}
	return found, rows.Err()
}

// ReserveVMID registers ref with the given vmid before the instance
// exists, so a guest created through the Proxmox API keeps the vmid its
// client chose (EnsureInstance then finds the row). It returns ErrExists
// when the vmid or the ref is taken.
func (s *Store) ReserveVMID(ctx context.Context, ref string, vmid int64) error {
	if vmid < minVMID || vmid > maxVMID {
		return fmt.Errorf("store: vmid %d is out of range %d-%d", vmid, minVMID, maxVMID)
	}
	_, err := s.db.ExecContext(ctx, `INSERT INTO instances (ref, vmid, created_at) VALUES (?, ?, ?)`, ref, vmid, formatTime(s.now()))
	if err != nil {
		if strings.Contains(err.Error(), "UNIQUE") {
			return ErrExists
		}
		return fmt.Errorf("store: reserve vmid %d: %w", vmid, err)
	}
	return nil
}

// PVEGuestConfigs returns the stored PVE configuration (a JSON object) of
// every guest, keyed by ref, in one query.
func (s *Store) PVEGuestConfigs(ctx context.Context) (map[string]string, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT ref, config FROM pve_guests`)
	if err != nil {
		return nil, fmt.Errorf("store: list pve guests: %w", err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var ref, conf string
		if err := rows.Scan(&ref, &conf); err != nil {
			return nil, fmt.Errorf("store: list pve guests: %w", err)
		}
		out[ref] = conf
	}
	return out, rows.Err()
}

// PVEGuestConfig returns the stored configuration of ref, or ErrNotFound.
func (s *Store) PVEGuestConfig(ctx context.Context, ref string) (string, error) {
	var conf string
	err := s.db.QueryRowContext(ctx, `SELECT config FROM pve_guests WHERE ref = ?`, ref).Scan(&conf)
	if errors.Is(err, sql.ErrNoRows) {
		return "", ErrNotFound
	}
	if err != nil {
		return "", fmt.Errorf("store: pve guest %s: %w", ref, err)
	}
	return conf, nil
}

// SetPVEGuestConfig replaces the stored configuration of ref.
func (s *Store) SetPVEGuestConfig(ctx context.Context, ref, config string) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO pve_guests (ref, config) VALUES (?, ?)
		ON CONFLICT (ref) DO UPDATE SET config = excluded.config`, ref, config)
	if err != nil {
		return fmt.Errorf("store: set pve guest %s: %w", ref, err)
	}
	return nil
}

// DeletePVEGuest removes the stored configuration of ref; a missing row
// is not an error.
func (s *Store) DeletePVEGuest(ctx context.Context, ref string) error {
	if _, err := s.db.ExecContext(ctx, `DELETE FROM pve_guests WHERE ref = ?`, ref); err != nil {
		return fmt.Errorf("store: delete pve guest %s: %w", ref, err)
	}
	return nil
}
