package libvirt_test

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/backends/backendtest"
	"github.com/corral-dev/corral/backends/libvirt"
	"github.com/corral-dev/corral/backends/libvirt/libvirttest"
	"github.com/corral-dev/corral/backends/qemu/qemutest"
)

// bootTimeout bounds one boot of the test guest under libvirt and TCG: the
// first start also waits for libvirtd's QEMU capability probe (~9 s).
const bootTimeout = 2 * time.Minute

// newDaemonBackend returns a backend on a private libvirtd (started for
// this test) whose new domains boot the test guest under TCG.
func newDaemonBackend(t *testing.T) *libvirt.Backend {
	t.Helper()
	kernel, initrd := qemutest.Guest(t)
	d := libvirttest.Start(t)
	b := libvirt.New(libvirt.Options{Context: "lvd", URI: d.URI, DataDir: d.DataDir,
		Kernel: kernel, Initrd: initrd, Append: qemutest.Append})
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// markerWaiter waits for one more marker than last time for a domain; the
// serial log is truncated on each start, so a start resets the count.
type markerWaiter struct {
	mu   sync.Mutex
	seen map[backends.InstanceRef]int
	log  map[backends.InstanceRef]string
}

func (w *markerWaiter) wait(t *testing.T, b backends.Backend, r backends.InstanceRef) {
	t.Helper()
	lb := b.(*libvirt.Backend)
	path, err := lb.SerialLog(r)
	if err != nil {
		t.Fatalf("SerialLog: %v", err)
	}
	w.mu.Lock()
	n := w.seen[r] + 1
	w.seen[r] = n
	w.mu.Unlock()
	qemutest.WaitMarker(t, path, qemutest.Marker, n, bootTimeout)
}

// TestConformanceDaemon runs the conformance suite against a real
// libvirtd with the QEMU driver booting the test guest: the same checks
// as on test:///default, with real power transitions (the ACPI shutdown
// reaches the guest's init), internal snapshots in qcow2 and disk copies.
func TestConformanceDaemon(t *testing.T) {
	b := newDaemonBackend(t)
	w := &markerWaiter{seen: map[backends.InstanceRef]int{}}
	backendtest.Run(t, backendtest.Harness{
		New: func(t *testing.T) backends.Backend { return b },
		Spec: func(_ *testing.T, name string) backends.Spec {
			return backends.Spec{Name: name, CPUs: 1, MemoryMiB: 256, DiskMiB: 64}
		},
		Settle:          bootTimeout,
		Ready:           w.wait,
		RunningSnapshot: backends.ConsistencyCrash,
		Pause:           true,
	})
}

// TestImportDaemon imports a raw image into the daemon's context: the disk
// becomes a qcow2 of the same virtual size, the domain boots the guest,
// and a running domain's disk is reported in use.
func TestImportDaemon(t *testing.T) {
	b := newDaemonBackend(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	raw := t.TempDir() + "/in.raw"
	if out, err := exec.Command("qemu-img", "create", "-q", "-f", "raw", raw, "48M").CombinedOutput(); err != nil {
		t.Fatalf("qemu-img create: %v: %s", err, out)
	}
	in, err := b.Import(ctx, backends.Spec{Name: "imported", CPUs: 1, MemoryMiB: 256}, raw, "raw")
	if err != nil {
		t.Fatalf("Import: %v", err)
	}
	t.Cleanup(func() { _ = b.Delete(context.Background(), in.Ref) })
	disk, err := b.DiskSource(ctx, in.Ref)
	if err != nil {
		t.Fatalf("DiskSource: %v", err)
	}
	if disk.Format != "qcow2" || disk.VirtualMiB != 48 || disk.Firmware != backends.FirmwareBIOS {
		t.Fatalf("DiskSource = %+v, want a 48 MiB qcow2 booting BIOS", disk)
	}
	if _, err := b.Import(ctx, backends.Spec{Name: "imported"}, raw, "raw"); !errors.Is(err, backends.ErrConflict) {
		t.Fatalf("Import onto a name in use: %v, want ErrConflict", err)
	}
	if _, err := b.Import(ctx, backends.Spec{Name: "wrong-format"}, raw, "qcow2"); !errors.Is(err, backends.ErrInvalid) {
		t.Fatalf("Import of a raw file said to be qcow2: %v, want ErrInvalid", err)
	}
	if err := b.Power(ctx, in.Ref, backends.ActionStart); err != nil {
		t.Fatalf("start: %v", err)
	}
	w := &markerWaiter{seen: map[backends.InstanceRef]int{}}
	w.wait(t, b, in.Ref)
	if d, err := b.DiskSource(ctx, in.Ref); err != nil || !d.InUse {
		t.Fatalf("DiskSource of a running domain = %+v, %v; want it in use", d, err)
	}
	if err := b.Power(ctx, in.Ref, backends.ActionStop); err != nil {
		t.Fatalf("stop: %v", err)
	}
}

// TestDisksWithoutQemuImgDaemon: on a host whose qemu-img is gone, a
// create or a clone that needs a disk made is Unavailable naming the
// context (503, as the qemu backend answers), not a backend failure, and
// leaves no domain behind.
func TestDisksWithoutQemuImgDaemon(t *testing.T) {
	b := newDaemonBackend(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	src, err := b.Create(ctx, backends.Spec{Name: "src", CPUs: 1, MemoryMiB: 256, DiskMiB: 16})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	t.Cleanup(func() { _ = b.Delete(context.Background(), src.Ref) })
	t.Setenv("PATH", t.TempDir())
	if _, err := b.Create(ctx, backends.Spec{Name: "blank", CPUs: 1, MemoryMiB: 256, DiskMiB: 16}); !errors.Is(err, backends.ErrUnavailable) || !strings.Contains(backends.SafeMessage(err), "context lvd") {
		t.Fatalf("Create without qemu-img = %v (kind %v), want Unavailable naming context lvd", err, backends.KindOf(err))
	}
	if _, err := b.Clone(ctx, src.Ref, "copy"); !errors.Is(err, backends.ErrUnavailable) || !strings.Contains(backends.SafeMessage(err), "context lvd") {
		t.Fatalf("Clone without qemu-img = %v (kind %v), want Unavailable naming context lvd", err, backends.KindOf(err))
	}
	list, err := b.List(ctx)
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	for _, in := range list {
		if in.Ref.Name != "src" {
			t.Fatalf("a failed create or clone left %s behind", in.Ref.Name)
		}
	}
}
