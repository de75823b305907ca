package store

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// AuditEntry is one row of the append-only audit log.
type AuditEntry struct {
	ID       int64
	At       time.Time
	Actor    string
	Surface  string // dashboard, rest, pve, console, cli
	Action   string
	Target   string
	Outcome  string // ok, error, refused
	Detail   string
	PrevHash string
	Hash     string
}

// genesis is the prev_hash of the first row.
const genesis = "0000000000000000000000000000000000000000000000000000000000000000"

// hash covers every field of the row and the previous row's hash, so an
// edit to any field, a deleted row or a reordering breaks the chain.
func (e AuditEntry) hash() string {
	h := sha256.New()
	for _, f := range []string{e.PrevHash, strconv.FormatInt(e.ID, 10), formatTime(e.At), e.Actor, e.Surface, e.Action, e.Target, e.Outcome, e.Detail} {
		h.Write([]byte(strconv.Itoa(len(f))))
		h.Write([]byte{':'})
		h.Write([]byte(f))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// AppendAudit appends e to the log, chained to the newest row, and returns
// it with its id and hashes set.
func (s *Store) AppendAudit(ctx context.Context, e AuditEntry) (AuditEntry, error) {
	s.auditMu.Lock()
	defer s.auditMu.Unlock()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return AuditEntry{}, fmt.Errorf("store: audit: %w", err)
	}
	defer tx.Rollback()
	var lastID int64
	prev := genesis
	err = tx.QueryRowContext(ctx, `SELECT id, hash FROM audit ORDER BY id DESC LIMIT 1`).Scan(&lastID, &prev)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return AuditEntry{}, fmt.Errorf("store: audit: %w", err)
	}
	if e.At.IsZero() {
		e.At = s.now()
	}
	e.At = e.At.UTC()
	e.ID, e.PrevHash = lastID+1, prev
	e.Hash = e.hash()
	_, err = tx.ExecContext(ctx, `INSERT INTO audit (id, at, actor, surface, action, target, outcome, detail, prev_hash, hash)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		e.ID, formatTime(e.At), e.Actor, e.Surface, e.Action, e.Target, e.Outcome, e.Detail, e.PrevHash, e.Hash)
	if err != nil {
		return AuditEntry{}, fmt.Errorf("store: audit: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return AuditEntry{}, fmt.Errorf("store: audit: %w", err)
	}
	return e, nil
}

// AuditFilter narrows ListAudit; empty fields match everything.
type AuditFilter struct {
	Actor   string
	Action  string
	Target  string
	Outcome string
	Limit   int // default 100
}

// ListAudit returns matching entries, newest first.
func (s *Store) ListAudit(ctx context.Context, f AuditFilter) ([]AuditEntry, error) {
	q := `SELECT id, at, actor, surface, action, target, outcome, detail, prev_hash, hash FROM audit WHERE 1=1`
	var args []any
	for _, c := range []struct{ col, val string }{{"actor", f.Actor}, {"action", f.Action}, {"target", f.Target}, {"outcome", f.Outcome}} {
		if c.val != "" {
			q += " AND " + c.col + " = ?"
			args = append(args, c.val)
		}
	}
	if f.Limit <= 0 {
		f.Limit = 100
	}
	q += " ORDER BY id DESC LIMIT ?"
	args = append(args, f.Limit)
	return s.queryAudit(ctx, q, args...)
}

func (s *Store) queryAudit(ctx context.Context, q string, args ...any) ([]AuditEntry, error) {
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("store: list audit: %w", err)
	}
	defer rows.Close()
	var out []AuditEntry
	for rows.Next() {
		var e AuditEntry
		var at string
		if err := rows.Scan(&e.ID, &at, &e.Actor, &e.Surface, &e.Action, &e.Target, &e.Outcome, &e.Detail, &e.PrevHash, &e.Hash); err != nil {
			return nil, fmt.Errorf("store: list audit: %w", err)
		}
		e.At = parseTime(at)
		out = append(out, e)
	}
	return out, rows.Err()
}

// BrokenLink describes the first row at which the audit chain fails.
type BrokenLink struct {
	ID     int64
	Reason string
}

func (b *BrokenLink) Error() string {
	return fmt.Sprintf("store: audit chain broken at row %d: %s", b.ID, b.Reason)
}

// VerifyAudit walks the whole chain in order and returns the number of
// rows checked, and a *BrokenLink for the first row whose id, link or hash
// does not match (nil when the chain is intact).
func (s *Store) VerifyAudit(ctx context.Context) (int, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id, at, actor, surface, action, target, outcome, detail, prev_hash, hash FROM audit ORDER BY id`)
	if err != nil {
		return 0, fmt.Errorf("store: verify audit: %w", err)
	}
	defer rows.Close()
	prev, wantID, n := genesis, int64(1), 0
	for rows.Next() {
		var e AuditEntry
		var at string
		if err := rows.Scan(&e.ID, &at, &e.Actor, &e.Surface, &e.Action, &e.Target, &e.Outcome, &e.Detail, &e.PrevHash, &e.Hash); err != nil {
			return n, fmt.Errorf("store: verify audit: %w", err)
		}
		e.At = parseTime(at)
		switch {
		case e.ID != wantID:
			return n, &BrokenLink{ID: e.ID, Reason: fmt.Sprintf("expected row %d: a row was deleted", wantID)}
		case e.PrevHash != prev:
			return n, &BrokenLink{ID: e.ID, Reason: "its link does not match the previous row's hash"}
		case e.hash() != e.Hash:
			return n, &BrokenLink{ID: e.ID, Reason: "its content does not match its hash: the row was edited"}
		}
		prev, wantID = e.Hash, wantID+1
		n++
	}
	return n, rows.Err()
}
