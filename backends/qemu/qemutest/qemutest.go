// Package qemutest provides the tiny test guest that tests of the qemu
// backend and of the consoles boot: a Debian kernel and a busybox
// initramfs built by hack/build-guest.sh into a cache folder, once per test
// process and only when the kernel package changed.
package qemutest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// Marker is what the guest prints on its serial port once its init runs
// and it listens to the ACPI power button.
const Marker = "GUEST_READY"

// Append is the kernel command line the guest is meant to boot with.
const Append = "console=ttyS0 quiet panic=-1"

// The build runs once per test process; every Guest call shares it.
var build struct {
	once           sync.Once
	kernel, initrd string
	err            error
}

// RequireEngine skips the test with "engine: <why>", or fails it when
// CORRAL_REQUIRE_ENGINES=1 says every engine must be present (CI).
func RequireEngine(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := "engine: " + fmt.Sprintf(format, args...)
	if os.Getenv("CORRAL_REQUIRE_ENGINES") == "1" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// Tools skips or fails the test unless qemu-system-x86_64 and qemu-img
// are installed.
func Tools(t testing.TB) {
	t.Helper()
	for _, bin := range []string{"qemu-system-x86_64", "qemu-img"} {
		if _, err := exec.LookPath(bin); err != nil {
			RequireEngine(t, "%s not found (Debian: qemu-system-x86, qemu-utils)", bin)
		}
	}
}

// Guest returns the paths of the test guest's kernel and initramfs,
// building them on first use. Without qemu, busybox-static or apt-get, or
// when the build fails, it calls RequireEngine.
func Guest(t testing.TB) (kernel, initrd string) {
	t.Helper()
	Tools(t)
	if _, err := os.Stat("/bin/busybox"); err != nil {
		RequireEngine(t, "/bin/busybox not found (Debian: busybox-static)")
	}
	if _, err := exec.LookPath("apt-get"); err != nil {
		RequireEngine(t, "apt-get not found: the guest kernel comes from Debian's packages")
	}
	build.once.Do(func() { build.kernel, build.initrd, build.err = buildGuest() })
	if build.err != nil {
		RequireEngine(t, "the test guest could not be built: %v", build.err)
	}
	return build.kernel, build.initrd
}

// buildGuest runs hack/build-guest.sh into $CORRAL_GUEST_DIR, default
// <repo>/.cache/guest (gitignored).
func buildGuest() (string, string, error) {
	root, err := repoRoot()
	if err != nil {
		return "", "", err
	}
	out := os.Getenv("CORRAL_GUEST_DIR")
	if out == "" {
		out = filepath.Join(root, ".cache", "guest")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "sh", filepath.Join(root, "hack", "build-guest.sh"), out)
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return "", "", fmt.Errorf("hack/build-guest.sh: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	return filepath.Join(out, "vmlinux"), filepath.Join(out, "initramfs.cpio.gz"), nil
}

// repoRoot finds the folder holding go.mod and hack/build-guest.sh above
// the working directory (a test runs in its package's folder).
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "hack", "build-guest.sh")); err == nil {
			if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
				return dir, nil
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("qemutest: no hack/build-guest.sh above the working directory")
		}
		dir = parent
	}
}

// WaitMarker waits until the file at path holds at least n occurrences of
// marker, failing the test after timeout. Counting lets a caller wait for
// the boot after a reboot when the log still holds the first one.
func WaitMarker(t testing.TB, path, marker string, n int, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		data, _ := os.ReadFile(path)
		if strings.Count(string(data), marker) >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d x %q not seen after %v; the log ends with:\n%s", path, n, marker, timeout, tail(data, 800))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}
