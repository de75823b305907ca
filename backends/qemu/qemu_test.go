package qemu_test

import (
	"bufio"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/backends/backendtest"
	"github.com/corral-dev/corral/backends/qemu"
	"github.com/corral-dev/corral/backends/qemu/qemutest"
)

// bootTimeout bounds one boot of the test guest under TCG: 3-16 s here,
// more on a loaded machine.
const bootTimeout = 90 * time.Second

// newBackend returns a backend on a fresh Dir that boots the test guest
// under TCG, and stops every VM it left running when the test ends: a
// daemonized qemu would otherwise outlive a failed test.
func newBackend(t *testing.T, dir string) *qemu.Backend {
	t.Helper()
	kernel, initrd := qemutest.Guest(t)
	if dir == "" {
		dir = t.TempDir()
	}
	b, err := qemu.New(qemu.Options{Dir: dir, Accel: "tcg", Kernel: kernel, Initrd: initrd, Append: qemutest.Append,
		ShutdownTimeout: 30 * time.Second})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { stopAll(t, b) })
	return b
}

func stopAll(t *testing.T, b *qemu.Backend) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	list, err := b.List(ctx)
	if err != nil {
		t.Errorf("List at cleanup: %v", err)
		return
	}
	for _, in := range list {
		if in.State != backends.StateStopped {
			if err := b.Power(ctx, in.Ref, backends.ActionStop); err != nil {
				t.Errorf("stop %s at cleanup: %v", in.Ref.Name, err)
			}
		}
	}
}

func ref(name string) backends.InstanceRef {
	return backends.InstanceRef{Backend: backends.KindQEMU, Context: "local", Name: name}
}

func spec(name string) backends.Spec {
	return backends.Spec{Name: name, CPUs: 1, MemoryMiB: 256, DiskMiB: 64}
}

// readyWaiter waits for one more GUEST_READY than it saw last time for
// the same VM: after a restart the log still holds the first boot's.
type readyWaiter struct {
	mu   sync.Mutex
	seen map[backends.InstanceRef]int
}

func (w *readyWaiter) wait(t *testing.T, b backends.Backend, r backends.InstanceRef) {
	t.Helper()
	w.mu.Lock()
	n := w.seen[r] + 1
	w.seen[r] = n
	w.mu.Unlock()
	waitReady(t, b.(*qemu.Backend), r, n)
}

func waitReady(t *testing.T, b *qemu.Backend, r backends.InstanceRef, n int) {
	t.Helper()
	log, err := b.SerialLog(r)
	if err != nil {
		t.Fatalf("SerialLog: %v", err)
	}
	qemutest.WaitMarker(t, log, qemutest.Marker, n, bootTimeout)
}

func TestConformance(t *testing.T) {
	w := &readyWaiter{seen: map[backends.InstanceRef]int{}}
	backendtest.Run(t, backendtest.Harness{
		New:             func(t *testing.T) backends.Backend { return newBackend(t, "") },
		Spec:            func(_ *testing.T, name string) backends.Spec { return spec(name) },
		Settle:          bootTimeout,
		Ready:           w.wait,
		RunningSnapshot: "", // refused: qemu-img must not write a disk qemu has open
		Pause:           true,
	})
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func wantKind(t *testing.T, what string, err, kind error) {
	t.Helper()
	if !errors.Is(err, kind) {
		t.Fatalf("%s: %v (kind %v), want kind %v", what, err, backends.KindOf(err), kind)
	}
	if backends.SafeMessage(err) == "" {
		t.Fatalf("%s: %v has no safe message", what, err)
	}
}

// TestRunningGuest boots one guest and checks everything that needs it
// running: consoles, the refusals, and re-adoption by a second Backend.
func TestRunningGuest(t *testing.T) {
	dir := t.TempDir()
	b := newBackend(t, dir)
	ctx := ctxT(t)
	r := ref("live")
	if _, err := b.Create(ctx, backends.Spec{Name: "live", CPUs: 1, MemoryMiB: 256, DiskMiB: 64, Start: true}); err != nil {
		t.Fatalf("Create with Start: %v", err)
	}
	waitReady(t, b, r, 1)

	t.Run("Consoles", func(t *testing.T) {
		kinds, err := b.Consoles(ctx, r)
		if err != nil || len(kinds) != 2 {
			t.Fatalf("Consoles = %v, %v; want vnc and serial", kinds, err)
		}
		_, err = b.DialConsole(ctx, r, backends.ConsoleRDP)
		wantKind(t, "DialConsole rdp", err, backends.ErrUnsupported)
	})
	t.Run("VNC", func(t *testing.T) {
		c, err := b.DialConsole(ctx, r, backends.ConsoleVNC)
		if err != nil {
			t.Fatalf("DialConsole vnc: %v", err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		hello := make([]byte, 12)
		if _, err := io.ReadFull(c, hello); err != nil || string(hello) != "RFB 003.008\n" {
			t.Fatalf("VNC greeting = %q, %v; want RFB 003.008", hello, err)
		}
	})
	t.Run("Serial", func(t *testing.T) {
		c, err := b.DialConsole(ctx, r, backends.ConsoleSerial)
		if err != nil {
			t.Fatalf("DialConsole serial: %v", err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(30 * time.Second))
		// The shell evaluates the arithmetic; the terminal's echo of the
		// line does not contain the answer.
		if _, err := io.WriteString(c, "echo corral-$((6*7))\n"); err != nil {
			t.Fatalf("write to the serial console: %v", err)
		}
		sc := bufio.NewScanner(c)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "corral-42") {
				return
			}
		}
		t.Fatalf("corral-42 never came back from the serial console: %v", sc.Err())
	})
	t.Run("Refusals", func(t *testing.T) {
		_, err := b.CreateSnapshot(ctx, r, "live")
		wantKind(t, "CreateSnapshot of a running VM", err, backends.ErrUnsupported)
		if msg := backends.SafeMessage(err); !strings.Contains(msg, "corral stop live") {
			t.Fatalf("refusal %q names no remedy", msg)
		}
		_, err = b.Export(ctx, r, "qcow2", io.Discard)
		wantKind(t, "Export of a running VM", err, backends.ErrUnsupported)
		_, err = b.Clone(ctx, r, "live-copy")
		wantKind(t, "Clone of a running VM", err, backends.ErrConflict)
		if snaps, err := b.Snapshots(ctx, r); err != nil || len(snaps) != 0 {
			t.Fatalf("Snapshots of a running VM = %v, %v; want an empty list", snaps, err)
		}
	})
	t.Run("Readopt", func(t *testing.T) {
		// A Corral restart: a new Backend on the same Dir finds the VM
		// still running and controls it.
		b2, err := qemu.New(qemu.Options{Dir: dir, Accel: "tcg"})
		if err != nil {
			t.Fatalf("New on the same Dir: %v", err)
		}
		list, err := b2.List(ctx)
		if err != nil || len(list) != 1 || list[0].Ref != r || list[0].State != backends.StateRunning {
			t.Fatalf("List after re-adoption = %+v, %v; want live running", list, err)
		}
		if list[0].IP != "127.0.0.1" {
			t.Fatalf("IP = %q, want 127.0.0.1", list[0].IP)
		}
		if err := b2.Power(ctx, r, backends.ActionPause); err != nil {
			t.Fatalf("pause through the new backend: %v", err)
		}
		if in, _ := b.Get(ctx, r); in.State != backends.StatePaused {
			t.Fatalf("the first backend sees %s, want paused", in.State)
		}
		if err := b2.Power(ctx, r, backends.ActionStop); err != nil {
			t.Fatalf("stop through the new backend: %v", err)
		}
		if in, err := b.Get(ctx, r); err != nil || in.State != backends.StateStopped {
			t.Fatalf("after stop: %+v, %v; want stopped", in, err)
		}
		if kinds, err := b.Consoles(ctx, r); err != nil || len(kinds) != 0 {
			t.Fatalf("Consoles of a stopped VM = %v, %v; want none", kinds, err)
		}
		_, err = b.DialConsole(ctx, r, backends.ConsoleSerial)
		wantKind(t, "DialConsole of a stopped VM", err, backends.ErrConflict)
	})
}

func TestCloneBoots(t *testing.T) {
	b := newBackend(t, "")
	ctx := ctxT(t)
	if _, err := b.Create(ctx, spec("src")); err != nil {
		t.Fatalf("Create: %v", err)
	}
	c, err := b.Clone(ctx, ref("src"), "dst")
	if err != nil {
		t.Fatalf("Clone: %v", err)
	}
	p1, _ := b.SSHPort(ref("src"))
	p2, _ := b.SSHPort(c.Ref)
	if p1 == 0 || p1 == p2 {
		t.Fatalf("SSH ports %d and %d: the clone needs its own", p1, p2)
	}
	if err := b.Power(ctx, c.Ref, backends.ActionStart); err != nil {
		t.Fatalf("start the clone: %v", err)
	}
	waitReady(t, b, c.Ref, 1)
	if err := b.Power(ctx, c.Ref, backends.ActionStop); err != nil {
		t.Fatalf("stop the clone: %v", err)
	}
}

// imgInfo reads an image back with qemu-img.
func imgInfo(t *testing.T, path string) (format string, size int64) {
	t.Helper()
	out, err := exec.Command("qemu-img", "info", "--output=json", path).Output()
	if err != nil {
		t.Fatalf("qemu-img info: %v", err)
	}
	var ii struct {
		Format      string `json:"format"`
		VirtualSize int64  `json:"virtual-size"`
	}
	if err := json.Unmarshal(out, &ii); err != nil {
		t.Fatalf("qemu-img info: %v", err)
	}
	return ii.Format, ii.VirtualSize
}

// newDiskBackend returns a backend for tests that need qemu-img only.
func newDiskBackend(t *testing.T) *qemu.Backend {
	t.Helper()
	qemutest.Tools(t)
	b, err := qemu.New(qemu.Options{Dir: t.TempDir(), Accel: "tcg"})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return b
}

func TestExport(t *testing.T) {
	b := newDiskBackend(t)
	ctx := ctxT(t)
	if _, err := b.Create(ctx, spec("exp")); err != nil {
		t.Fatalf("Create: %v", err)
	}
	if got := b.ExportFormats(); len(got) != 2 || got[0] != "qcow2" {
		t.Fatalf("ExportFormats = %v, want qcow2 first", got)
	}
	out := t.TempDir()
	for _, format := range []string{"qcow2", "raw.gz"} {
		path := filepath.Join(out, "disk."+format)
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		cons, err := b.Export(ctx, ref("exp"), format, f)
		f.Close()
		if err != nil || cons != backends.ConsistencyOffline {
			t.Fatalf("Export %s = %q, %v; want offline", format, cons, err)
		}
		if format == "raw.gz" {
			path = gunzip(t, path)
		}
		wantFmt := strings.TrimSuffix(format, ".gz")
		if gotFmt, size := imgInfo(t, path); gotFmt != wantFmt || size != 64<<20 {
			t.Fatalf("export %s reads back as %s of %d bytes, want %s of 64 MiB", format, gotFmt, size, wantFmt)
		}
	}
	_, err := b.Export(ctx, ref("exp"), "vmdk", io.Discard)
	wantKind(t, "Export as vmdk", err, backends.ErrInvalid)
}

func gunzip(t *testing.T, path string) string {
	t.Helper()
	in, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	zr, err := gzip.NewReader(in)
	if err != nil {
		t.Fatalf("the raw.gz export is not gzip: %v", err)
	}
	outPath := strings.TrimSuffix(path, ".gz")
	out, err := os.Create(outPath)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	if _, err := io.Copy(out, zr); err != nil {
		t.Fatalf("gunzip: %v", err)
	}
	return outPath
}

func TestCreateFromImage(t *testing.T) {
	b := newDiskBackend(t)
	ctx := ctxT(t)
	src := t.TempDir()
	qcow := filepath.Join(src, "base.qcow2")
	raw := filepath.Join(src, "base.img")
	for _, args := range [][]string{{"create", "-q", "-f", "qcow2", qcow, "32M"}, {"create", "-q", "-f", "raw", raw, "16M"}} {
		if out, err := exec.Command("qemu-img", args...).CombinedOutput(); err != nil {
			t.Fatalf("qemu-img %v: %v: %s", args, err, out)
		}
	}
	// A larger DiskMiB grows the copy; the source is untouched.
	in, err := b.Create(ctx, backends.Spec{Name: "from-qcow", Image: qcow, DiskMiB: 48})
	if err != nil || in.DiskMiB != 48 {
		t.Fatalf("Create from qcow2 = %+v, %v; want 48 MiB", in, err)
	}
	if _, size := imgInfo(t, qcow); size != 32<<20 {
		t.Fatalf("the source image changed size to %d", size)
	}
	// A raw image stays raw, and a raw disk cannot hold snapshots.
	in, err = b.Create(ctx, backends.Spec{Name: "from-raw", Image: raw})
	if err != nil || in.DiskMiB != 16 {
		t.Fatalf("Create from raw = %+v, %v; want 16 MiB", in, err)
	}
	_, err = b.CreateSnapshot(ctx, in.Ref, "s1")
	wantKind(t, "CreateSnapshot of a raw disk", err, backends.ErrUnsupported)

	_, err = b.Create(ctx, backends.Spec{Name: "nope", Image: filepath.Join(src, "missing.qcow2")})
	wantKind(t, "Create from a missing image", err, backends.ErrInvalid)
	_, err = b.Create(ctx, backends.Spec{Name: "url", Image: "https://example.org/disk.qcow2"})
	wantKind(t, "Create from a URL", err, backends.ErrUnsupported)
	for _, name := range []string{"Bad", "a_b", "-x", strings.Repeat("a", 64)} {
		_, err = b.Create(ctx, backends.Spec{Name: name})
		wantKind(t, "Create("+name+")", err, backends.ErrInvalid)
	}
	_, err = b.Create(ctx, backends.Spec{Name: "ns", Namespace: "x"})
	wantKind(t, "Create with a namespace", err, backends.ErrInvalid)
	_, err = b.CreateSnapshot(ctx, ref("from-qcow"), "123")
	wantKind(t, "an all-digit snapshot name", err, backends.ErrInvalid)
}

func TestMissingBinariesAreUnavailable(t *testing.T) {
	b, err := qemu.New(qemu.Options{Dir: t.TempDir(), QEMUPath: "/nonexistent/qemu", QEMUImgPath: "/nonexistent/qemu-img", Accel: "auto"})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	_, err = b.Create(context.Background(), spec("x"))
	wantKind(t, "Create without qemu-img", err, backends.ErrUnavailable)
	if msg := backends.SafeMessage(err); strings.Contains(msg, "/nonexistent") {
		t.Fatalf("safe message %q shows a host path", msg)
	}
	checks := b.Doctor(context.Background())
	for _, c := range checks {
		if strings.Contains(c.Message, "/nonexistent") {
			t.Fatalf("Doctor check %+v shows a host path", c)
		}
		if strings.Contains(c.Name, "runs") && c.OK {
			t.Fatalf("Doctor says a missing binary runs: %+v", c)
		}
	}
	if b.Accel() != "tcg" {
		t.Fatalf("Accel = %s without a probe guest, want tcg", b.Accel())
	}
}

func TestMapError(t *testing.T) {
	tests := []struct {
		name string
		err  error
		kind error
	}{
		{"write lock", qemu.CmdError(`qemu-img: Could not open '/srv/vm/disk.qcow2': Failed to get "write" lock`), backends.ErrConflict},
		{"other failure", qemu.CmdError(`qemu-img: Could not open '/srv/vm/disk.qcow2': No space left on device`), backends.ErrFailed},
		{"missing binary", qemu.MissingBinary("/opt/qemu/bin/qemu-img"), backends.ErrUnavailable},
		{"deadline", context.DeadlineExceeded, backends.ErrTimeout},
		{"refusal kept", backends.Refuse(backends.KindQEMU, "x", "y"), backends.ErrUnsupported},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := qemu.MapError("local", "snapshot", "web", tt.err)
			wantKind(t, tt.name, err, tt.kind)
			if msg := backends.SafeMessage(err); strings.Contains(msg, "/srv") || strings.Contains(msg, "/opt") {
				t.Fatalf("safe message %q shows a host path", msg)
			}
			if !errors.Is(err, tt.err) {
				t.Fatalf("%v does not wrap its cause", err)
			}
		})
	}
}

func TestStateOf(t *testing.T) {
	for status, want := range map[string]backends.State{
		"running": backends.StateRunning, "paused": backends.StatePaused, "shutdown": backends.StateStopping,
		"prelaunch": backends.StateStarting, "internal-error": backends.StateUnknown,
	} {
		if got := qemu.StateOf(status); got != want {
			t.Errorf("StateOf(%q) = %s, want %s", status, got, want)
		}
	}
}
