package qemu

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/corral-dev/corral/internal/qemuimg"
)

// args is the qemu command line of v. Every VM gets the same devices, so a
// console bridge or a readiness check can rely on them:
//
//   - QMP, VNC and the serial port on unix sockets in the VM folder, never
//     on TCP ports that other users of the machine could reach or take;
//   - the serial port as a socket server that does not wait for a client,
//     with qemu copying its output to serial.log: a console can attach to
//     serial.sock at any time while serial.log keeps the boot;
//   - user-mode networking with the guest's port 22 forwarded to
//     127.0.0.1:SSHPort, which needs no privileges or bridge, and its port
//     3389 (RDP) to 127.0.0.1:rdpPort, a port picked at each launch and
//     recorded in the folder (rdp.port): the RDP console dials it;
//   - no -no-reboot (restart must reboot in place) and no -no-shutdown (a
//     guest that powers off must end the process: that is "stopped").
func (b *Backend) args(v *vm, accel string, rdpPort int) []string {
	a := []string{
		"-name", v.cfg.Name,
		"-accel", accel,
		"-m", strconv.FormatInt(v.cfg.MemoryMiB, 10),
		"-smp", strconv.Itoa(v.cfg.CPUs),
		"-display", "none",
		"-daemonize", "-pidfile", v.pidFile(),
		"-qmp", "unix:" + optPath(v.qmpSock()) + ",server=on,wait=off",
		"-vnc", "unix:" + optPath(v.vncSock()),
		"-chardev", "socket,id=ser0,path=" + optPath(v.serSock()) + ",server=on,wait=off,logfile=" + optPath(v.serLog()) + ",logappend=on",
		"-serial", "chardev:ser0",
		"-drive", "file=" + optPath(v.disk()) + ",if=virtio,format=" + v.cfg.DiskFormat,
		"-netdev", fmt.Sprintf("user,id=n0,hostfwd=tcp:127.0.0.1:%d-:22,hostfwd=tcp:127.0.0.1:%d-:3389", v.cfg.SSHPort, rdpPort),
		"-device", "virtio-net-pci,netdev=n0",
	}
	if _, err := os.Stat(v.seedPath()); err == nil {
		// The NoCloud seed, read-only: cloud-init finds it by its label.
		a = append(a, "-drive", "file="+optPath(v.seedPath())+",if=virtio,format=raw,readonly=on")
	}
	if accel == "kvm" {
		a = append(a, "-cpu", "host")
	}
	if v.cfg.Kernel != "" {
		a = append(a, "-kernel", v.cfg.Kernel)
		if v.cfg.Initrd != "" {
			a = append(a, "-initrd", v.cfg.Initrd)
		}
		if v.cfg.Append != "" {
			a = append(a, "-append", v.cfg.Append)
		}
	}
	return a
}

// optPath escapes a path inside a qemu option string, where a comma
// separates options and ",," is a literal comma: a Dir with a comma in it
// must not turn the rest of its path into options.
func optPath(p string) string { return strings.ReplaceAll(p, ",", ",,") }

// launch starts v's qemu. With -daemonize the command returns once qemu has
// set everything up (sockets listening, pid file written) and forked into
// the background, so a launch error (a locked disk, a bad flag) comes back
// here while the VM, once started, belongs to no process of Corral's.
func (b *Backend) launch(ctx context.Context, v *vm) error {
	path, err := qemuimg.Binary(b.opts.QEMUPath)
	if err != nil {
		return err
	}
	b.cleanup(v)
	// Keep the previous boot's serial output: it is the first thing to
	// read when a VM died.
	_ = os.Rename(v.serLog(), v.serLog()+".1")
	accel := b.Accel()
	// The RDP forward's port is picked per launch rather than stored at
	// create like SSHPort: VMs made before it existed get one too, and a
	// stopped VM holds no port for a service its guest may never run.
	rdpPort, err := b.freePort(ctx)
	if err != nil {
		return err
	}
	if err := os.WriteFile(v.rdpPortFile(), []byte(strconv.Itoa(rdpPort)), 0o600); err != nil {
		return err
	}
	args := b.args(v, accel, rdpPort)
	// The VM page shows what this boot runs under: TCG is 5-10x slower,
	// and an operator should see why KVM was not used.
	_ = os.WriteFile(v.accelFile(), []byte(accel+": "+b.AccelReason()), 0o600)
	// stderr goes to a file, not a pipe: the daemonized qemu inherits it
	// until it redirects its stdio to /dev/null, and a pipe could keep Run
	// waiting on a process that is meant to outlive it.
	logPath := filepath.Join(v.dir, "launch.log")
	logf, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logf.Close()
	argv := launchArgv(b.userManager(ctx), unitName(v.cfg.Name), v.pidFile(), path, args)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Stderr, cmd.Stdout = logf, logf
	cmd.Dir = v.dir
	if err := cmd.Run(); err != nil {
		out, _ := os.ReadFile(logPath)
		return &cmdError{Args: append([]string{b.opts.QEMUPath}, args...), Stderr: string(out), Err: err}
	}
	if _, alive := v.process(); !alive {
		out, _ := os.ReadFile(logPath)
		return &cmdError{Args: append([]string{b.opts.QEMUPath}, args...), Stderr: string(out), Err: errors.New("qemu exited right after starting")}
	}
	return nil
}

// process returns the pid of v's qemu and whether it is alive. The pid
// file alone proves nothing after a crash or a reboot of the host (the pid
// may belong to another process by now), so the process must also be a
// qemu whose command line names this VM's pid file.
func (v *vm) process() (int, bool) {
	data, err := os.ReadFile(v.pidFile())
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || pid <= 0 {
		return 0, false
	}
	return pid, isQEMUOf(pid, v.pidFile())
}

// isQEMUOf reports whether pid is alive and is the qemu started with
// pidFile. A zombie has an empty command line, so it counts as exited.
func isQEMUOf(pid int, pidFile string) bool {
	cmdline, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	if err != nil {
		return false
	}
	return bytes.Contains(cmdline, []byte("\x00"+pidFile+"\x00"))
}

// waitExit waits until pid is no longer v's qemu, or ctx ends.
func (v *vm) waitExit(ctx context.Context, pid int) error {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for isQEMUOf(pid, v.pidFile()) {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}

// cleanup removes what a dead qemu leaves behind: qemu removes its pid file
// on a clean exit but not after SIGKILL, and never the VNC socket.
func (b *Backend) cleanup(v *vm) {
	for _, p := range []string{v.pidFile(), v.qmpSock(), v.vncSock(), v.serSock(), v.rdpPortFile()} {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			b.opts.Logger.Warn("qemu: cannot remove a stale file", "vm", v.cfg.Name, "err", err)
		}
	}
}

// kill ends pid with SIGKILL and waits for it: the last resort when qemu
// does not answer QMP.
func (v *vm) kill(ctx context.Context, pid int) error {
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	return v.waitExit(ctx, pid)
}
