package move_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/corral-dev/corral/app/fleet"
	"github.com/corral-dev/corral/app/move"
	"github.com/corral-dev/corral/app/tasks"
	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/backends/qemu"
	"github.com/corral-dev/corral/backends/qemu/qemutest"
	"github.com/corral-dev/corral/backends/sim"
	"github.com/corral-dev/corral/store"
)

// BenchmarkDestinations is the move dialog's list of destinations for a
// stopped local QEMU VM beside 8 other contexts: the source's disk and
// snapshots are read with the real qemu-img (figures in
// docs/performance.md).
func BenchmarkDestinations(b *testing.B) {
	qemutest.Tools(b)
	ctx := context.Background()
	q, err := qemu.New(qemu.Options{Dir: b.TempDir(), Accel: "tcg"})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := q.Create(ctx, backends.Spec{Name: "web", CPUs: 1, MemoryMiB: 256, DiskMiB: 64}); err != nil {
		b.Fatal(err)
	}
	st, err := store.Open(ctx, filepath.Join(b.TempDir(), "c.db"), store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	f := fleet.New(fleet.Options{Timeout: time.Minute})
	if err := f.Add(q); err != nil {
		b.Fatal(err)
	}
	for i := range 8 {
		if err := f.Add(&local{Backend: sim.New(sim.Options{Context: fmt.Sprintf("d%d", i)}), firmware: map[string]backends.Firmware{}}); err != nil {
			b.Fatal(err)
		}
	}
	f.Refresh(ctx)
	tm := tasks.New(st, tasks.Options{})
	b.Cleanup(tm.Close)
	svc := move.New(f, tm, move.Options{Registry: st, FreeSpace: func(string) (int64, error) { return 1 << 40, nil }})
	for b.Loop() {
		ds, err := svc.Destinations(ctx, "qemu/local/-/web")
		if err != nil || len(ds) != 9 {
			b.Fatalf("%d destinations, %v", len(ds), err)
		}
	}
}
