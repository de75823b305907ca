// Package claimtest is the conformance suite every vdi.ClaimStore runs:
// the compare-and-swap contract case by case, and the claim race of 200
// claimants over 100 members (spec/vdi.md, DESIGN.md section 9).
package claimtest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/corral-dev/corral/app/vdi"
)

// Run checks the contract on the store newStore returns; each call must
// return a store with no claims in namespace ns.
func Run(t *testing.T, ns string, newStore func(t *testing.T) vdi.ClaimStore) {
	ctx := context.Background()
	t0 := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	d := vdi.DesktopID{Kind: "vm", Namespace: ns, Member: "devpool-1"}

	t.Run("FirstWriterWins", func(t *testing.T) {
		s := newStore(t)
		c, err := s.Acquire(ctx, d, "devpool", "alice@example.com", t0)
		if err != nil {
			t.Fatalf("acquire: %v", err)
		}
		if c.Holder != "alice@example.com" || c.Desktop != d || c.Pool != "devpool" || c.Version == "" || c.Session == "" {
			t.Fatalf("claim = %+v", c)
		}
		if !c.Expires.Equal(t0.Add(vdi.ClaimTTL)) {
			t.Errorf("expires %v, want %v", c.Expires, t0.Add(vdi.ClaimTTL))
		}
		for _, who := range []string{"bob@example.com", "alice@example.com"} {
			if _, err := s.Acquire(ctx, d, "devpool", who, t0.Add(59*time.Minute)); !errors.Is(err, vdi.ErrClaimed) {
				t.Errorf("second acquire by %s: %v, want ErrClaimed", who, err)
			}
		}
		got, err := s.Get(ctx, d)
		if err != nil || got.Holder != "alice@example.com" || got.Version != c.Version || got.Session != c.Session {
			t.Fatalf("get = %+v, %v; want the first claim", got, err)
		}
	})

	t.Run("StaleClaimReplaced", func(t *testing.T) {
		s := newStore(t)
		old, err := s.Acquire(ctx, d, "devpool", "alice@example.com", t0)
		if err != nil {
			t.Fatal(err)
		}
		c, err := s.Acquire(ctx, d, "devpool", "bob@example.com", t0.Add(vdi.ClaimTTL+time.Second))
		if err != nil {
			t.Fatalf("replacing an expired claim: %v", err)
		}
		if c.Holder != "bob@example.com" || c.Session == old.Session || c.Version == old.Version {
			t.Fatalf("replacement = %+v (old %+v)", c, old)
		}
		// The old holder's view is stale: its release must not end bob's claim.
		if err := s.Release(ctx, old); !errors.Is(err, vdi.ErrChanged) {
			t.Fatalf("release with the old version: %v, want ErrChanged", err)
		}
		if got, err := s.Get(ctx, d); err != nil || got.Holder != "bob@example.com" {
			t.Fatalf("after stale release: %+v, %v", got, err)
		}
	})

	t.Run("StaleClaimRace", func(t *testing.T) {
		s := newStore(t)
		if _, err := s.Acquire(ctx, d, "devpool", "alice@example.com", t0); err != nil {
			t.Fatal(err)
		}
		later := t0.Add(2 * vdi.ClaimTTL)
		var wg sync.WaitGroup
		var mu sync.Mutex
		var winners []string
		for i := range 20 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				who := fmt.Sprintf("user%d@example.com", i)
				_, err := s.Acquire(ctx, d, "devpool", who, later)
				if err == nil {
					mu.Lock()
					winners = append(winners, who)
					mu.Unlock()
				} else if !errors.Is(err, vdi.ErrClaimed) {
					t.Errorf("%s: %v", who, err)
				}
			}()
		}
		wg.Wait()
		if len(winners) != 1 {
			t.Fatalf("%d claimants replaced one stale claim: %v", len(winners), winners)
		}
		if got, _ := s.Get(ctx, d); got.Holder != winners[0] {
			t.Fatalf("holder %q, winner %q", got.Holder, winners[0])
		}
	})

	t.Run("UpdateIsCompareAndSwap", func(t *testing.T) {
		s := newStore(t)
		c, err := s.Acquire(ctx, d, "devpool", "alice@example.com", t0)
		if err != nil {
			t.Fatal(err)
		}
		c1 := c
		c1.Connected = t0.Add(time.Minute)
		c1 = vdi.Renew(c1, t0.Add(2*time.Minute))
		up, err := s.Update(ctx, c1)
		if err != nil {
			t.Fatalf("update: %v", err)
		}
		if up.Version == c.Version || !up.Connected.Equal(c1.Connected) || !up.Expires.Equal(t0.Add(2*time.Minute+vdi.ClaimTTL)) {
			t.Fatalf("updated = %+v", up)
		}
		stale := c
		stale.Disconnected = t0.Add(3 * time.Minute)
		if _, err := s.Update(ctx, stale); !errors.Is(err, vdi.ErrChanged) {
			t.Fatalf("update with the old version: %v, want ErrChanged", err)
		}
		up.Disconnected = t0.Add(4 * time.Minute)
		up2, err := s.Update(ctx, up)
		if err != nil {
			t.Fatal(err)
		}
		got, err := s.Get(ctx, d)
		if err != nil || !got.Disconnected.Equal(up.Disconnected) || !got.Connected.Equal(c1.Connected) || got.Version != up2.Version ||
			got.Session != c.Session || !got.Acquired.Equal(c.Acquired) || got.WasConnected() {
			t.Fatalf("get = %+v, %v", got, err)
		}
	})

	t.Run("ReleaseIsCompareAndSwap", func(t *testing.T) {
		s := newStore(t)
		c, err := s.Acquire(ctx, d, "devpool", "alice@example.com", t0)
		if err != nil {
			t.Fatal(err)
		}
		renewed, err := s.Update(ctx, vdi.Renew(c, t0.Add(time.Minute)))
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Release(ctx, c); !errors.Is(err, vdi.ErrChanged) {
			t.Fatalf("release with the old version: %v, want ErrChanged", err)
		}
		if err := s.Release(ctx, renewed); err != nil {
			t.Fatalf("release: %v", err)
		}
		if _, err := s.Get(ctx, d); !errors.Is(err, vdi.ErrNoClaim) {
			t.Fatalf("get after release: %v, want ErrNoClaim", err)
		}
		if err := s.Release(ctx, renewed); !errors.Is(err, vdi.ErrChanged) {
			t.Fatalf("second release: %v, want ErrChanged", err)
		}
		if _, err := s.Acquire(ctx, d, "devpool", "bob@example.com", t0.Add(2*time.Minute)); err != nil {
			t.Fatalf("acquire after release: %v", err)
		}
	})

	// A claim released meanwhile stays released: an Update (a renewal, a
	// session mark) must not bring it back.
	t.Run("UpdateAfterReleaseIsChanged", func(t *testing.T) {
		s := newStore(t)
		c, err := s.Acquire(ctx, d, "devpool", "alice@example.com", t0)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Release(ctx, c); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Update(ctx, vdi.Renew(c, t0.Add(time.Minute))); !errors.Is(err, vdi.ErrChanged) {
			t.Fatalf("update of a released claim: %v, want ErrChanged", err)
		}
		if got, err := s.Get(ctx, d); !errors.Is(err, vdi.ErrNoClaim) {
			t.Fatalf("after the update the claim is back: %+v, %v", got, err)
		}
	})

	t.Run("ListByPool", func(t *testing.T) {
		s := newStore(t)
		for i, p := range []string{"a", "a", "b"} {
			m := vdi.DesktopID{Kind: "vm", Namespace: ns, Member: fmt.Sprintf("%s-%d", p, i)}
			if _, err := s.Acquire(ctx, m, p, "alice@example.com", t0); err != nil {
				t.Fatal(err)
			}
		}
		a, err := s.List(ctx, "vm", ns, "a")
		if err != nil || len(a) != 2 {
			t.Fatalf("list a = %v, %v", a, err)
		}
		all, err := s.List(ctx, "vm", ns, "")
		if err != nil || len(all) != 3 {
			t.Fatalf("list all = %v, %v", all, err)
		}
	})

	t.Run("ReservedIdentityRefused", func(t *testing.T) {
		s := newStore(t)
		if _, err := s.Acquire(ctx, d, "devpool", vdi.BrokerIdentity, t0); err == nil {
			t.Fatal("the broker's identity claimed a desktop")
		}
		if _, err := s.Acquire(ctx, d, "devpool", vdi.ReconcilerIdentity, t0); err != nil {
			t.Fatalf("the reconciler's claim: %v", err)
		}
		if _, err := s.Acquire(ctx, d, "devpool", "alice@example.com", t0); !errors.Is(err, vdi.ErrClaimed) {
			t.Fatalf("a user claimed a member the reconciler holds: %v", err)
		}
	})
}

// RaceResult is the outcome of one race.
type RaceResult struct {
	Winners   map[string]string // member -> holder
	Losers    int
	Latencies []time.Duration // one per claimant, sorted
}

// P99 returns the 99th percentile of the claim latencies.
func (r RaceResult) P99() time.Duration {
	if len(r.Latencies) == 0 {
		return 0
	}
	return r.Latencies[(len(r.Latencies)*99+99)/100-1]
}

// Race runs claimants concurrent claimants over a pool of members members
// in namespace ns. Claimant i uses stores[i%len(stores)], so several
// stores over one backing state stand for several processes. Without a
// picker each claimant does the naive thing: list the pool's claims, then
// try the free members from a random one on until an Acquire wins, and
// list again while any looked free; with pickers (one per store, as one
// per broker process) it claims through vdi.Picker, the broker's path.
// It fails tb if a member is given twice or an error other than
// ErrClaimed occurs.
func Race(tb testing.TB, stores []vdi.ClaimStore, ns, pool string, claimants, members int, usePicker bool) RaceResult {
	tb.Helper()
	ctx := context.Background()
	now := time.Now()
	ids := make([]vdi.DesktopID, members)
	for i := range ids {
		ids[i] = vdi.DesktopID{Kind: "vm", Namespace: ns, Member: fmt.Sprintf("%s-%d", pool, i+1)}
	}
	pickers := make([]*vdi.Picker, len(stores))
	for i := range pickers {
		pickers[i] = vdi.NewPicker()
	}
	pid := vdi.PoolID{Kind: "vm", Namespace: ns, Pool: pool}
	var (
		mu   sync.Mutex
		res  = RaceResult{Winners: map[string]string{}}
		wg   sync.WaitGroup
		gate = make(chan struct{})
	)
	for i := range claimants {
		wg.Add(1)
		go func() {
			defer wg.Done()
			who := fmt.Sprintf("user%03d@example.com", i)
			s := stores[i%len(stores)]
			<-gate
			start := time.Now()
			var won string
			var err error
			if usePicker {
				var c vdi.Claim
				c, err = pickers[i%len(stores)].Pick(ctx, s, pid, ids, who, now, nil)
				won = c.Desktop.Member
				if errors.Is(err, vdi.ErrNoFree) {
					err = nil
				}
			} else {
				won, err = claimOne(ctx, s, ns, pool, who, ids, now)
			}
			took := time.Since(start)
			mu.Lock()
			defer mu.Unlock()
			res.Latencies = append(res.Latencies, took)
			switch {
			case err != nil:
				tb.Errorf("%s: %v", who, err)
			case won == "":
				res.Losers++
			default:
				if prev, dup := res.Winners[won]; dup {
					tb.Errorf("member %s given twice: to %s and %s", won, prev, who)
				}
				res.Winners[won] = who
			}
		}()
	}
	close(gate)
	wg.Wait()
	slices.Sort(res.Latencies)
	return res
}

func claimOne(ctx context.Context, s vdi.ClaimStore, ns, pool, who string, ids []vdi.DesktopID, now time.Time) (string, error) {
	for {
		claims, err := s.List(ctx, "vm", ns, pool)
		if err != nil {
			return "", err
		}
		held := map[string]bool{}
		for _, c := range claims {
			held[c.Desktop.Member] = true
		}
		var free []vdi.DesktopID
		for _, d := range ids {
			if !held[d.Member] {
				free = append(free, d)
			}
		}
		if len(free) == 0 {
			return "", nil
		}
		off := rand.IntN(len(free))
		for i := range free {
			d := free[(off+i)%len(free)]
			_, err := s.Acquire(ctx, d, pool, who, now)
			if err == nil {
				return d.Member, nil
			}
			if !errors.Is(err, vdi.ErrClaimed) {
				return "", err
			}
		}
	}
}

// CheckRace fails tb unless the race gave exactly members winners,
// distinct members each, and every other claimant lost.
func CheckRace(tb testing.TB, r RaceResult, claimants, members int) {
	tb.Helper()
	if len(r.Winners) != members || r.Losers != claimants-members {
		tb.Fatalf("%d winners and %d losers; want %d and %d", len(r.Winners), r.Losers, members, claimants-members)
	}
	holders := map[string]bool{}
	for m, h := range r.Winners {
		if holders[h] {
			tb.Fatalf("%s won twice (last %s)", h, m)
		}
		holders[h] = true
	}
}
