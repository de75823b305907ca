package snapshot_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/corral-dev/corral/app/snapshot"
	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/backends/sim"
)

func TestPrune(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	clock := func() time.Time { now = now.Add(time.Minute); return now }
	// Two contexts with an instance of the same name: pruning one must not
	// touch the other.
	a := sim.New(sim.Options{Context: "a", Now: clock})
	b := sim.New(sim.Options{Context: "b", Now: clock})
	var refs []backends.InstanceRef
	for _, be := range []*sim.Backend{a, b} {
		in, err := be.Create(ctx, backends.Spec{Name: "web"})
		if err != nil {
			t.Fatal(err)
		}
		refs = append(refs, in.Ref)
		for _, n := range []string{"auto-1", "manual", "auto-2", "auto-3", "before-upgrade", "auto-4"} {
			if _, err := be.CreateSnapshot(ctx, in.Ref, n); err != nil {
				t.Fatal(err)
			}
		}
	}
	deleted, err := snapshot.Prune(ctx, a, refs[0], 2)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(deleted, []string{"auto-1", "auto-2"}) {
		t.Fatalf("deleted %v, want the two oldest auto- snapshots", deleted)
	}
	names := func(be *sim.Backend, ref backends.InstanceRef) []string {
		list, _ := be.Snapshots(ctx, ref)
		var out []string
		for _, s := range list {
			out = append(out, s.Name)
		}
		return out
	}
	if got := names(a, refs[0]); !slices.Equal(got, []string{"manual", "auto-3", "before-upgrade", "auto-4"}) {
		t.Fatalf("left in a: %v", got)
	}
	if got := names(b, refs[1]); len(got) != 6 {
		t.Fatalf("the same-named instance in context b lost snapshots: %v", got)
	}
	if d, _ := snapshot.Prune(ctx, a, refs[0], 0); !slices.Equal(d, []string{"auto-3", "auto-4"}) {
		t.Fatalf("keep 0 deleted %v", d)
	}
	if got := names(a, refs[0]); !slices.Equal(got, []string{"manual", "before-upgrade"}) {
		t.Fatalf("hand-named snapshots must stay: %v", got)
	}
	if _, err := snapshot.Prune(ctx, a, refs[0], -1); !errors.Is(err, backends.ErrInvalid) {
		t.Fatalf("keep -1: %v", err)
	}
}
