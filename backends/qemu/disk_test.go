package qemu_test

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/backends/qemu"
	"github.com/corral-dev/corral/backends/qemu/qemutest"
)

// The tests in this file need qemu-img but boot no guest.

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

func TestDoctor(t *testing.T) {
	b := newDiskBackend(t)
	checks := b.Doctor(context.Background())
	if len(checks) != 4 {
		t.Fatalf("Doctor = %+v, want 4 checks", checks)
	}
	for _, c := range checks {
		if !c.OK {
			t.Fatalf("Doctor check failed on a host with qemu: %+v", c)
		}
	}
	if !strings.HasPrefix(checks[2].Message, "tcg: ") {
		t.Fatalf("accelerator check = %+v, want tcg with its reason", checks[2])
	}
}
