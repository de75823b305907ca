package qemu

import (
	"context"
	"os/exec"
	"strings"
	"sync"
)

// Supervision: qemu runs daemonized with a pid file either way, so a
// Corral restart re-adopts it from the pid file and the QMP socket. Where
// the user has a systemd manager, the daemonized qemu is started inside a
// transient unit (systemd-run --user, Type=forking with the same pid file),
// so `systemctl --user status corral-vm-NAME` shows it, its logs go to the
// journal, and logging out with lingering on does not kill it. Without a
// user manager (containers, CI, these machines: PID 1 is not systemd)
// Corral's own supervision is all there is.

// userManager reports, once, whether `systemctl --user` reaches a running
// manager ("running" or "degraded"); "offline" and errors mean no.
func (b *Backend) userManager(ctx context.Context) bool {
	b.managerOnce.Do(func() {
		if b.opts.NoSystemd {
			return
		}
		out, _ := exec.CommandContext(ctx, "systemctl", "--user", "is-system-running").Output()
		st := strings.TrimSpace(string(out))
		b.manager = st == "running" || st == "degraded"
	})
	return b.manager
}

// launchArgv returns the argv that starts qemu for v: qemu itself, or
// qemu wrapped in a transient user unit when a user manager runs.
func launchArgv(manager bool, unit, pidFile, qemu string, args []string) []string {
	if !manager {
		return append([]string{qemu}, args...)
	}
	return append([]string{"systemd-run", "--user", "--quiet", "--collect",
		"--unit=" + unit, "--property=Type=forking", "--property=PIDFile=" + pidFile, qemu}, args...)
}

// unitName is the transient unit of a VM.
func unitName(vm string) string { return "corral-vm-" + vm }

type managerState struct {
	managerOnce sync.Once
	manager     bool
}
