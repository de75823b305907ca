package qemu_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/backends/qemu"
	"github.com/corral-dev/corral/backends/qemu/qemutest"
)

// BenchmarkConsoles measures the console list of a running VM whose guest
// serves no RDP: what every VM page, console page and console token of
// such a guest asks (figures in docs/performance.md).
func BenchmarkConsoles(b *testing.B) {
	kernel, initrd := qemutest.Guest(b)
	be, err := qemu.New(qemu.Options{Dir: b.TempDir(), Accel: "tcg", Kernel: kernel, Initrd: initrd, Append: qemutest.Append,
		ShutdownTimeout: 30 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	r := ref("bench")
	if _, err := be.Create(ctx, backends.Spec{Name: "bench", CPUs: 1, MemoryMiB: 256, DiskMiB: 64, Start: true}); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = be.Power(sctx, r, backends.ActionStop)
	})
	for b.Loop() {
		kinds, err := be.Consoles(ctx, r)
		if err != nil || !slices.Contains(kinds, backends.ConsoleVNC) {
			b.Fatalf("Consoles = %v, %v", kinds, err)
		}
	}
}
