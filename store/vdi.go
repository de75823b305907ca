package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
)

// ErrChanged is returned by a compare-and-swap on a VDI claim whose
// version is no longer the one the caller read: someone changed or
// removed the claim in between.
var ErrChanged = errors.New("store: changed since read")

// VDIPool is a registered pool of desktops and its members in index order.
type VDIPool struct {
	ID        string // "vm/NAMESPACE/POOL"
	Kind      string // "vm"
	Namespace string
	Name      string
	Golden    string // canonical ref of the golden instance
	Ephemeral bool
	CreatedAt time.Time
	Members   []VDIMember
}

// VDIMember is one desktop of a pool.
type VDIMember struct {
	Desktop string // "vm/NAMESPACE/MEMBER"
	Pool    string
	Index   int
	Ref     string // canonical ref of the instance
}

// VDIClaim is the claim on one desktop. Version is the compare-and-swap
// token: every change increments it.
type VDIClaim struct {
	Desktop      string
	Pool         string
	Holder       string
	Session      string
	Acquired     time.Time
	Renewed      time.Time
	Expires      time.Time
	Connected    time.Time // start of the last connected period; zero if none
	Disconnected time.Time // end of the last connected period; zero if none
	Version      int64
}

// CreateVDIPool registers a pool without members. It returns ErrExists
// when the ID is taken.
func (s *Store) CreateVDIPool(ctx context.Context, p VDIPool) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO vdi_pools (id, kind, namespace, name, golden, ephemeral, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ?)`, p.ID, p.Kind, p.Namespace, p.Name, p.Golden, boolInt(p.Ephemeral), formatTime(s.now()))
	if isUniqueViolation(err) {
		return ErrExists
	}
	if err != nil {
		return fmt.Errorf("store: create vdi pool %s: %w", p.ID, err)
	}
	return nil
}

// AddVDIMember registers a member of an existing pool. It returns
// ErrExists when the desktop ID, the ref or the index is taken.
func (s *Store) AddVDIMember(ctx context.Context, m VDIMember) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO vdi_members (desktop, pool, idx, ref) VALUES (?, ?, ?, ?)`,
		m.Desktop, m.Pool, m.Index, m.Ref)
	if isUniqueViolation(err) {
		return ErrExists
	}
	if err != nil {
		return fmt.Errorf("store: add vdi member %s: %w", m.Desktop, err)
	}
	return nil
}

// DeleteVDIMember removes a member's row, or returns ErrNotFound.
func (s *Store) DeleteVDIMember(ctx context.Context, desktop string) error {
	res, err := s.db.ExecContext(ctx, `DELETE FROM vdi_members WHERE desktop = ?`, desktop)
	if err != nil {
		return fmt.Errorf("store: delete vdi member %s: %w", desktop, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return ErrNotFound
	}
	return nil
}

// VDIPools returns every pool with its members, ordered by ID.
func (s *Store) VDIPools(ctx context.Context) ([]VDIPool, error) {
	return s.vdiPools(ctx, "")
}

// VDIPool returns one pool with its members, or ErrNotFound.
func (s *Store) VDIPool(ctx context.Context, id string) (VDIPool, error) {
	ps, err := s.vdiPools(ctx, id)
	if err != nil {
		return VDIPool{}, err
	}
	if len(ps) == 0 {
		return VDIPool{}, ErrNotFound
	}
	return ps[0], nil
}

func (s *Store) vdiPools(ctx context.Context, id string) ([]VDIPool, error) {
	q := `SELECT id, kind, namespace, name, golden, ephemeral, created_at FROM vdi_pools`
	var args []any
	if id != "" {
		q += ` WHERE id = ?`
		args = append(args, id)
	}
	rows, err := s.db.QueryContext(ctx, q+` ORDER BY id`, args...)
	if err != nil {
		return nil, fmt.Errorf("store: vdi pools: %w", err)
	}
	var out []VDIPool
	byID := map[string]int{}
	for rows.Next() {
		var p VDIPool
		var eph int
		var created string
		if err := rows.Scan(&p.ID, &p.Kind, &p.Namespace, &p.Name, &p.Golden, &eph, &created); err != nil {
			rows.Close()
			return nil, fmt.Errorf("store: vdi pools: %w", err)
		}
		p.Ephemeral, p.CreatedAt = eph != 0, parseTime(created)
		byID[p.ID] = len(out)
		out = append(out, p)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: vdi pools: %w", err)
	}
	q = `SELECT desktop, pool, idx, ref FROM vdi_members`
	if id != "" {
		q += ` WHERE pool = ?`
	}
	rows, err = s.db.QueryContext(ctx, q+` ORDER BY pool, idx`, args...)
	if err != nil {
		return nil, fmt.Errorf("store: vdi members: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var m VDIMember
		if err := rows.Scan(&m.Desktop, &m.Pool, &m.Index, &m.Ref); err != nil {
			return nil, fmt.Errorf("store: vdi members: %w", err)
		}
		if i, ok := byID[m.Pool]; ok {
			out[i].Members = append(out[i].Members, m)
		}
	}
	return out, rows.Err()
}

// VDIMemberByRef returns the member whose instance is ref, or ErrNotFound.
func (s *Store) VDIMemberByRef(ctx context.Context, ref string) (VDIMember, error) {
	var m VDIMember
	err := s.db.QueryRowContext(ctx, `SELECT desktop, pool, idx, ref FROM vdi_members WHERE ref = ?`, ref).
		Scan(&m.Desktop, &m.Pool, &m.Index, &m.Ref)
	if errors.Is(err, sql.ErrNoRows) {
		return VDIMember{}, ErrNotFound
	}
	if err != nil {
		return VDIMember{}, fmt.Errorf("store: vdi member %s: %w", ref, err)
	}
	return m, nil
}

// DeleteVDIPool removes a pool and its members' rows (not its claims,
// which the caller releases first), or returns ErrNotFound.
func (s *Store) DeleteVDIPool(ctx context.Context, id string) error {
	res, err := s.db.ExecContext(ctx, `DELETE FROM vdi_pools WHERE id = ?`, id)
	if err != nil {
		return fmt.Errorf("store: delete vdi pool %s: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return ErrNotFound
	}
	return nil
}

const claimColumns = `desktop, pool, holder, session, acquired_ms, renewed_ms, expires_ms, connected_ms, disconnected_ms, version`

// AcquireVDIClaim makes c the claim on c.Desktop when the desktop has no
// claim, or when its claim expired at or before now: one statement, so of
// concurrent callers exactly one wins. It returns the stored claim, or
// ErrExists when an unexpired claim holds the desktop.
func (s *Store) AcquireVDIClaim(ctx context.Context, c VDIClaim, now time.Time) (VDIClaim, error) {
	row := s.db.QueryRowContext(ctx, `INSERT INTO vdi_claims (`+claimColumns+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, 0, 0, 1)
		ON CONFLICT (desktop) DO UPDATE SET pool = excluded.pool, holder = excluded.holder, session = excluded.session,
			acquired_ms = excluded.acquired_ms, renewed_ms = excluded.renewed_ms, expires_ms = excluded.expires_ms,
			connected_ms = 0, disconnected_ms = 0, version = vdi_claims.version + 1
		WHERE vdi_claims.expires_ms <= ?
		RETURNING `+claimColumns,
		c.Desktop, c.Pool, c.Holder, c.Session, ms(c.Acquired), ms(c.Renewed), ms(c.Expires), ms(now))
	out, err := scanClaim(row)
	if errors.Is(err, ErrNotFound) {
		return VDIClaim{}, ErrExists
	}
	return out, err
}

// UpdateVDIClaim replaces the claim on c.Desktop with c if its version is
// still c.Version, and returns it with the next version. It returns
// ErrChanged when the claim changed or is gone.
func (s *Store) UpdateVDIClaim(ctx context.Context, c VDIClaim) (VDIClaim, error) {
	row := s.db.QueryRowContext(ctx, `UPDATE vdi_claims SET holder = ?, session = ?, acquired_ms = ?, renewed_ms = ?,
			expires_ms = ?, connected_ms = ?, disconnected_ms = ?, version = version + 1
		WHERE desktop = ? AND version = ? RETURNING `+claimColumns,
		c.Holder, c.Session, ms(c.Acquired), ms(c.Renewed), ms(c.Expires), ms(c.Connected), ms(c.Disconnected), c.Desktop, c.Version)
	out, err := scanClaim(row)
	if errors.Is(err, ErrNotFound) {
		return VDIClaim{}, ErrChanged
	}
	return out, err
}

// DeleteVDIClaim removes the claim on desktop if its version is still
// version. It returns ErrChanged when the claim changed or is gone.
func (s *Store) DeleteVDIClaim(ctx context.Context, desktop string, version int64) error {
	res, err := s.db.ExecContext(ctx, `DELETE FROM vdi_claims WHERE desktop = ? AND version = ?`, desktop, version)
	if err != nil {
		return fmt.Errorf("store: delete vdi claim %s: %w", desktop, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return ErrChanged
	}
	return nil
}

// VDIClaim returns the claim on desktop, or ErrNotFound.
func (s *Store) VDIClaim(ctx context.Context, desktop string) (VDIClaim, error) {
	return scanClaim(s.db.QueryRowContext(ctx, `SELECT `+claimColumns+` FROM vdi_claims WHERE desktop = ?`, desktop))
}

// VDIClaims returns the claims of pool ("" for every pool), by desktop.
func (s *Store) VDIClaims(ctx context.Context, pool string) ([]VDIClaim, error) {
	q, args := `SELECT `+claimColumns+` FROM vdi_claims`, []any{}
	if pool != "" {
		q += ` WHERE pool = ?`
		args = append(args, pool)
	}
	rows, err := s.db.QueryContext(ctx, q+` ORDER BY desktop`, args...)
	if err != nil {
		return nil, fmt.Errorf("store: vdi claims: %w", err)
	}
	defer rows.Close()
	var out []VDIClaim
	for rows.Next() {
		c, err := scanClaim(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

func scanClaim(row interface{ Scan(...any) error }) (VDIClaim, error) {
	var c VDIClaim
	var acq, ren, exp, con, dis int64
	err := row.Scan(&c.Desktop, &c.Pool, &c.Holder, &c.Session, &acq, &ren, &exp, &con, &dis, &c.Version)
	if errors.Is(err, sql.ErrNoRows) {
		return VDIClaim{}, ErrNotFound
	}
	if err != nil {
		return VDIClaim{}, fmt.Errorf("store: vdi claim: %w", err)
	}
	c.Acquired, c.Renewed, c.Expires, c.Connected, c.Disconnected = fromMS(acq), fromMS(ren), fromMS(exp), fromMS(con), fromMS(dis)
	return c, nil
}

func ms(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

func fromMS(v int64) time.Time {
	if v == 0 {
		return time.Time{}
	}
	return time.UnixMilli(v).UTC()
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func isUniqueViolation(err error) bool {
	return err != nil && strings.Contains(err.Error(), "UNIQUE constraint failed")
}
