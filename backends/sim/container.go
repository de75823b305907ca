package sim

import (
	"context"
	"strconv"

	"github.com/corral-dev/corral/backends"
)

var _ backends.Containers = (*Backend)(nil)

// CreateContainer implements backends.Containers: a simulated CT, an
// instance of type CT with the image and privilege as facts, so the
// surfaces that show CTs (the Proxmox API's lxc guests among them) can be
// tested without a cluster. Like Create, it starts the CT when spec.Start.
func (b *Backend) CreateContainer(ctx context.Context, spec backends.Spec, image string, privileged bool) (backends.Instance, error) {
	if image == "" {
		return backends.Instance{}, backends.Invalidf("image is required for a CT: give an OCI image, e.g. docker.io/library/debian:bookworm")
	}
	spec.Type = backends.TypeCT
	if _, err := b.Create(ctx, spec); err != nil {
		return backends.Instance{}, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	in := b.instances[spec.Name]
	in.inst.Facts = append(in.inst.Facts, backends.Fact{Label: "Image", Value: image},
		backends.Fact{Label: "Privileged", Value: strconv.FormatBool(privileged)})
	return clone(in.inst), nil
}
