package libvirt_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/backends/libvirt"
	"github.com/corral-dev/corral/backends/qemu/qemutest"
)

// TestImportRefusals: contexts that cannot hold an imported disk say so
// before anything is tried, in CanImport and in Import alike, with a
// remedy; the test driver has no disk files to hand over either.
func TestImportRefusals(t *testing.T) {
	tests := []struct {
		name, remedy string
		opts         libvirt.Options
	}{
		{"test driver", "qemu:///", libvirt.Options{URI: "test:///default", DataDir: t.TempDir()}},
		{"remote", "local URI", libvirt.Options{URI: "qemu+ssh://host.example/system", DataDir: t.TempDir()}},
		{"no data dir", "data directory", libvirt.Options{URI: "qemu:///system"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.opts.Context = "lab"
			b := libvirt.New(tt.opts)
			defer b.Close()
			err := b.CanImport()
			if !errors.Is(err, backends.ErrUnsupported) || !strings.Contains(backends.SafeMessage(err), tt.remedy) {
				t.Fatalf("CanImport = %v, want a refusal naming %q", err, tt.remedy)
			}
			_, err = b.Import(context.Background(), backends.Spec{Name: "web"}, "/nonexistent.qcow2", "qcow2")
			if !errors.Is(err, backends.ErrUnsupported) {
				t.Fatalf("Import = %v, want the same refusal", err)
			}
		})
	}
	b := newTest(t, libvirt.Options{})
	if _, err := b.DiskSource(context.Background(), ref("test")); !errors.Is(err, backends.ErrUnsupported) {
		t.Fatalf("DiskSource on the test driver = %v, want a refusal", err)
	}
}

// importBackend is a backend whose context can hold an imported disk; the
// checks below end before it would connect to a daemon.
func importBackend(t *testing.T) (*libvirt.Backend, string) {
	t.Helper()
	dataDir := t.TempDir()
	b := libvirt.New(libvirt.Options{Context: "lab", URI: "qemu:///system", DataDir: dataDir})
	t.Cleanup(func() { _ = b.Close() })
	return b, dataDir
}

// writeFile writes data to a new file of the test and returns its path.
func writeFile(t *testing.T, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestImportWithoutQemuImg: a host without qemu-img cannot read any image,
// which is the context's trouble, not the caller's file: Unavailable
// naming the context (503, as the qemu backend answers), nothing written.
func TestImportWithoutQemuImg(t *testing.T) {
	b, dataDir := importBackend(t)
	img := writeFile(t, "in.raw", make([]byte, 1<<20))
	t.Setenv("PATH", t.TempDir())
	_, err := b.Import(context.Background(), backends.Spec{Name: "web"}, img, "raw")
	if !errors.Is(err, backends.ErrUnavailable) || !strings.Contains(backends.SafeMessage(err), "context lab") {
		t.Fatalf("Import without qemu-img = %v (kind %v), want Unavailable naming context lab", err, backends.KindOf(err))
	}
	if left, _ := os.ReadDir(dataDir); len(left) != 0 {
		t.Fatalf("Import left %d files in the data directory", len(left))
	}
}

// TestImportImageErrors: what is wrong with the file is Invalid with the
// formats accepted; a qemu-img run cut short is the context's trouble.
func TestImportImageErrors(t *testing.T) {
	qemutest.Tools(t)
	b, _ := importBackend(t)
	broken := writeFile(t, "broken.qcow2", append([]byte("QFI\xfb\x00\x00\x00\x09"), make([]byte, 512)...))
	raw := writeFile(t, "in.raw", make([]byte, 1<<20))
	tests := []struct {
		name, path, format string
		cancel             bool
		kind               error
		msg                string
	}{
		{"not a file", t.TempDir(), "raw", false, backends.ErrInvalid, "give a qcow2 or raw file"},
		{"unreadable qcow2", broken, "qcow2", false, backends.ErrInvalid, "give a qcow2 or raw file"},
		{"raw stated as qcow2", raw, "qcow2", false, backends.ErrInvalid, "is raw, not qcow2"},
		{"run cut short", raw, "raw", true, backends.ErrUnavailable, "context lab"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tt.cancel {
				cancel()
			}
			_, err := b.Import(ctx, backends.Spec{Name: "web"}, tt.path, tt.format)
			if !errors.Is(err, tt.kind) || !strings.Contains(backends.SafeMessage(err), tt.msg) {
				t.Fatalf("Import = %v (kind %v), want %v saying %q", err, backends.KindOf(err), tt.kind, tt.msg)
			}
			if strings.Contains(backends.SafeMessage(err), tt.path) {
				t.Fatalf("safe message %q names a host path", backends.SafeMessage(err))
			}
		})
	}
}
