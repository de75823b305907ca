package libvirt

import (
	"context"
	"time"

	"libvirt.org/go/libvirt"
	"libvirt.org/go/libvirtxml"

	"github.com/corral-dev/corral/backends"
)

// Clone implements backends.Cloner. It defines a copy of a stopped
// domain under the target name, with a new UUID and new MAC addresses
// (libvirt assigns both when they are absent) and a new creation time;
// tags and other tools' metadata are copied. Snapshots are not.
//
// On hypervisor URIs a domain with disks is refused: a copy that shared
// its source's disk images would corrupt both, and copying images is
// virt-clone's job until Corral does it.
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
	if !b.test && hasDisks(&def) {
		return backends.Instance{}, backends.Refuse(backends.KindLibvirt, "clone of libvirt domains with disks", "use virt-clone on the host")
	}
	c, err := b.acquire(ctx)
	if err != nil {
		return backends.Instance{}, err
	}
	defer release(c)
	if err := b.nameFree(c, target); err != nil {
		return backends.Instance{}, err
	}
	if err := b.rename(&def, target); err != nil {
		return backends.Instance{}, b.fail("clone", ref.Name, err)
	}
	out, err := def.Marshal()
	if err != nil {
		return backends.Instance{}, b.fail("clone", ref.Name, err)
	}
	nd, err := c.DomainDefineXML(out)
	if err != nil {
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
