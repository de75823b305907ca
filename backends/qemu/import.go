package qemu

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"slices"

	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/internal/qemuimg"
)

var (
	_ backends.Importer    = (*Backend)(nil)
	_ backends.DiskSourcer = (*Backend)(nil)
)

// Import implements backends.Importer: a new VM whose disk is a qcow2 copy
// (qcow2 is this backend's native format) of the image at diskPath, made
// with qemu-img convert, which also flattens a backing chain and drops
// the source's internal snapshots. The VM boots the context's default
// kernel like every VM Create makes. The source file is only read.
func (b *Backend) Import(ctx context.Context, spec backends.Spec, diskPath, format string) (backends.Instance, error) {
	if err := validName("instance", spec.Name); err != nil {
		return backends.Instance{}, err
	}
	if spec.Namespace != "" {
		return backends.Instance{}, backends.Invalidf("the qemu backend has no namespaces: leave the namespace of %s empty", spec.Name)
	}
	if spec.Type == backends.TypeCT {
		return backends.Instance{}, backends.Refuse(backends.KindQEMU, "import of a container", "move VMs only")
	}
	if format != "qcow2" && format != "raw" {
		return backends.Instance{}, backends.Invalidf("import format %q is not accepted: use qcow2 or raw", format)
	}
	src, err := b.source(ctx, diskPath)
	if err != nil {
		return backends.Instance{}, err
	}
	if src.Format != format {
		return backends.Instance{}, backends.Invalidf("the image to import is %s, not %s as stated", src.Format, format)
	}
	cfg := config{
		Name:       spec.Name,
		CPUs:       cmp.Or(spec.CPUs, defaultCPUs),
		MemoryMiB:  cmp.Or(spec.MemoryMiB, defaultMemoryMiB),
		DiskMiB:    max(qemuimg.ToMiB(src.VirtualSize), spec.DiskMiB),
		DiskFormat: "qcow2",
		Kernel:     b.opts.Kernel,
		Initrd:     b.opts.Initrd,
		Append:     b.opts.Append,
		Tags:       slices.Clone(spec.Tags),
		Created:    b.opts.Now().UTC(),
	}
	v, err := b.newFolder(spec.Name)
	if err != nil {
		return backends.Instance{}, err
	}
	v.cfg = cfg
	if err := b.fill(ctx, v, func() error {
		if err := b.img().Convert(ctx, diskPath, format, v.disk(), "qcow2"); err != nil {
			return err
		}
		if cfg.DiskMiB > qemuimg.ToMiB(src.VirtualSize) {
			return b.img().Resize(ctx, v.disk(), "qcow2", cfg.DiskMiB)
		}
		return nil
	}); err != nil {
		return backends.Instance{}, b.fail("import", spec.Name, err)
	}
	if spec.Start {
		if err := b.Power(ctx, v.ref(b), backends.ActionStart); err != nil {
			return backends.Instance{}, err
		}
	}
	return b.instance(ctx, v), nil
}

// DiskSource implements backends.DiskSourcer: the VM's disk file, which
// the caller may read while the VM stays stopped (InUse says it runs).
// Local VMs boot BIOS (SeaBIOS) or a kernel directly.
func (b *Backend) DiskSource(ctx context.Context, ref backends.InstanceRef) (backends.Disk, error) {
	v, err := b.lookup(ref)
	if err != nil {
		return backends.Disk{}, err
	}
	_, alive := v.process()
	if _, err := os.Stat(v.disk()); err != nil {
		return backends.Disk{}, b.fail("read the disk of", ref.Name, err)
	}
	// -U reads the image a running qemu holds locked: only the size and
	// format are read, which a running guest does not change.
	ii, err := b.img().Info(ctx, v.disk(), alive)
	if err != nil {
		return backends.Disk{}, b.fail("read the disk of", ref.Name, err)
	}
	if ii.Format != v.cfg.DiskFormat {
		return backends.Disk{}, b.fail("read the disk of", ref.Name, fmt.Errorf("qemu: %s is %s, config says %s", v.disk(), ii.Format, v.cfg.DiskFormat))
	}
	return backends.Disk{Path: v.disk(), Format: ii.Format, VirtualMiB: qemuimg.ToMiB(ii.VirtualSize), Firmware: backends.FirmwareBIOS, InUse: alive}, nil
}
