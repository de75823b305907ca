package libvirt

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"

	"libvirt.org/go/libvirt"
	"libvirt.org/go/libvirtxml"

	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/internal/qemuimg"
)

var (
	_ backends.Importer      = (*Backend)(nil)
	_ backends.ImportChecker = (*Backend)(nil)
	_ backends.DiskSourcer   = (*Backend)(nil)
)

// Import implements backends.Importer: the image at diskPath is converted
// with qemu-img into a qcow2 (libvirt's usual format, and the one Corral's
// domains use) in DataDir, and a BIOS domain is defined on it. Like Create
// it needs a DataDir on this host, so a remote hypervisor URI is refused:
// its daemon could not open a file written here.
func (b *Backend) Import(ctx context.Context, spec backends.Spec, diskPath, format string) (backends.Instance, error) {
	if err := backends.ValidateName("instance", spec.Name); err != nil {
		return backends.Instance{}, err
	}
	if spec.Namespace != "" {
		return backends.Instance{}, backends.Invalidf("libvirt has no namespaces: leave the namespace of %s empty", spec.Name)
	}
	if spec.Type == backends.TypeCT {
		return backends.Instance{}, backends.Refuse(backends.KindLibvirt, "import of a container", "move VMs only")
	}
	if format != "qcow2" && format != "raw" {
		return backends.Instance{}, backends.Invalidf("import format %q is not accepted: use qcow2 or raw", format)
	}
	if err := b.CanImport(); err != nil {
		return backends.Instance{}, err
	}
	virt, err := b.imageSize(ctx, diskPath, format)
	if err != nil {
		return backends.Instance{}, err
	}
	c, err := b.acquire(ctx)
	if err != nil {
		return backends.Instance{}, err
	}
	defer release(c)
	if err := b.nameFree(c, spec.Name); err != nil {
		return backends.Instance{}, err
	}
	disk := filepath.Join(b.opts.DataDir, spec.Name+".qcow2")
	if _, err := os.Stat(disk); err == nil {
		return backends.Instance{}, backends.Conflictf("a disk for %s already exists in the data directory of context %s", spec.Name, b.opts.Context)
	}
	if err := os.MkdirAll(b.opts.DataDir, 0o750); err != nil {
		return backends.Instance{}, backends.Failed(fmt.Sprintf("could not prepare the data directory of context %s", b.opts.Context), err)
	}
	if err := qemuimg.Tool("").Convert(ctx, diskPath, format, disk, "qcow2"); err != nil {
		_ = removeDisk(disk)
		return backends.Instance{}, diskError(b.opts.Context, fmt.Sprintf("could not copy the disk of %s", spec.Name), err)
	}
	if want := spec.DiskMiB << 20; want > virt {
		if err := qemuimg.Tool("").Resize(ctx, disk, "qcow2", spec.DiskMiB); err != nil {
			_ = removeDisk(disk)
			return backends.Instance{}, diskError(b.opts.Context, fmt.Sprintf("could not grow the disk of %s", spec.Name), err)
		}
	}
	return b.define(c, spec, disk, "start the imported instance")
}

// CanImport implements backends.ImportChecker: the test driver has no
// storage, a remote daemon could not open a file written here, and the
// disk needs a DataDir.
func (b *Backend) CanImport() error {
	switch {
	case b.test:
		return backends.Refuse(backends.KindLibvirt, "import", "the test driver has no storage: import into a qemu:/// context")
	case !b.local():
		return backends.Refuse(backends.KindLibvirt, "import onto a remote hypervisor", "use a context with a local URI (qemu:///system)")
	case b.opts.DataDir == "":
		return backends.Refuse(backends.KindLibvirt, "import", fmt.Sprintf("configure a data directory for context %s so imported disks have a place", b.opts.Context))
	}
	return nil
}

// DiskSource implements backends.DiskSourcer: the first file disk of a
// domain (InUse while it is not shut off). It is refused on a remote URI, whose files are not on
// this host (qemu-img would fail there with a baffling "no such file"),
// and for a domain whose disk is not a file (a network or block disk).
func (b *Backend) DiskSource(ctx context.Context, ref backends.InstanceRef) (backends.Disk, error) {
	if b.test {
		return backends.Disk{}, backends.Refuse(backends.KindLibvirt, "disk source", "the test driver has no disk files")
	}
	if !b.local() {
		return backends.Disk{}, backends.Refuse(backends.KindLibvirt, "move from a remote hypervisor", "use a context with a local URI: Corral reads the disk file")
	}
	d, err := b.lookup(ctx, ref)
	if err != nil {
		return backends.Disk{}, err
	}
	defer d.Free()
	st, _, err := d.GetState()
	if err != nil {
		return backends.Disk{}, b.fail("read", ref.Name, err)
	}
	doc, err := d.GetXMLDesc(libvirt.DOMAIN_XML_INACTIVE)
	if err != nil {
		return backends.Disk{}, b.fail("read", ref.Name, err)
	}
	var def libvirtxml.Domain
	if err := def.Unmarshal(doc); err != nil {
		return backends.Disk{}, b.fail("read", ref.Name, err)
	}
	var path string
	if def.Devices != nil {
		for _, dk := range def.Devices.Disks {
			if (dk.Device == "" || dk.Device == "disk") && dk.Source != nil && dk.Source.File != nil {
				path = dk.Source.File.File
				break
			}
		}
	}
	if path == "" {
		return backends.Disk{}, backends.Refuse(backends.KindLibvirt, "move of a domain without a file disk", "copy its storage with the hypervisor's own tools")
	}
	ii, err := qemuimg.Tool("").Info(ctx, path, true) // -U: the guest may run
	if err != nil {
		return backends.Disk{}, diskError(b.opts.Context, fmt.Sprintf("could not read the disk of %s", ref.Name), err)
	}
	fw := backends.FirmwareBIOS
	if def.OS != nil && (def.OS.Firmware == "efi" || def.OS.Loader != nil && def.OS.Loader.Type == "pflash") {
		fw = backends.FirmwareUEFI
	}
	return backends.Disk{Path: path, Format: ii.Format, VirtualMiB: qemuimg.ToMiB(ii.VirtualSize), Firmware: fw,
		InUse: stateOf(st) != backends.StateStopped}, nil
}

// local reports whether the URI names a hypervisor on this host: no host
// part, or a unix transport (qemu:///system, qemu+unix:///system?socket=).
func (b *Backend) local() bool {
	u, err := url.Parse(b.opts.URI)
	return err == nil && (u.Host == "" || u.Host == "localhost")
}

// imageSize returns the virtual size of path, which must be of format.
// A path that is not a file, or that qemu-img reads as another format or
// not at all, is Invalid (the caller gave the wrong file); a qemu-img that
// is not installed or did not finish in time leaves the context
// Unavailable, and output qemu-img should never give is a Failed.
func (b *Backend) imageSize(ctx context.Context, path, format string) (int64, error) {
	bad := fmt.Sprintf("the image to import cannot be read as %s: give a qcow2 or raw file", format)
	if st, err := os.Stat(path); err != nil || !st.Mode().IsRegular() {
		return 0, backends.Invalidf("%s", bad)
	}
	// -U: a running guest holds the image locked; only its format and
	// size are read, which the guest does not change.
	ii, err := qemuimg.Tool("").Info(ctx, path, true)
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit) && ctx.Err() == nil:
		// qemu-img ran and refused the file.
		return 0, &backends.Error{Kind: backends.ErrInvalid, Msg: bad, Err: err}
	default:
		return 0, diskError(b.opts.Context, "could not read the image to import", err)
	}
	if ii.Format != format {
		return 0, backends.Invalidf("the image to import is %s, not %s as stated", ii.Format, format)
	}
	return ii.VirtualSize, nil
}
