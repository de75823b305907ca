package vdi

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corral-dev/corral/store"
)

// gatedStore is a real SQLite claim store whose List waits until every
// claimant of the test is inside Pick, so they all share one read, and
// which counts Lists and can fail the first Acquire.
type gatedStore struct {
	ClaimStore
	p         *Picker
	key       string
	claimants int
	lists     atomic.Int32
	failFirst bool
	acquires  atomic.Int32
}

func (s *gatedStore) List(ctx context.Context, kind, ns, pool string) ([]Claim, error) {
	s.lists.Add(1)
	for {
		s.p.mu.Lock()
		n := s.p.active[s.key]
		s.p.mu.Unlock()
		if n == s.claimants {
			break
		}
		time.Sleep(time.Millisecond)
	}
	return s.ClaimStore.List(ctx, kind, ns, pool)
}

func (s *gatedStore) Acquire(ctx context.Context, d DesktopID, pool, holder string, now time.Time) (Claim, error) {
	if s.acquires.Add(1) == 1 && s.failFirst {
		return Claim{}, errors.New("the store failed")
	}
	return s.ClaimStore.Acquire(ctx, d, pool, holder, now)
}

func pickRace(t *testing.T, claimants, members int, failFirst bool) (s *gatedStore, won map[DesktopID]string, full, failed int) {
	t.Helper()
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "c.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	pool := PoolID{Kind: "vm", Namespace: "-", Pool: "p"}
	p := NewPicker()
	s = &gatedStore{ClaimStore: NewSQLClaims(st), p: p, key: pool.String(), claimants: claimants, failFirst: failFirst}
	ids := make([]DesktopID, members)
	for i := range ids {
		ids[i] = DesktopID{Kind: "vm", Namespace: "-", Member: fmt.Sprintf("p-%d", i+1)}
	}
	won = map[DesktopID]string{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range claimants {
		wg.Go(func() {
			who := fmt.Sprintf("user%d", i)
			c, err := p.Pick(context.Background(), s, pool, ids, who, time.Now(), nil)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				if prev, dup := won[c.Desktop]; dup {
					t.Errorf("%s given to %s and %s", c.Desktop, prev, who)
				}
				won[c.Desktop] = who
			case errors.Is(err, ErrNoFree):
				full++
			default:
				failed++
			}
		})
	}
	wg.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.taken) != 0 || len(p.active) != 0 || len(p.busy) != 0 || len(p.inflight) != 0 {
		t.Errorf("picker keeps state after every Pick ended: taken %v, active %v, busy %v, inflight %v", p.taken, p.active, p.busy, p.inflight)
	}
	return s, won, full, failed
}

// The losers of a race learn the pool is full from the outcomes of the
// Acquires in flight: the claims are read once, not again after them.
func TestPickerReadsClaimsOnce(t *testing.T) {
	s, won, full, failed := pickRace(t, 60, 30, false)
	if len(won) != 30 || full != 30 || failed != 0 {
		t.Fatalf("%d winners, %d told full, %d failed; want 30, 30, 0", len(won), full, failed)
	}
	if n := s.lists.Load(); n != 1 {
		t.Errorf("the claims were read %d times; want once", n)
	}
}

// An Acquire that failed (not lost to another claimant) leaves its member
// free: a claimant waiting for the pool gets it instead of "no free
// members".
func TestPickerFailedAcquireFreesMember(t *testing.T) {
	_, won, full, failed := pickRace(t, 3, 2, true)
	if len(won) != 2 || full != 0 || failed != 1 {
		t.Fatalf("%d winners, %d told full, %d failed; want 2, 0, 1", len(won), full, failed)
	}
}

// cachedStore offers ListCached and counts both kinds of read.
type cachedStore struct {
	ClaimStore
	lists, cached atomic.Int32
}

func (s *cachedStore) List(ctx context.Context, kind, ns, pool string) ([]Claim, error) {
	s.lists.Add(1)
	return s.ClaimStore.List(ctx, kind, ns, pool)
}

func (s *cachedStore) ListCached(ctx context.Context, kind, ns, pool string) ([]Claim, error) {
	s.cached.Add(1)
	return s.ClaimStore.List(ctx, kind, ns, pool)
}

// The picker chooses candidates from the store's cache when it has one.
func TestPickerReadsTheCache(t *testing.T) {
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "c.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	s := &cachedStore{ClaimStore: NewSQLClaims(st)}
	ids := []DesktopID{{Kind: "vm", Namespace: "-", Member: "p-1"}}
	p := NewPicker()
	pool := PoolID{Kind: "vm", Namespace: "-", Pool: "p"}
	if _, err := p.Pick(context.Background(), s, pool, ids, "alice", time.Now(), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Pick(context.Background(), s, pool, ids, "bob", time.Now(), nil); !errors.Is(err, ErrNoFree) {
		t.Fatalf("second claim of a pool of one: %v; want ErrNoFree", err)
	}
	if s.cached.Load() != 2 || s.lists.Load() != 0 {
		t.Errorf("%d cached reads and %d consistent ones; want 2 and 0", s.cached.Load(), s.lists.Load())
	}
}

// A holder's claim is found by name, not from the pool's claims as a
// cache showed them: a claim the cache does not show yet (a retry right
// after the claim) is found through the picker's memory, and a claim the
// cache still shows after its release is not returned.
func TestHeldByDoesNotTrustTheCache(t *testing.T) {
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "c.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ctx := context.Background()
	claims := NewSQLClaims(st)
	pid := PoolID{Kind: "vm", Namespace: "-", Pool: "p"}
	ids := []DesktopID{{Kind: "vm", Namespace: "-", Member: "p-1"}, {Kind: "vm", Namespace: "-", Member: "p-2"}}
	s := &Service{picker: NewPicker()}
	p := &pool{id: pid, claims: claims}

	c, err := s.picker.Pick(ctx, claims, pid, ids, "alice", time.Now(), nil)
	if err != nil {
		t.Fatal(err)
	}
	// The cache has not seen alice's claim yet: no claims at all.
	got, ok, err := s.heldBy(ctx, p, nil, "alice")
	if err != nil || !ok || got.Desktop != c.Desktop {
		t.Fatalf("retry with a cache behind = %+v, %v, %v; want alice's claim on %s", got, ok, err, c.Desktop)
	}
	if _, ok, _ := s.heldBy(ctx, p, nil, "bob"); ok {
		t.Fatalf("bob holds nothing, heldBy found a claim")
	}
	// Released; the cache still shows it.
	if err := claims.Release(ctx, c); err != nil {
		t.Fatal(err)
	}
	if got, ok, err := s.heldBy(ctx, p, []Claim{c}, "alice"); err != nil || ok {
		t.Fatalf("after the release heldBy = %+v, %v, %v; want nothing", got, ok, err)
	}
}
