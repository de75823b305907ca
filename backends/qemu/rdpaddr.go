package qemu

import (
	"context"

	"github.com/corral-dev/corral/backends"
)

var _ backends.RDPAddresser = (*Backend)(nil)

// RDPAddress implements backends.RDPAddresser: the loopback port of the
// current boot's forward to the guest's port 3389.
func (b *Backend) RDPAddress(ctx context.Context, ref backends.InstanceRef) (string, error) {
	v, err := b.lookup(ref)
	if err != nil {
		return "", err
	}
	if _, alive := v.process(); !alive {
		return "", backends.Conflictf("%s is stopped: start it first", ref.Name)
	}
	addr, err := v.rdpAddr()
	if err != nil {
		return "", backends.Conflictf("%s was started without an RDP forward: restart it", ref.Name)
	}
	return addr, nil
}
