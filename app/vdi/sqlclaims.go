package vdi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/corral-dev/corral/store"
)

// SQLStore is the slice of the store SQLClaims uses.
type SQLStore interface {
	AcquireVDIClaim(ctx context.Context, c store.VDIClaim, now time.Time) (store.VDIClaim, error)
	UpdateVDIClaim(ctx context.Context, c store.VDIClaim) (store.VDIClaim, error)
	DeleteVDIClaim(ctx context.Context, desktop string, version int64) error
	VDIClaim(ctx context.Context, desktop string) (store.VDIClaim, error)
	VDIClaims(ctx context.Context, pool string) ([]store.VDIClaim, error)
}

// SQLClaims keeps claims as rows in SQLite, for pools on backends that
// are not Kubernetes. Acquire is one conditional INSERT ... ON CONFLICT
// DO UPDATE WHERE expired; Update and Release are guarded by the row's
// version.
//
// Writes of one process are serialized by a mutex: SQLite allows one
// writer at a time, and its busy handler backs off in sleeps of up to
// 100 ms, which a queue in the process avoids. Writers of other
// processes still meet the busy timeout and the same conditional SQL.
type SQLClaims struct {
	st SQLStore
	mu sync.Mutex
}

var _ ClaimStore = (*SQLClaims)(nil)

// NewSQLClaims returns a claim store over st.
func NewSQLClaims(st SQLStore) *SQLClaims { return &SQLClaims{st: st} }

// Acquire implements ClaimStore.
func (s *SQLClaims) Acquire(ctx context.Context, d DesktopID, pool, holder string, now time.Time) (Claim, error) {
	if Reserved(holder) && holder != ReconcilerIdentity {
		return Claim{}, fmt.Errorf("vdi: %q is a reserved identity", holder)
	}
	now = now.Truncate(time.Millisecond)
	s.mu.Lock()
	row, err := s.st.AcquireVDIClaim(ctx, store.VDIClaim{Desktop: d.String(), Pool: poolKey(d, pool), Holder: holder,
		Session: newSession(), Acquired: now, Renewed: now, Expires: now.Add(ClaimTTL)}, now)
	s.mu.Unlock()
	if errors.Is(err, store.ErrExists) {
		return Claim{}, ErrClaimed
	}
	if err != nil {
		return Claim{}, err
	}
	return fromRow(row)
}

// Update implements ClaimStore.
func (s *SQLClaims) Update(ctx context.Context, c Claim) (Claim, error) {
	v, err := strconv.ParseInt(c.Version, 10, 64)
	if err != nil {
		return Claim{}, ErrChanged
	}
	s.mu.Lock()
	row, err := s.st.UpdateVDIClaim(ctx, store.VDIClaim{Desktop: c.Desktop.String(), Holder: c.Holder, Session: c.Session,
		Acquired: c.Acquired, Renewed: c.Renewed, Expires: c.Expires, Connected: c.Connected, Disconnected: c.Disconnected, Version: v})
	s.mu.Unlock()
	if errors.Is(err, store.ErrChanged) {
		return Claim{}, ErrChanged
	}
	if err != nil {
		return Claim{}, err
	}
	return fromRow(row)
}

// Release implements ClaimStore.
func (s *SQLClaims) Release(ctx context.Context, c Claim) error {
	v, err := strconv.ParseInt(c.Version, 10, 64)
	if err != nil {
		return ErrChanged
	}
	s.mu.Lock()
	err = s.st.DeleteVDIClaim(ctx, c.Desktop.String(), v)
	s.mu.Unlock()
	if errors.Is(err, store.ErrChanged) {
		return ErrChanged
	} else if err != nil {
		return err
	}
	return nil
}

// Get implements ClaimStore.
func (s *SQLClaims) Get(ctx context.Context, d DesktopID) (Claim, error) {
	row, err := s.st.VDIClaim(ctx, d.String())
	if errors.Is(err, store.ErrNotFound) {
		return Claim{}, ErrNoClaim
	}
	if err != nil {
		return Claim{}, err
	}
	return fromRow(row)
}

// List implements ClaimStore.
func (s *SQLClaims) List(ctx context.Context, kind, namespace, pool string) ([]Claim, error) {
	key := ""
	if pool != "" && kind != "" && namespace != "" {
		key = PoolID{Kind: kind, Namespace: namespace, Pool: pool}.String()
	}
	rows, err := s.st.VDIClaims(ctx, key)
	if err != nil {
		return nil, err
	}
	out := make([]Claim, 0, len(rows))
	for _, r := range rows {
		c, err := fromRow(r)
		if err != nil {
			return nil, err
		}
		if (kind == "" || c.Desktop.Kind == kind) && (namespace == "" || c.Desktop.Namespace == namespace) {
			out = append(out, c)
		}
	}
	return out, nil
}

func poolKey(d DesktopID, pool string) string {
	return PoolID{Kind: d.Kind, Namespace: d.Namespace, Pool: pool}.String()
}

func fromRow(r store.VDIClaim) (Claim, error) {
	d, err := ParseDesktopID(r.Desktop)
	if err != nil {
		return Claim{}, err
	}
	p, err := ParsePoolID(r.Pool)
	if err != nil {
		return Claim{}, err
	}
	return Claim{Desktop: d, Pool: p.Pool, Holder: r.Holder, Session: r.Session, Acquired: r.Acquired, Renewed: r.Renewed,
		Expires: r.Expires, Connected: r.Connected, Disconnected: r.Disconnected, Version: strconv.FormatInt(r.Version, 10)}, nil
}

// newSession returns a fresh session ID: 16 random bytes in hex.
func newSession() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
