package proxmox

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	proxmox "github.com/luthermonson/go-proxmox"

	"github.com/corral-dev/corral/backends"
)

// Defaults of a spec that leaves a size out.
const (
	defaultCPUs      = 1
	defaultMemoryMiB = 512
	defaultDiskMiB   = 8 << 10
)

// Create implements backends.Backend: a qemu guest on the node named by
// spec.Namespace, with the vmid PVE proposes (/cluster/nextid), one
// virtio card on the configured bridge and one SCSI disk on the
// configured storage, rounded up to whole GiB as PVE allocates them.
func (b *Backend) Create(ctx context.Context, spec backends.Spec) (backends.Instance, error) {
	if err := backends.ValidateName("instance", spec.Name); err != nil {
		return backends.Instance{}, err
	}
	if spec.Namespace == "" {
		return backends.Instance{}, backends.Invalidf("a Proxmox VE instance needs a node: give the node's name as the namespace of %s", spec.Name)
	}
	if spec.Type == backends.TypeCT {
		return backends.Instance{}, backends.Refuse(backends.KindProxmox, "container", "create the CT in Proxmox VE; Corral lists and powers it")
	}
	if spec.Image != "" {
		return backends.Instance{}, backends.Refuse(backends.KindProxmox, "create from an image", "create a blank instance, or clone a template")
	}
	if spec.CPUs < 0 || spec.MemoryMiB < 0 || spec.DiskMiB < 0 {
		return backends.Instance{}, backends.Invalidf("CPUs, memory and disk of %s must not be negative", spec.Name)
	}
	if err := b.nameFree(ctx, spec.Name); err != nil {
		return backends.Instance{}, err
	}
	params := map[string]any{
		"name":   spec.Name,
		"cores":  cmp.Or(spec.CPUs, defaultCPUs),
		"memory": cmp.Or(spec.MemoryMiB, defaultMemoryMiB),
		"net0":   "virtio,bridge=" + b.opts.Bridge,
		"scsi0":  fmt.Sprintf("%s:%d", b.opts.Storage, gib(spec.DiskMiB)),
		"scsihw": "virtio-scsi-single",
		"ostype": "l26",
	}
	if len(spec.Tags) > 0 {
		params["tags"] = strings.Join(spec.Tags, ";")
	}
	if spec.Start {
		params["start"] = 1
	}
	path := fmt.Sprintf("/nodes/%s/qemu", url.PathEscape(spec.Namespace))
	// Another client may take the proposed vmid first; PVE then refuses
	// with "already exists" and the next proposal is tried.
	var err error
	for range 3 {
		var id int
		if id, err = b.nextID(ctx); err != nil {
			return backends.Instance{}, err
		}
		params["vmid"] = id
		if err = b.do(ctx, "POST", path, params, "create", spec.Name); !errors.Is(err, backends.ErrConflict) {
			break
		}
	}
	if err != nil {
		return backends.Instance{}, err
	}
	return b.Get(ctx, backends.InstanceRef{Backend: backends.KindProxmox, Context: b.opts.Context, Namespace: spec.Namespace, Name: spec.Name})
}

// gib rounds MiB up to whole GiB, the unit of a new PVE volume; zero
// means the default size.
func gib(mib int64) int64 {
	if mib == 0 {
		mib = defaultDiskMiB
	}
	return (mib + 1023) / 1024
}

// nextID asks PVE for a free vmid.
func (b *Backend) nextID(ctx context.Context) (int, error) {
	cl := &proxmox.Cluster{}
	id, err := cl.New(b.c).NextID(ctx)
	if err != nil {
		return 0, b.fail("allocate a vmid in", b.opts.Context, err)
	}
	return id, nil
}

// nameFree returns a Conflict when a guest anywhere in the cluster is
// called name: PVE would accept the duplicate, and the references of
// both would then fall back to their vmids.
func (b *Backend) nameFree(ctx context.Context, name string) error {
	used, err := b.nameInUse(ctx, name)
	if err != nil {
		return err
	}
	if used {
		return backends.Conflictf("an instance named %s already exists in context %s", name, b.opts.Context)
	}
	return nil
}

// Delete implements backends.Backend: a running guest is stopped first
// (PVE refuses to destroy it), then destroyed with purge, which also
// removes it from backup jobs, HA and replication, and with the disks no
// configuration references.
func (b *Backend) Delete(ctx context.Context, ref backends.InstanceRef) error {
	g, err := b.lookup(ctx, ref)
	if err != nil {
		return err
	}
	if g.Status != "stopped" {
		if err := b.do(ctx, "POST", g.path("status/stop"), nil, "stop", ref.Name); err != nil {
			return err
		}
	}
	params := map[string]any{"purge": 1}
	if g.kind == "qemu" {
		params["destroy-unreferenced-disks"] = 1
	}
	return b.do(ctx, "DELETE", g.path(""), params, "delete", ref.Name)
}
