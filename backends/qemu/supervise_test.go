package qemu

import (
	"slices"
	"testing"
)

// The transient-unit path cannot run on machines without a systemd user
// manager (these have none: PID 1 is not systemd); this checks the command
// line it would run, and that without a manager qemu is run as is.
func TestLaunchArgv(t *testing.T) {
	args := []string{"-name", "web", "-daemonize", "-pidfile", "/d/web/qemu.pid"}
	plain := launchArgv(false, "corral-vm-web", "/d/web/qemu.pid", "/usr/bin/qemu-system-x86_64", args)
	if !slices.Equal(plain, append([]string{"/usr/bin/qemu-system-x86_64"}, args...)) {
		t.Fatalf("without a manager: %q", plain)
	}
	unit := launchArgv(true, "corral-vm-web", "/d/web/qemu.pid", "/usr/bin/qemu-system-x86_64", args)
	want := []string{"systemd-run", "--user", "--quiet", "--collect", "--unit=corral-vm-web",
		"--property=Type=forking", "--property=PIDFile=/d/web/qemu.pid", "/usr/bin/qemu-system-x86_64"}
	if !slices.Equal(unit[:len(want)], want) || !slices.Equal(unit[len(want):], args) {
		t.Fatalf("with a manager: %q", unit)
	}
}
