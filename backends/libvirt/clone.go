package libvirt

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"libvirt.org/go/libvirt"
	"libvirt.org/go/libvirtxml"

	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/internal/qemuimg"
)

// Clone implements backends.Cloner. It defines a copy of a stopped
// domain under the target name, with a new UUID and new MAC addresses
// (libvirt assigns both when they are absent) and a new creation time;
// tags and other tools' metadata are copied. Snapshots are not.
//
// On hypervisor URIs the disks Corral owns (those in DataDir) are copied
// with qemu-img convert (internal snapshots are dropped); a domain with a
// writable disk elsewhere is refused: a copy that shared its source's
// images would corrupt both.
func (b *Backend) Clone(ctx context.Context, ref backends.InstanceRef, target string) (backends.Instance, error) {
	if err := backends.ValidateName("instance", target); err != nil {
		return backends.Instance{}, err
	}
	d, err := b.lookup(ctx, ref)
	if err != nil {
		return backends.Instance{}, err
	}
	defer d.Free()
	st, _, err := d.GetState()
	if err != nil {
		return backends.Instance{}, b.fail("clone", ref.Name, err)
	}
	if stateOf(st) != backends.StateStopped {
		return backends.Instance{}, backends.Conflictf("cannot clone %s: it is %s; stop it first", ref.Name, stateOf(st))
	}
	doc, err := d.GetXMLDesc(libvirt.DOMAIN_XML_INACTIVE)
	if err != nil {
		return backends.Instance{}, b.fail("read", ref.Name, err)
	}
	var def libvirtxml.Domain
	if err := def.Unmarshal(doc); err != nil {
		return backends.Instance{}, b.fail("read", ref.Name, err)
	}
	c, err := b.acquire(ctx)
	if err != nil {
		return backends.Instance{}, err
	}
	defer release(c)
	if err := b.nameFree(c, target); err != nil {
		return backends.Instance{}, err
	}
	var copies []string
	if !b.test && hasDisks(&def) {
		if copies, err = b.copyDisks(ctx, &def, target); err != nil {
			return backends.Instance{}, err
		}
	}
	dropCopies := func() {
		for _, p := range copies {
			_ = removeDisk(p)
		}
	}
	if err := b.rename(&def, target); err != nil {
		dropCopies()
		return backends.Instance{}, b.fail("clone", ref.Name, err)
	}
	out, err := def.Marshal()
	if err != nil {
		dropCopies()
		return backends.Instance{}, b.fail("clone", ref.Name, err)
	}
	nd, err := c.DomainDefineXML(out)
	if err != nil {
		dropCopies()
		return backends.Instance{}, b.fail("define the clone", target, err)
	}
	defer nd.Free()
	in, err := b.instance(nd)
	if err != nil {
		return backends.Instance{}, b.fail("read", target, err)
	}
	return in, nil
}

// rename turns def into the definition of a new domain called name:
// everything that identifies the source to libvirt or to a network is
// cleared so libvirt generates it afresh.
func (b *Backend) rename(def *libvirtxml.Domain, name string) error {
	def.Name = name
	def.UUID = ""
	def.HWUUID = ""
	def.ID = nil
	if def.GenID != nil {
		def.GenID = &libvirtxml.DomainGenID{} // empty asks libvirt for a new one
	}
	if def.Devices != nil {
		for i := range def.Devices.Interfaces {
			def.Devices.Interfaces[i].MAC = nil
		}
		for i := range def.Devices.Serials {
			if l := def.Devices.Serials[i].Log; l != nil && b.serialLog(name) != "" {
				l.File = b.serialLog(name)
			}
		}
	}
	m, err := readMeta(def.Metadata)
	if err != nil {
		return err
	}
	m.Created = b.opts.Now().UTC().Format(time.RFC3339)
	return writeMeta(def, m)
}

// hasDisks reports whether def has a writable disk (a CD-ROM or floppy
// can be shared by a copy).
func hasDisks(def *libvirtxml.Domain) bool {
	if def.Devices == nil {
		return false
	}
	for _, d := range def.Devices.Disks {
		if d.Device == "" || d.Device == "disk" || d.Device == "lun" {
			return true
		}
	}
	return false
}

// copyDisks copies every writable disk of def into DataDir under target's
// name and points def at the copies, which it returns. A disk Corral does
// not own (outside DataDir) is refused before anything is copied.
func (b *Backend) copyDisks(ctx context.Context, def *libvirtxml.Domain, target string) ([]string, error) {
	owned := b.ownedDisks(def)
	var idx []int
	for i, d := range def.Devices.Disks {
		if d.Device != "" && d.Device != "disk" && d.Device != "lun" {
			continue
		}
		if d.Source == nil || d.Source.File == nil || !slices.Contains(owned, d.Source.File.File) {
			return nil, backends.Refuse(backends.KindLibvirt, "clone of a domain with disks outside the data directory", "use virt-clone on the host")
		}
		idx = append(idx, i)
	}
	var copies []string
	for n, i := range idx {
		d := &def.Devices.Disks[i]
		dst := filepath.Join(b.opts.DataDir, target+".qcow2")
		if n > 0 {
			dst = filepath.Join(b.opts.DataDir, fmt.Sprintf("%s-%d.qcow2", target, n))
		}
		if _, err := os.Stat(dst); err == nil {
			err = backends.Conflictf("a disk for %s already exists in the data directory of context %s", target, b.opts.Context)
			for _, p := range copies {
				_ = removeDisk(p)
			}
			return nil, err
		}
		srcFmt := "qcow2"
		if d.Driver != nil && d.Driver.Type != "" {
			srcFmt = d.Driver.Type
		}
		if err := qemuimg.Tool("").Convert(ctx, d.Source.File.File, srcFmt, dst, "qcow2"); err != nil {
			_ = removeDisk(dst)
			for _, p := range copies {
				_ = removeDisk(p)
			}
			return nil, diskError(b.opts.Context, fmt.Sprintf("could not copy the disks of %s", target), err)
		}
		copies = append(copies, dst)
		d.Source.File.File = dst
		if d.Driver == nil {
			d.Driver = &libvirtxml.DomainDiskDriver{Name: "qemu"}
		}
		d.Driver.Type = "qcow2"
	}
	return copies, nil
}
