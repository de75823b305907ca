package app

import (
	"github.com/corral-dev/corral/app/vdi"
	"github.com/corral-dev/corral/app/vdi/ctpool"
	"github.com/corral-dev/corral/backends/kubevirt"
)

// ctPools serves the CT pools (app/vdi/ctpool) of every namespace of the
// KubeVirt contexts of this process to the broker, beside the VM pools.
func (a *App) ctPools(kube vdi.Kube) vdi.CTPools {
	return &ctpool.Seam{Log: a.log, Clusters: func() []ctpool.Cluster {
		var out []ctpool.Cluster
		for _, b := range a.Fleet.Backends() {
			if _, ok := b.(*kubevirt.Backend); !ok {
				continue
			}
			k, _, err := kube(b.Context())
			if err != nil {
				a.log.Warn("vdi: CT pools of a context not served", "context", b.Context(), "err", err)
				continue
			}
			out = append(out, ctpool.Cluster{Context: b.Context(), Kube: k})
		}
		return out
	}}
}
