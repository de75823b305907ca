package qemu_test

import (
	"errors"
	"os/exec"
	"testing"

	"github.com/corral-dev/corral/backends"
)

// TestImport imports a raw image: the VM's disk is a qcow2 copy of the
// same virtual size, the name is then taken, and the disk is offered back
// as a move source while the VM is stopped.
func TestImport(t *testing.T) {
	b := newBackend(t, "")
	ctx := ctxT(t)
	raw := t.TempDir() + "/in.raw"
	if out, err := exec.Command("qemu-img", "create", "-q", "-f", "raw", raw, "40M").CombinedOutput(); err != nil {
		t.Fatalf("qemu-img create: %v: %s", err, out)
	}
	in, err := b.Import(ctx, backends.Spec{Name: "imp", CPUs: 1, MemoryMiB: 256, Tags: []string{"web"}}, raw, "raw")
	if err != nil {
		t.Fatalf("Import: %v", err)
	}
	if in.DiskMiB != 40 || in.State != backends.StateStopped || len(in.Tags) != 1 {
		t.Fatalf("Import = %+v, want a stopped VM with a 40 MiB disk and its tag", in)
	}
	d, err := b.DiskSource(ctx, in.Ref)
	if err != nil {
		t.Fatalf("DiskSource: %v", err)
	}
	if d.Format != "qcow2" || d.VirtualMiB != 40 || d.Firmware != backends.FirmwareBIOS {
		t.Fatalf("DiskSource = %+v, want a 40 MiB qcow2 booting BIOS", d)
	}
	if _, err := b.Import(ctx, backends.Spec{Name: "imp"}, raw, "raw"); !errors.Is(err, backends.ErrConflict) {
		t.Fatalf("Import onto a name in use: %v, want ErrConflict", err)
	}
	if _, err := b.Import(ctx, backends.Spec{Name: "imp2"}, raw, "qcow2"); !errors.Is(err, backends.ErrInvalid) {
		t.Fatalf("Import of a raw file said to be qcow2: %v, want ErrInvalid", err)
	}
	if _, err := b.Get(ctx, ref("imp2")); !errors.Is(err, backends.ErrNotFound) {
		t.Fatalf("a refused import left %v behind", err)
	}
}
