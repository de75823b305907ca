package qemu

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"time"

	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/internal/qemuimg"
)

// Doctor implements backends.Doctor. Messages name binaries and versions
// but no host paths.
func (b *Backend) Doctor(ctx context.Context) []backends.Check {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	qemuCheck := b.versionCheck(ctx, "qemu-system-x86_64 runs", b.opts.QEMUPath, "-version", "qemu-system-x86")
	imgCheck := b.versionCheck(ctx, "qemu-img runs", b.opts.QEMUImgPath, "--version", "qemu-utils")
	accel := backends.Check{Name: "accelerator"}
	if qemuCheck.OK {
		accel.OK, accel.Message = true, b.Accel()+": "+b.AccelReason()
	} else {
		accel.Message = "not chosen: qemu-system-x86_64 does not run"
	}
	dir := backends.Check{Name: "VM folder is writable"}
	if f, err := os.CreateTemp(b.opts.Dir, ".doctor-*"); err != nil {
		dir.Message = "the VM folder cannot be written: check its owner and mode"
	} else {
		_ = f.Close()
		_ = os.Remove(f.Name())
		dir.OK, dir.Message = true, "the VM folder is writable"
	}
	return []backends.Check{qemuCheck, imgCheck, accel, dir}
}

// versionCheck runs bin with flag and reports its first line.
func (b *Backend) versionCheck(ctx context.Context, name, bin, flag, debPkg string) backends.Check {
	c := backends.Check{Name: name}
	out, err := qemuimg.Run(ctx, bin, flag)
	if err != nil {
		c.Message = filepath.Base(bin) + " is missing or does not run: install it (Debian: " + debPkg + ")"
		return c
	}
	line, _, _ := bytes.Cut(out, []byte("\n"))
	c.OK, c.Message = true, string(bytes.TrimSpace(line))
	return c
}
