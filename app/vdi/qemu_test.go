package vdi_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/corral-dev/corral/app/fleet"
	"github.com/corral-dev/corral/app/tasks"
	"github.com/corral-dev/corral/app/vdi"
	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/backends/qemu"
	"github.com/corral-dev/corral/backends/qemu/qemutest"
	"github.com/corral-dev/corral/store"
)

// TestPoolsOnQEMU runs pools of real local-QEMU guests (the test guest,
// TCG): clones of a golden VM, a claim that boots the member, a release
// that stops it (persistent) or clones it again (ephemeral), and a pool
// delete that removes the members.
func TestPoolsOnQEMU(t *testing.T) {
	kernel, initrd := qemutest.Guest(t)
	ctx := context.Background()
	b, err := qemu.New(qemu.Options{Dir: t.TempDir(), Accel: "tcg", Kernel: kernel, Initrd: initrd, Append: qemutest.Append, ShutdownTimeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Create(ctx, backends.Spec{Name: "gold", Type: backends.TypeVM, CPUs: 1, MemoryMiB: 128, DiskMiB: 64}); err != nil {
		t.Fatal(err)
	}
	f := fleet.New(fleet.Options{Timeout: time.Minute})
	if err := f.Add(b); err != nil {
		t.Fatal(err)
	}
	st := openStore(t)
	tm := tasks.New(st, tasks.Options{})
	t.Cleanup(tm.Close)
	svc := vdi.New(vdi.Options{Fleet: f, Tasks: tm, Store: st})
	ref := func(name string) backends.InstanceRef {
		return backends.InstanceRef{Backend: backends.KindQEMU, Context: "local", Name: name}
	}
	t.Cleanup(func() {
		for _, n := range []string{"desk-1", "desk-2", "desk-3", "eph-1"} {
			_ = b.Power(context.Background(), ref(n), backends.ActionStop)
		}
	})
	state := func(name string) backends.State {
		in, err := b.Get(ctx, ref(name))
		if err != nil {
			t.Fatalf("get %s: %v", name, err)
		}
		return in.State
	}
	wait := func(id string) {
		for range 600 {
			tk, _, _ := tm.Get(ctx, id)
			if tk.Status != store.TaskRunning {
				if tk.Status != store.TaskDone {
					t.Fatalf("task %s: %+v", id, tk)
				}
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Fatalf("task %s did not end", id)
	}

	p, err := svc.CreatePool(ctx, admin, vdi.PoolRequest{Name: "desk", Golden: "qemu/local/-/gold", Size: 2})
	if err != nil {
		t.Fatalf("create pool: %v", err)
	}
	if len(p.Members) != 2 || p.Members[0].State != "stopped" {
		t.Fatalf("pool = %+v", p)
	}
	d, err := svc.Claim(ctx, alice, "rest", "vm/-/desk")
	if err != nil || d.StartError != "" || !d.Running {
		t.Fatalf("claim = %+v, %v", d, err)
	}
	member := d.ID[len("vm/-/"):]
	if state(member) != backends.StateRunning {
		t.Fatalf("%s is %s after the claim", member, state(member))
	}
	tk, err := svc.Release(ctx, alice, "rest", d.ID)
	if err != nil {
		t.Fatal(err)
	}
	wait(tk.ID)
	if state(member) != backends.StateStopped {
		t.Fatalf("%s is %s after the release", member, state(member))
	}

	if _, err := svc.CreatePool(ctx, admin, vdi.PoolRequest{Name: "eph", Golden: "qemu/local/-/gold", Size: 1, Ephemeral: true}); err != nil {
		t.Fatal(err)
	}
	before, _ := b.Get(ctx, ref("eph-1"))
	if _, err := svc.Claim(ctx, bob, "rest", "vm/-/eph"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // the recreated member's creation time must differ
	tk, err = svc.Release(ctx, bob, "rest", "vm/-/eph-1")
	if err != nil {
		t.Fatal(err)
	}
	wait(tk.ID)
	after, err := b.Get(ctx, ref("eph-1"))
	if err != nil || after.State != backends.StateStopped || !after.Created.After(before.Created) {
		t.Fatalf("ephemeral member after release = %+v, %v (before: created %v)", after, err, before.Created)
	}

	// Live resize: grow the persistent pool by one real clone, then
	// shrink it back (the new member is unclaimed, the highest number).
	r, err := svc.ResizePool(ctx, boss, "cli", "vm/-/desk", 3)
	if err != nil || len(r.Added) != 1 || r.Added[0] != "vm/-/desk-3" {
		t.Fatalf("grow to 3 = %+v, %v", r, err)
	}
	if st := state("desk-3"); st != backends.StateStopped {
		t.Fatalf("the new member desk-3 is %s, want a stopped clone", st)
	}
	if r, err := svc.ResizePool(ctx, boss, "cli", "vm/-/desk", 2); err != nil || len(r.Removed) != 1 || r.Removed[0] != "vm/-/desk-3" {
		t.Fatalf("shrink to 2 = %+v, %v", r, err)
	}
	if _, err := b.Get(ctx, ref("desk-3")); !errors.Is(err, backends.ErrNotFound) {
		t.Fatalf("desk-3 after the shrink: %v", err)
	}

	for _, id := range []string{"vm/-/desk", "vm/-/eph"} {
		if err := svc.DeletePool(ctx, admin, id); err != nil {
			t.Fatalf("delete %s: %v", id, err)
		}
	}
	for _, n := range []string{"desk-1", "desk-2", "eph-1"} {
		if _, err := b.Get(ctx, ref(n)); !errors.Is(err, backends.ErrNotFound) {
			t.Errorf("%s after the pool's delete: %v", n, err)
		}
	}
	if _, err := b.Get(ctx, ref("gold")); err != nil {
		t.Fatalf("the golden VM: %v", err)
	}
}
