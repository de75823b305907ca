package vdi

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/store"
)

// TestClaimOfRemovedMember: a claimant that read the pool before a
// shrink removed a member, and claims that member after the shrink's
// hold ended, is told to claim again, and its claim is given up.
func TestClaimOfRemovedMember(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "c.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	s := New(Options{Store: st})
	if err := st.CreateVDIPool(ctx, store.VDIPool{ID: "vm/-/desk", Kind: "vm", Namespace: "-", Name: "desk", Golden: "sim/lab/-/gold"}); err != nil {
		t.Fatal(err)
	}
	for i, n := range []string{"desk-1", "desk-2"} {
		if err := st.AddVDIMember(ctx, store.VDIMember{Desktop: "vm/-/" + n, Pool: "vm/-/desk", Index: i + 1, Ref: "sim/lab/-/" + n}); err != nil {
			t.Fatal(err)
		}
	}
	row, err := st.VDIPool(ctx, "vm/-/desk")
	if err != nil {
		t.Fatal(err)
	}
	p := &pool{VDIPool: row, id: PoolID{Kind: "vm", Namespace: "-", Pool: "desk"}, claims: s.sql}
	// desk-1 is held; desk-2 is removed after p was read.
	if _, err := s.sql.Acquire(ctx, DesktopID{Kind: "vm", Namespace: "-", Member: "desk-1"}, "desk", "bob@example.com", time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := st.DeleteVDIMember(ctx, "vm/-/desk-2"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.acquire(ctx, p, "alice@example.com"); !errors.Is(err, backends.ErrConflict) {
		t.Fatalf("claim of the removed desk-2: %v, want a Conflict to claim again", err)
	} else if want := "desktop vm/-/desk-2 left the pool vm/-/desk while you claimed it (the pool shrank): claim again"; err.Error() != want {
		t.Fatalf("claim of the removed desk-2: %q, want %q", err, want)
	}
	if _, err := s.sql.Get(ctx, DesktopID{Kind: "vm", Namespace: "-", Member: "desk-2"}); !errors.Is(err, ErrNoClaim) {
		t.Fatalf("the claim on the removed desk-2 stays: %v", err)
	}
}
