package kubevirt

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/corral-dev/corral/backends"
)

// apis are the API groups the backend uses, each with the resources it
// needs from it; KubeVirt's own is required, the others enable one
// capability each.
var apis = []struct {
	gv        string
	resources []string
	role      string
}{
	{"kubevirt.io/v1", []string{"virtualmachines", "virtualmachineinstances"}, "VMs"},
	{"snapshot.kubevirt.io/v1beta1", []string{"virtualmachinesnapshots", "virtualmachinerestores"}, "snapshots"},
	{"clone.kubevirt.io/v1beta1", []string{"virtualmachineclones"}, "clones"},
	{"cdi.kubevirt.io/v1beta1", []string{"datavolumes"}, "URL imports and blank disks (CDI)"},
}

// Doctor implements backends.Doctor: the API server answers (its
// version), the KubeVirt and CDI resources are served, and the default
// namespace for new VMs exists. Messages name the context, never the
// server's address or the credentials.
func (b *Backend) Doctor(ctx context.Context) []backends.Check {
	reach := backends.Check{Name: fmt.Sprintf("API server of context %s answers", b.opts.Context)}
	v, err := b.kube.Discovery().ServerVersion()
	if err != nil {
		reach.Message = cmp.Or(backends.SafeMessage(b.fail("reach", "context "+b.opts.Context, err)), "the API server does not answer")
		return []backends.Check{reach}
	}
	reach.OK, reach.Message = true, "Kubernetes "+v.GitVersion
	checks := []backends.Check{reach}
	for _, api := range apis {
		c := backends.Check{Name: fmt.Sprintf("%s API (%s)", api.gv, api.role)}
		list, err := b.kube.Discovery().ServerResourcesForGroupVersion(api.gv)
		var served []string
		if err == nil {
			for _, r := range list.APIResources {
				served = append(served, r.Name)
			}
		}
		var missing []string
		for _, r := range api.resources {
			if !slices.Contains(served, r) {
				missing = append(missing, r)
			}
		}
		if len(missing) == 0 {
			c.OK, c.Message = true, "served"
		} else {
			c.Message = fmt.Sprintf("not served: %v; install KubeVirt (and CDI for disks from URLs) in the cluster", missing)
		}
		checks = append(checks, c)
	}
	ns := backends.Check{Name: fmt.Sprintf("default namespace %s exists", b.opts.Namespace)}
	if _, err := b.kube.CoreV1().Namespaces().Get(ctx, b.opts.Namespace, metav1.GetOptions{}); err != nil {
		ns.Message = cmp.Or(backends.SafeMessage(b.fail("read", "namespace "+b.opts.Namespace, err)), "could not read the namespace")
		if apierrors.IsNotFound(err) {
			ns.Message = fmt.Sprintf("namespace %s does not exist: create it (kubectl create namespace %s) or set another default", b.opts.Namespace, b.opts.Namespace)
		}
	} else {
		ns.OK, ns.Message = true, "exists"
	}
	return append(checks, ns)
}
