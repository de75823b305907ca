package proxmox

import (
	"context"
	"errors"

	"github.com/corral-dev/corral/backends"
)

// Clone implements backends.Cloner: a full clone (a linked clone needs a
// template) of a stopped qemu guest onto the same node, with the vmid PVE
// proposes. A running source is refused: PVE would copy disks the guest
// is writing to.
func (b *Backend) Clone(ctx context.Context, ref backends.InstanceRef, target string) (backends.Instance, error) {
	if err := backends.ValidateName("clone", target); err != nil {
		return backends.Instance{}, err
	}
	g, err := b.lookup(ctx, ref)
	if err != nil {
		return backends.Instance{}, err
	}
	if g.kind != "qemu" {
		return backends.Instance{}, backends.Refuse(backends.KindProxmox, "clone of a CT", "clone it in Proxmox VE (pct clone)")
	}
	if g.state() != backends.StateStopped {
		return backends.Instance{}, backends.Conflictf("cannot clone %s while it is %s: stop it first", ref.Name, g.state())
	}
	if err := b.nameFree(ctx, target); err != nil {
		return backends.Instance{}, err
	}
	err = nil
	for range 3 { // a vmid taken meanwhile: try the next proposal
		var id int
		if id, err = b.nextID(ctx); err != nil {
			return backends.Instance{}, err
		}
		params := map[string]any{"newid": id, "name": target, "full": 1}
		if err = b.do(ctx, "POST", g.path("clone"), params, "clone", ref.Name); !errors.Is(err, backends.ErrConflict) {
			break
		}
	}
	if err != nil {
		return backends.Instance{}, err
	}
	return b.Get(ctx, backends.InstanceRef{Backend: backends.KindProxmox, Context: b.opts.Context, Namespace: g.node, Name: target})
}
