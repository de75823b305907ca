package move_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corral-dev/corral/app/fleet"
	"github.com/corral-dev/corral/app/move"
	"github.com/corral-dev/corral/app/tasks"
	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/backends/libvirt"
	"github.com/corral-dev/corral/backends/libvirt/libvirttest"
	"github.com/corral-dev/corral/backends/qemu"
	"github.com/corral-dev/corral/backends/qemu/qemutest"
	"github.com/corral-dev/corral/store"
)

const bootTimeout = 2 * time.Minute

// diskHolds reports whether the image at path (any format) contains
// want, read through qemu-img as the guest would see the disk.
func diskHolds(t *testing.T, path, want string) bool {
	t.Helper()
	raw := filepath.Join(t.TempDir(), "check.raw")
	if out, err := exec.Command("qemu-img", "convert", "-U", "-O", "raw", path, raw).CombinedOutput(); err != nil {
		t.Fatalf("qemu-img convert: %v: %s", err, out)
	}
	data, err := os.ReadFile(raw)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Contains(data, []byte(want))
}

// TestMoveQEMUToLibvirtAndBack moves a real guest from local QEMU to a
// private libvirtd and back: first stopped (the copy stays stopped and is
// then booted to the marker), then running (the move shuts the guest down
// through ACPI and boots the copy, which reaches the marker). The disk's
// content travels: a pattern written into the source image is in each
// copy, and each source is deleted (deleteSource).
func TestMoveQEMUToLibvirtAndBack(t *testing.T) {
	kernel, initrd := qemutest.Guest(t)
	d := libvirttest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	q, err := qemu.New(qemu.Options{Dir: t.TempDir(), Accel: "tcg", Kernel: kernel, Initrd: initrd, Append: qemutest.Append, ShutdownTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	lv := libvirt.New(libvirt.Options{Context: "lvd", URI: d.URI, DataDir: d.DataDir, Kernel: kernel, Initrd: initrd, Append: qemutest.Append})
	t.Cleanup(func() { _ = lv.Close() })
	t.Cleanup(func() {
		c := context.Background()
		for _, b := range []backends.Backend{q, lv} {
			list, _ := b.List(c)
			for _, in := range list {
				if in.State != backends.StateStopped {
					_ = b.Power(c, in.Ref, backends.ActionStop)
				}
			}
		}
	})

	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "c.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	f := fleet.New(fleet.Options{Timeout: time.Minute})
	for _, b := range []backends.Backend{q, lv} {
		if err := f.Add(b); err != nil {
			t.Fatal(err)
		}
	}
	tm := tasks.New(st, tasks.Options{})
	t.Cleanup(tm.Close)
	svc := move.New(f, tm, move.Options{Registry: st, ShutdownTimeout: time.Minute})

	// The source: a qemu VM imported from a raw image carrying a pattern.
	const pattern = "CORRAL-MOVE-PATTERN-7f3a"
	raw := filepath.Join(t.TempDir(), "seed.raw")
	if err := os.WriteFile(raw, append([]byte(pattern), make([]byte, 32<<20-len(pattern))...), 0o600); err != nil {
		t.Fatal(err)
	}
	src, err := q.Import(ctx, backends.Spec{Name: "mover", CPUs: 1, MemoryMiB: 256, Tags: []string{"moved"}}, raw, "raw")
	if err != nil {
		t.Fatalf("Import into qemu: %v", err)
	}
	f.Refresh(ctx)

	run := func(req move.Request) {
		t.Helper()
		start := time.Now()
		task, pf, err := svc.Move(ctx, tasks.Origin{Actor: "t", Surface: "test"}, req)
		if err != nil {
			t.Fatalf("Move(%+v): %v (refusals %+v)", req, err, pf.Refusals)
		}
		done, lines := waitTask(t, tm, task.ID)
		var log []string
		for _, l := range lines {
			log = append(log, l.Line)
		}
		if done.Status != store.TaskDone {
			t.Fatalf("move task = %s %q; log:\n%s", done.Status, done.Error, strings.Join(log, "\n"))
		}
		t.Logf("move %s -> %s/%s took %v:\n  %s", req.Ref, req.ToBackend, req.ToContext, time.Since(start).Round(100*time.Millisecond), strings.Join(log, "\n  "))
		f.Refresh(ctx)
	}

	// 1. qemu -> libvirt, stopped.
	run(move.Request{Ref: src.Ref.String(), ToBackend: "libvirt", ToContext: "lvd", DeleteSource: true})
	lref := backends.InstanceRef{Backend: backends.KindLibvirt, Context: "lvd", Name: "mover"}
	in, err := lv.Get(ctx, lref)
	if err != nil || in.State != backends.StateStopped || in.CPUs != 1 || in.MemoryMiB != 256 || len(in.Tags) != 1 {
		t.Fatalf("the copy on libvirt = %+v, %v; want stopped, 1 CPU, 256 MiB, its tag", in, err)
	}
	if _, err := q.Get(ctx, src.Ref); err == nil {
		t.Fatalf("deleteSource: the qemu source is still there")
	}
	disk, err := lv.DiskSource(ctx, lref)
	if err != nil || disk.Format != "qcow2" || disk.VirtualMiB != 32 || !diskHolds(t, disk.Path, pattern) {
		t.Fatalf("the libvirt copy's disk = %+v, %v; want a 32 MiB qcow2 holding the pattern", disk, err)
	}
	if err := lv.Power(ctx, lref, backends.ActionStart); err != nil {
		t.Fatalf("start on libvirt: %v", err)
	}
	lg, _ := lv.SerialLog(lref)
	qemutest.WaitMarker(t, lg, qemutest.Marker, 1, bootTimeout)
	f.Refresh(ctx)

	// 2. libvirt -> qemu, running: shut down, moved, booted again.
	run(move.Request{Ref: lref.String(), ToBackend: "qemu", ToContext: "local", DeleteSource: true})
	back := backends.InstanceRef{Backend: backends.KindQEMU, Context: "local", Name: "mover"}
	qg, err := q.SerialLog(back)
	if err != nil {
		t.Fatal(err)
	}
	qemutest.WaitMarker(t, qg, qemutest.Marker, 1, bootTimeout)
	if in, err := q.Get(ctx, back); err != nil || in.State != backends.StateRunning {
		t.Fatalf("the copy back on qemu = %+v, %v; want running (the source ran)", in, err)
	}
	if _, err := lv.Get(ctx, lref); err == nil {
		t.Fatalf("deleteSource: the libvirt source is still there")
	}
	if err := q.Power(ctx, back, backends.ActionStop); err != nil {
		t.Fatal(err)
	}
	qd, err := q.DiskSource(ctx, back)
	if err != nil || qd.VirtualMiB != 32 || !diskHolds(t, qd.Path, pattern) {
		t.Fatalf("the qemu copy's disk = %+v, %v; want 32 MiB holding the pattern", qd, err)
	}
}

// failingImporter is a real local-QEMU context whose import creates the
// copy and then reports a failure, as a backend that dies halfway would.
type failingImporter struct{ *qemu.Backend }

func (f failingImporter) Import(ctx context.Context, spec backends.Spec, path, format string) (backends.Instance, error) {
	if _, err := f.Backend.Import(ctx, spec, path, format); err != nil {
		return backends.Instance{}, err
	}
	return backends.Instance{}, backends.Failed("the destination failed after copying the disk", nil)
}

// TestMoveFailureKeepsRealSource: a running qemu guest whose move fails
// after the destination created the copy is running again afterwards,
// with its disk as it was, and the copy is gone.
func TestMoveFailureKeepsRealSource(t *testing.T) {
	kernel, initrd := qemutest.Guest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	opts := qemu.Options{Accel: "tcg", Kernel: kernel, Initrd: initrd, Append: qemutest.Append, ShutdownTimeout: 30 * time.Second}
	opts.Context, opts.Dir = "local", t.TempDir()
	q, err := qemu.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	opts.Context, opts.Dir = "other", t.TempDir()
	other, err := qemu.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, b := range []*qemu.Backend{q, other} {
			list, _ := b.List(context.Background())
			for _, in := range list {
				if in.State != backends.StateStopped {
					_ = b.Power(context.Background(), in.Ref, backends.ActionStop)
				}
			}
		}
	})
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "c.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	f := fleet.New(fleet.Options{Timeout: time.Minute})
	for _, b := range []backends.Backend{q, failingImporter{other}} {
		if err := f.Add(b); err != nil {
			t.Fatal(err)
		}
	}
	tm := tasks.New(st, tasks.Options{})
	t.Cleanup(tm.Close)
	svc := move.New(f, tm, move.Options{Registry: st, ShutdownTimeout: time.Minute})

	const pattern = "CORRAL-SOURCE-STAYS-91c2"
	raw := filepath.Join(t.TempDir(), "seed.raw")
	if err := os.WriteFile(raw, append([]byte(pattern), make([]byte, 16<<20-len(pattern))...), 0o600); err != nil {
		t.Fatal(err)
	}
	src, err := q.Import(ctx, backends.Spec{Name: "keeper", CPUs: 1, MemoryMiB: 256, Start: true}, raw, "raw")
	if err != nil {
		t.Fatalf("Import: %v", err)
	}
	serial, _ := q.SerialLog(src.Ref)
	qemutest.WaitMarker(t, serial, qemutest.Marker, 1, bootTimeout)
	f.Refresh(ctx)

	task, _, err := svc.Move(ctx, tasks.Origin{Actor: "t", Surface: "test"}, move.Request{Ref: src.Ref.String(), ToBackend: "qemu", ToContext: "other", DeleteSource: true})
	if err != nil {
		t.Fatalf("Move: %v", err)
	}
	done, lines := waitTask(t, tm, task.ID)
	if done.Status != store.TaskError || !strings.Contains(done.Error, "failed after copying") {
		t.Fatalf("task = %s %q, want the destination's failure; log %+v", done.Status, done.Error, lines)
	}
	if _, err := other.Get(ctx, backends.InstanceRef{Backend: backends.KindQEMU, Context: "other", Name: "keeper"}); err == nil {
		t.Fatal("the copy on the destination was not removed")
	}
	// The source runs again (a new boot, a new serial log) with its disk.
	qemutest.WaitMarker(t, serial, qemutest.Marker, 1, bootTimeout)
	in, err := q.Get(ctx, src.Ref)
	if err != nil || in.State != backends.StateRunning {
		t.Fatalf("source after the failed move = %+v, %v; want running", in, err)
	}
	if err := q.Power(ctx, src.Ref, backends.ActionStop); err != nil {
		t.Fatal(err)
	}
	d, err := q.DiskSource(ctx, src.Ref)
	if err != nil || !diskHolds(t, d.Path, pattern) {
		t.Fatalf("the source's disk = %+v, %v; want it holding its pattern", d, err)
	}
}
