package vdi

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/corral-dev/corral/app/tasks"
	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/store"
)

// ImportPool registers a pool that exists on KubeVirt only as labels
// (the pools of v0.6.0's corral-vdi: VMs labelled corral.dev/vdi-pool=
// NAME in the golden VM's namespace). Nothing on the cluster changes:
// the members keep their assignment labels, which the broker honours
// (spec/vdi.md, Upgrade from v0.6.0). The pool is persistent. It runs as
// the task "vdi pool import".
func (s *Service) ImportPool(ctx context.Context, o tasks.Origin, name, goldenText string) (Pool, error) {
	spec := tasks.Spec{Action: "vdi pool import", Target: name, Origin: o}
	golden, err := s.opts.Fleet.Snapshot().Resolve(goldenText)
	if err != nil {
		return Pool{}, s.opts.Tasks.Refused(ctx, spec, fmt.Errorf("golden VM: %w", err))
	}
	if golden.Backend != backends.KindKubeVirt || golden.Peer != "" {
		return Pool{}, s.opts.Tasks.Refused(ctx, spec, backends.Invalidf("only KubeVirt pools exist as labels: %s is on %s", golden, golden.Backend))
	}
	if s.opts.Kube == nil {
		return Pool{}, s.opts.Tasks.Refused(ctx, spec, backends.Invalidf("context kubevirt/%s has no Kubernetes client", golden.Context))
	}
	id := PoolID{Kind: "vm", Namespace: golden.Namespace, Pool: name}
	spec.Target = id.String()
	var out Pool
	_, err = s.opts.Tasks.Do(ctx, spec, func(ctx context.Context, r *tasks.Run) error {
		_, dyn, err := s.opts.Kube(golden.Context)
		if err != nil {
			return backends.Unavailable(golden.Context, err)
		}
		list, err := dyn.Resource(gvrVM).Namespace(golden.Namespace).List(ctx, metav1.ListOptions{LabelSelector: labels.Set{LabelPool: name}.String()})
		if err != nil {
			return backends.Failed("list the VMs labelled "+LabelPool+"="+name, err)
		}
		var names []string
		for _, vm := range list.Items {
			names = append(names, vm.GetName())
		}
		if len(names) == 0 {
			return backends.NotFoundf("no VM in namespace %s is labelled %s=%s", golden.Namespace, LabelPool, name)
		}
		slices.SortFunc(names, func(a, b string) int { return memberOrder(a, b, name) })
		err = s.opts.Store.CreateVDIPool(ctx, store.VDIPool{ID: id.String(), Kind: "vm", Namespace: golden.Namespace, Name: name, Golden: golden.String()})
		if errors.Is(err, store.ErrExists) {
			return backends.Conflictf("pool %s is registered already", id)
		}
		if err != nil {
			return err
		}
		for i, n := range names {
			ref := backends.InstanceRef{Backend: backends.KindKubeVirt, Context: golden.Context, Namespace: golden.Namespace, Name: n}
			d := DesktopID{Kind: "vm", Namespace: golden.Namespace, Member: n}
			if err := s.opts.Store.AddVDIMember(ctx, store.VDIMember{Desktop: d.String(), Pool: id.String(), Index: i + 1, Ref: ref.String()}); err != nil {
				_ = s.opts.Store.DeleteVDIPool(context.WithoutCancel(ctx), id.String())
				if errors.Is(err, store.ErrExists) {
					return backends.Conflictf("VM %s belongs to another registered pool", n)
				}
				return err
			}
			r.Logf("member %s", n)
		}
		p, err := s.load(ctx, id)
		if err != nil {
			return err
		}
		out, err = s.describe(ctx, p)
		return err
	})
	return out, err
}

// memberOrder sorts POOL-2 before POOL-10, and other names after.
func memberOrder(a, b, pool string) int {
	na, oka := memberIndex(a, pool)
	nb, okb := memberIndex(b, pool)
	switch {
	case oka && okb && na != nb:
		return na - nb
	case oka != okb:
		if oka {
			return -1
		}
		return 1
	}
	return strings.Compare(a, b)
}

func memberIndex(name, pool string) (int, bool) {
	rest, ok := strings.CutPrefix(name, pool+"-")
	if !ok || rest == "" {
		return 0, false
	}
	n := 0
	for _, c := range rest {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}
