package move_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/backends/sim"
)

// counted is a source that counts the reads of its disk and snapshots.
type counted struct {
	*local
	disks, snaps atomic.Int64
}

func (c *counted) DiskSource(ctx context.Context, ref backends.InstanceRef) (backends.Disk, error) {
	c.disks.Add(1)
	return c.local.DiskSource(ctx, ref)
}

func (c *counted) Snapshots(ctx context.Context, ref backends.InstanceRef) ([]backends.Snapshot, error) {
	c.snaps.Add(1)
	return c.local.Snapshots(ctx, ref)
}

// TestDestinationsReadTheSourceOnce: the destinations of a move are
// planned against one read of the source's disk and snapshots, however
// many contexts there are, and every destination still gets what those
// reads said (the snapshot warning).
func TestDestinationsReadTheSourceOnce(t *testing.T) {
	src := &counted{local: &local{Backend: sim.New(sim.Options{Context: "src"}), firmware: map[string]backends.Firmware{}}}
	var extra []backends.Backend
	extra = append(extra, src)
	for _, c := range []string{"d1", "d2", "d3", "d4"} {
		extra = append(extra, &local{Backend: sim.New(sim.Options{Context: c}), firmware: map[string]backends.Firmware{}})
	}
	e := newEnv(t, extra...)
	ctx := context.Background()
	e.create(t, src, backends.Spec{Name: "web", DiskMiB: 64})
	if _, err := src.CreateSnapshot(ctx, backends.InstanceRef{Backend: backends.KindSim, Context: "src", Name: "web"}, "before"); err != nil {
		t.Fatal(err)
	}
	ds, err := e.svc.Destinations(ctx, "sim/src/-/web")
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != 8 { // a, b, plain, src and the four d contexts
		t.Fatalf("%d destinations, want 8: %+v", len(ds), ds)
	}
	if d, s := src.disks.Load(), src.snaps.Load(); d != 1 || s != 1 {
		t.Errorf("Destinations read the disk %d times and the snapshots %d times, want once each", d, s)
	}
	ok := 0
	for _, d := range ds {
		if !d.OK {
			continue
		}
		ok++
		if !strings.Contains(strings.Join(d.Warnings, "\n"), "1 snapshot(s) of web stay with the source") {
			t.Errorf("%s: warnings %q lack the snapshot warning", d.Context, d.Warnings)
		}
	}
	if ok != 6 { // every local context but the source itself
		t.Errorf("%d destinations OK, want 6: %+v", ok, ds)
	}
}
