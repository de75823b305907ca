package schedule_test

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/corral-dev/corral/app/fleet"
	"github.com/corral-dev/corral/app/folders"
	"github.com/corral-dev/corral/app/instances"
	"github.com/corral-dev/corral/app/schedule"
	"github.com/corral-dev/corral/app/tasks"
	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/backends/qemu"
	"github.com/corral-dev/corral/backends/qemu/qemutest"
	"github.com/corral-dev/corral/store"
)

// TestPowerScheduleQEMU fires power schedules, with an injected clock,
// against a real local-QEMU guest: a start schedule boots it to its
// marker, a shutdown schedule stops it through ACPI, and the next stop
// boundary finds it stopped and is skipped.
func TestPowerScheduleQEMU(t *testing.T) {
	kernel, initrd := qemutest.Guest(t)
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	b, err := qemu.New(qemu.Options{Dir: t.TempDir(), Accel: "tcg", Kernel: kernel, Initrd: initrd, Append: qemutest.Append,
		ShutdownTimeout: 60 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	vm := backends.InstanceRef{Backend: backends.KindQEMU, Context: "local", Name: "sched"}
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if in, err := b.Get(cctx, vm); err == nil && in.State != backends.StateStopped {
			b.Power(cctx, vm, backends.ActionStop)
		}
	})
	if _, err := b.Create(ctx, backends.Spec{Name: "sched", CPUs: 1, MemoryMiB: 256, DiskMiB: 64}); err != nil {
		t.Fatal(err)
	}
	c := &clock{t: time.Date(2026, 6, 1, 8, 0, 0, 0, berlin)}
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "c.db"), store.Options{Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	f := fleet.New(fleet.Options{Logger: log, Timeout: 2 * time.Minute})
	if err := f.Add(b); err != nil {
		t.Fatal(err)
	}
	f.Refresh(ctx)
	tm := tasks.New(st, tasks.Options{Logger: log, Now: c.Now})
	defer tm.Close()
	in := instances.New(f, tm, st, log)
	svc := schedule.New(st, f, tm, folders.New(st, f, tm, in, folders.Options{}), in,
		schedule.Options{Now: c.Now, Logger: log, DispatchTimeout: 3 * time.Minute})
	create := func(action, cron string) {
		t.Helper()
		if _, _, err := svc.Create(ctx, admin, schedule.Request{Ref: vm.String(), Kind: "power", Action: action, Cron: cron, TZ: "Europe/Berlin"}); err != nil {
			t.Fatal(err)
		}
	}
	create("start", "0 9 * * *")
	create("shutdown", "0 17 * * *")
	create("stop", "30 17 * * *")
	tick := func(at time.Time, want string) {
		t.Helper()
		c.Set(at)
		fired, err := svc.Tick(ctx, at)
		if err != nil {
			t.Fatal(err)
		}
		if len(fired) != 1 || fired[0].Result != want {
			t.Fatalf("tick at %s: %+v, want one %s", at.Format("15:04"), fired, want)
		}
	}

	tick(at(9, 0).Add(5*time.Second), schedule.ResultOK)
	serial, err := b.SerialLog(vm)
	if err != nil {
		t.Fatal(err)
	}
	qemutest.WaitMarker(t, serial, qemutest.Marker, 1, 3*time.Minute)

	tick(at(17, 0).Add(5*time.Second), schedule.ResultOK)
	if got, err := b.Get(ctx, vm); err != nil || got.State != backends.StateStopped {
		t.Fatalf("after the shutdown schedule: %+v, %v", got.State, err)
	}
	tick(at(17, 30), schedule.ResultSkipped)
}
