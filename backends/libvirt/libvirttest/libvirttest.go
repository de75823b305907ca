// Package libvirttest starts a private libvirtd with the QEMU driver for
// tests (hack/libvirtd.sh): its own configuration, sockets and state under
// a temporary folder, reached as qemu:///system?socket=..., stopped with
// the guests it ran when the test ends.
package libvirttest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	golibvirt "libvirt.org/go/libvirt"

	"github.com/corral-dev/corral/backends/qemu/qemutest"
)

// Daemon is a running private libvirtd.
type Daemon struct {
	URI     string // qemu:///system?socket=<Dir>/run/libvirt-sock
	Dir     string // the daemon's folder (config, sockets, state, log)
	DataDir string // a folder for the disks of the domains a test creates
}

// Start starts a private libvirtd for t and stops it when t ends. Without
// root, libvirtd, qemu or libvirt.so.0 it calls qemutest.RequireEngine:
// skipped, or failed under CORRAL_REQUIRE_ENGINES=1.
func Start(t testing.TB) *Daemon {
	t.Helper()
	qemutest.Tools(t)
	if os.Geteuid() != 0 {
		qemutest.RequireEngine(t, "a private qemu:///system libvirtd needs root")
	}
	if _, err := exec.LookPath("libvirtd"); err != nil {
		if _, err := os.Stat("/usr/sbin/libvirtd"); err != nil {
			qemutest.RequireEngine(t, "libvirtd not found (Debian: libvirt-daemon libvirt-daemon-driver-qemu)")
		}
	}
	if _, err := golibvirt.GetVersion(); err != nil {
		qemutest.RequireEngine(t, "libvirt.so.0 cannot be loaded: %v", err)
	}
	script, err := findScript()
	if err != nil {
		qemutest.RequireEngine(t, "%v", err)
	}
	// A short path: unix socket paths are limited to 107 bytes, and
	// t.TempDir carries the test's whole name.
	dir, err := os.MkdirTemp("", "corral-lvd-")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "sh", script, "start", dir)
	cmd.Env = append(os.Environ(), "PATH="+os.Getenv("PATH")+":/usr/sbin:/sbin")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	stop := func() {
		out, err := exec.Command("sh", script, "stop", dir).CombinedOutput()
		if err != nil {
			t.Errorf("hack/libvirtd.sh stop: %v: %s", err, out)
		}
		if t.Failed() {
			if log, err := os.ReadFile(filepath.Join(dir, "log", "libvirtd.log")); err == nil {
				t.Logf("libvirtd.log (tail):\n%s", tail(log, 2000))
			}
		}
		_ = os.RemoveAll(dir)
	}
	if err := cmd.Run(); err != nil {
		stop()
		if ee := (*exec.ExitError)(nil); errors.As(err, &ee) && ee.ExitCode() == 3 {
			qemutest.RequireEngine(t, "%s", strings.TrimSpace(stderr.String()))
		}
		t.Fatalf("hack/libvirtd.sh start: %v: %s", err, stderr.String())
	}
	t.Cleanup(stop)
	d := &Daemon{URI: strings.TrimSpace(stdout.String()), Dir: dir, DataDir: filepath.Join(dir, "data")}
	if err := os.MkdirAll(d.DataDir, 0o750); err != nil {
		t.Fatal(err)
	}
	return d
}

// findScript finds hack/libvirtd.sh above the working directory (a test
// runs in its package's folder).
func findScript() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		p := filepath.Join(dir, "hack", "libvirtd.sh")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no hack/libvirtd.sh above the working directory")
		}
		dir = parent
	}
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}
