package libvirt_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/backends/libvirt"
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
