package vdi

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/corral-dev/corral/backends"
)

// The presentation state a VM member carries on KubeVirt (spec/vdi.md).
// The Lease is the authority; these are a copy for kubectl, and the only
// state of a v0.6.0 assignment, which had no Lease.
const (
	LabelAssignedTo = "corral.dev/vdi-assigned-to" // label-safe copy of the holder
	AnnAssignedTo   = "corral.dev/vdi-assigned-to" // the exact holder
	AnnClaimedAt    = "corral.dev/vdi-claimed-at"
)

var gvrVM = schema.GroupVersionResource{Group: "kubevirt.io", Version: "v1", Resource: "virtualmachines"}

// LabelSafe returns the label-safe copy of an identity: characters a
// label value cannot hold become "_" ("alice@example.com" becomes
// "alice_example.com"), cut to 63 characters and trimmed to end on a
// letter or digit.
func LabelSafe(id string) string {
	b := []byte(id)
	for i, c := range b {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.'
		if !ok {
			b[i] = '_'
		}
	}
	s := string(b)
	if len(s) > 63 {
		s = s[:63]
	}
	return strings.Trim(s, "-_.")
}

func (s *Service) patchVM(ctx context.Context, ref backends.InstanceRef, meta map[string]any) error {
	if s.opts.Kube == nil {
		return backends.Invalidf("context kubevirt/%s has no Kubernetes client", ref.Context)
	}
	_, dyn, err := s.opts.Kube(ref.Context)
	if err != nil {
		return backends.Unavailable(ref.Context, err)
	}
	body, err := json.Marshal(map[string]any{"metadata": meta})
	if err != nil {
		return err
	}
	_, err = dyn.Resource(gvrVM).Namespace(ref.Namespace).Patch(ctx, ref.Name, types.MergePatchType, body, metav1.PatchOptions{FieldManager: leaseFieldManager})
	if err != nil {
		return backends.Failed("label VM "+ref.Namespace+"/"+ref.Name, err)
	}
	return nil
}

// labelPool marks a KubeVirt member as a member of pool.
func (s *Service) labelPool(ctx context.Context, ref backends.InstanceRef, pool string) error {
	return s.patchVM(ctx, ref, map[string]any{"labels": map[string]any{LabelPool: pool}})
}

// markAssigned copies the holder onto a KubeVirt member; a nil holder
// clears the copy.
func (s *Service) markAssigned(ctx context.Context, ref backends.InstanceRef, holder string, at time.Time) error {
	var label, ann, when any
	if holder != "" {
		label, ann, when = LabelSafe(holder), holder, at.UTC().Format(time.RFC3339)
	}
	return s.patchVM(ctx, ref, map[string]any{
		"labels":      map[string]any{LabelAssignedTo: label},
		"annotations": map[string]any{AnnAssignedTo: ann, AnnClaimedAt: when},
	})
}

// legacyAssignments returns, by desktop ID, the holders that KubeVirt
// members carry in their assigned-to label: the assignments of v0.6.0
// (no Lease) and the copies of current claims. Elsewhere it is empty.
func (s *Service) legacyAssignments(ctx context.Context, p *pool) (map[string]string, error) {
	out := map[string]string{}
	if !p.kubevirt() {
		return out, nil
	}
	if s.opts.Kube == nil {
		return nil, backends.Invalidf("context kubevirt/%s has no Kubernetes client", p.golden.Context)
	}
	_, dyn, err := s.opts.Kube(p.golden.Context)
	if err != nil {
		return nil, backends.Unavailable(p.golden.Context, err)
	}
	// The claims that arrive together share one List, as they share the
	// picker's read of the claims: each claim Listed the namespace's
	// assigned VMs before (docs/performance.md, the whole broker on
	// KubeVirt). The result is only read.
	v, err, _ := s.labels.Do(p.golden.Context+"/"+p.golden.Namespace, func() (any, error) {
		return dyn.Resource(gvrVM).Namespace(p.golden.Namespace).List(context.WithoutCancel(ctx), metav1.ListOptions{LabelSelector: LabelAssignedTo})
	})
	if err != nil {
		return nil, backends.Failed("read the assignment labels of pool "+p.id.String(), err)
	}
	list := v.(*unstructured.UnstructuredList)
	for _, vm := range list.Items {
		d := DesktopID{Kind: "vm", Namespace: vm.GetNamespace(), Member: vm.GetName()}
		if _, _, ok := p.member(d); ok {
			out[d.String()] = vm.GetLabels()[LabelAssignedTo]
		}
	}
	return out, nil
}
