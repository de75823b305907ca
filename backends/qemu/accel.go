package qemu

import (
	"bufio"
	"cmp"
	"context"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/corral-dev/corral/internal/qemuimg"
)

// probeMarker is what the probe guest prints on its serial port once its
// init runs; the test guest of hack/build-guest.sh prints it.
const probeMarker = "GUEST_READY"

// probeTimeout bounds the KVM probe. A guest that boots under KVM reaches
// its marker in about a second; one that hangs would wait forever.
const probeTimeout = 30 * time.Second

// Accel returns the accelerator new launches use, "kvm" or "tcg", choosing
// it on first use (see Options.Accel).
func (b *Backend) Accel() string {
	b.accelOnce.Do(func() { b.accel, b.accelReason = b.chooseAccel() })
	return b.accel
}

// AccelReason says why Accel chose what it did, for Doctor and the log.
func (b *Backend) AccelReason() string {
	b.Accel()
	return b.accelReason
}

// chooseAccel decides once. KVM is used in auto mode only when the probe
// guest reaches its marker under it: /dev/kvm can exist and accept
// -accel kvm and still hang after the BIOS (a nested hypervisor that needs
// a special guest kernel), and a VM that hangs is worse than a slow one.
func (b *Backend) chooseAccel() (string, string) {
	switch b.opts.Accel {
	case "tcg":
		return "tcg", "TCG (software emulation) as configured"
	case "kvm":
		return "kvm", "KVM as configured, without a probe"
	}
	f, err := os.OpenFile("/dev/kvm", os.O_RDWR, 0)
	if err != nil {
		return "tcg", "TCG: /dev/kvm cannot be opened"
	}
	_ = f.Close()
	if b.opts.Kernel == "" {
		return "tcg", "TCG: no probe guest is configured, so KVM was not tried"
	}
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	if err := b.probeKVM(ctx); err != nil {
		b.opts.Logger.Info("qemu: the KVM probe failed; using TCG", "err", err)
		return "tcg", "TCG: a probe guest did not reach its marker under KVM (tried for at most " + probeTimeout.String() + ")"
	}
	b.opts.Logger.Info("qemu: the KVM probe booted; using KVM")
	return "kvm", "KVM: a probe guest booted under it"
}

// probeKVM boots the default guest under KVM with its serial port on stdout
// and returns nil once it prints probeMarker.
func (b *Backend) probeKVM(ctx context.Context) error {
	path, err := qemuimg.Binary(b.opts.QEMUPath)
	if err != nil {
		return err
	}
	args := []string{"-accel", "kvm", "-cpu", "host", "-m", "128", "-nodefaults", "-display", "none",
		"-no-reboot", "-serial", "stdio", "-kernel", b.opts.Kernel}
	if b.opts.Initrd != "" {
		args = append(args, "-initrd", b.opts.Initrd)
	}
	args = append(args, "-append", cmp.Or(b.opts.Append, "console=ttyS0 quiet panic=-1"))
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if strings.Contains(sc.Text(), probeMarker) {
			return nil
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return cmp.Or(sc.Err(), context.Canceled)
}
