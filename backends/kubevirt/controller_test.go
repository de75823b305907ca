package kubevirt_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
)

// The test API server runs no KubeVirt: no virt-controller, no snapshot or
// clone controller. fakeKubeVirt plays their part for one namespace, the
// way KubeVirt would, through the same API: it watches VMs, VMIs,
// snapshots, restores and clones, and on every change reconciles:
//
//   - a VM whose runStrategy keeps it running (Always, RerunOnFailure) gets
//     a VMI (phase Running, a node and an IP) and status.printableStatus
//     Running; any other VM loses its VMI and becomes Stopped. A VMI
//     deleted under a running VM (restart) is created again.
//   - a snapshot becomes readyToUse, with the indications KubeVirt gives:
//     Online and NoGuestAgent when the source has a VMI, none when stopped.
//   - a restore completes.
//   - a clone creates its target VM from the source's spec and labels
//     (minus the labelFilters' exclusions) and succeeds; a target that
//     exists fails it.
//
// Status is written through the status subresource where the CRD has one
// (VMs, snapshots, restores, clones); a VMI's status is part of the object,
// as in KubeVirt.
type fakeKubeVirt struct {
	dyn  dynamic.Interface
	ns   string
	t    *testing.T
	nips int
}

var (
	gvrVM       = schema.GroupVersionResource{Group: "kubevirt.io", Version: "v1", Resource: "virtualmachines"}
	gvrVMI      = schema.GroupVersionResource{Group: "kubevirt.io", Version: "v1", Resource: "virtualmachineinstances"}
	gvrSnapshot = schema.GroupVersionResource{Group: "snapshot.kubevirt.io", Version: "v1beta1", Resource: "virtualmachinesnapshots"}
	gvrRestore  = schema.GroupVersionResource{Group: "snapshot.kubevirt.io", Version: "v1beta1", Resource: "virtualmachinerestores"}
	gvrClone    = schema.GroupVersionResource{Group: "clone.kubevirt.io", Version: "v1beta1", Resource: "virtualmachineclones"}
	gvrDV       = schema.GroupVersionResource{Group: "cdi.kubevirt.io", Version: "v1beta1", Resource: "datavolumes"}
)

// startFakeKubeVirt runs the controllers until the test ends.
func startFakeKubeVirt(t *testing.T, dyn dynamic.Interface, ns string) {
	f := &fakeKubeVirt{dyn: dyn, ns: ns, t: t}
	ctx, cancel := context.WithCancel(context.Background())
	kick := make(chan struct{}, 1)
	var wg sync.WaitGroup
	for _, gvr := range []schema.GroupVersionResource{gvrVM, gvrVMI, gvrSnapshot, gvrRestore, gvrClone} {
		wg.Go(func() {
			for ctx.Err() == nil {
				w, err := dyn.Resource(gvr).Namespace(ns).Watch(ctx, metav1.ListOptions{})
				if err != nil {
					time.Sleep(100 * time.Millisecond)
					continue
				}
				for range w.ResultChan() {
					select {
					case kick <- struct{}{}:
					default:
					}
				}
				w.Stop()
			}
		})
	}
	wg.Go(func() {
		// A resync now and then catches what a restarted watch missed.
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-kick:
			case <-tick.C:
			}
			if err := f.reconcile(ctx); err != nil && ctx.Err() == nil {
				t.Logf("fake KubeVirt: %v", err)
			}
		}
	})
	t.Cleanup(func() { cancel(); wg.Wait() })
}

func (f *fakeKubeVirt) res(gvr schema.GroupVersionResource) dynamic.ResourceInterface {
	return f.dyn.Resource(gvr).Namespace(f.ns)
}

func (f *fakeKubeVirt) reconcile(ctx context.Context) error {
	vms, err := f.res(gvrVM).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	vmis, err := f.res(gvrVMI).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	running := map[string]bool{}
	for _, i := range vmis.Items {
		running[i.GetName()] = true
	}
	for _, vm := range vms.Items {
		rs, _, _ := unstructured.NestedString(vm.Object, "spec", "runStrategy")
		want := rs == "Always" || rs == "RerunOnFailure"
		switch {
		case want && !running[vm.GetName()]:
			if err := f.createVMI(ctx, vm); err != nil {
				return err
			}
			running[vm.GetName()] = true
		case !want && running[vm.GetName()]:
			if err := f.res(gvrVMI).Delete(ctx, vm.GetName(), metav1.DeleteOptions{}); err != nil {
				return err
			}
			running[vm.GetName()] = false
		}
		status := map[bool]string{true: "Running", false: "Stopped"}[want]
		if ps, _, _ := unstructured.NestedString(vm.Object, "status", "printableStatus"); ps != status {
			if err := f.patchStatus(ctx, gvrVM, vm.GetName(), map[string]any{"printableStatus": status, "ready": want, "created": want}); err != nil {
				return err
			}
		}
	}
	if err := f.snapshots(ctx, running); err != nil {
		return err
	}
	if err := f.restores(ctx); err != nil {
		return err
	}
	return f.clones(ctx)
}

func (f *fakeKubeVirt) createVMI(ctx context.Context, vm unstructured.Unstructured) error {
	spec, _, _ := unstructured.NestedMap(vm.Object, "spec", "template", "spec")
	f.nips++
	vmi := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kubevirt.io/v1",
		"kind":       "VirtualMachineInstance",
		"metadata": map[string]any{
			"name":   vm.GetName(),
			"labels": map[string]any{"kubevirt.io/vm": vm.GetName()},
			"ownerReferences": []any{map[string]any{
				"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine", "name": vm.GetName(), "uid": string(vm.GetUID()), "controller": true,
			}},
		},
		"spec": spec,
		"status": map[string]any{
			"phase":      "Running",
			"nodeName":   "node-a",
			"interfaces": []any{map[string]any{"name": "default", "ipAddress": fmt.Sprintf("10.244.0.%d", f.nips%250+2)}},
			"conditions": []any{map[string]any{"type": "Ready", "status": "True"}},
		},
	}}
	_, err := f.res(gvrVMI).Create(ctx, vmi, metav1.CreateOptions{})
	return err
}

func (f *fakeKubeVirt) patchStatus(ctx context.Context, gvr schema.GroupVersionResource, name string, status map[string]any) error {
	p, err := jsonPatch(map[string]any{"status": status})
	if err != nil {
		return err
	}
	_, err = f.res(gvr).Patch(ctx, name, types.MergePatchType, p, metav1.PatchOptions{}, "status")
	return err
}

func (f *fakeKubeVirt) snapshots(ctx context.Context, running map[string]bool) error {
	items, err := f.res(gvrSnapshot).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, s := range items.Items {
		if _, done, _ := unstructured.NestedFieldNoCopy(s.Object, "status", "phase"); done {
			continue
		}
		src, _, _ := unstructured.NestedString(s.Object, "spec", "source", "name")
		status := map[string]any{"readyToUse": true, "phase": "Succeeded", "creationTime": time.Now().UTC().Format(time.RFC3339)}
		if running[src] {
			status["indications"] = []any{"Online", "NoGuestAgent"}
		}
		if err := f.patchStatus(ctx, gvrSnapshot, s.GetName(), status); err != nil {
			return err
		}
	}
	return nil
}

func (f *fakeKubeVirt) restores(ctx context.Context) error {
	items, err := f.res(gvrRestore).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, r := range items.Items {
		if done, _, _ := unstructured.NestedBool(r.Object, "status", "complete"); done {
			continue
		}
		status := map[string]any{"complete": true, "restoreTime": time.Now().UTC().Format(time.RFC3339),
			"conditions": []any{map[string]any{"type": "Ready", "status": "True"}}}
		if err := f.patchStatus(ctx, gvrRestore, r.GetName(), status); err != nil {
			return err
		}
	}
	return nil
}

func (f *fakeKubeVirt) clones(ctx context.Context) error {
	items, err := f.res(gvrClone).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, c := range items.Items {
		if phase, _, _ := unstructured.NestedString(c.Object, "status", "phase"); phase != "" {
			continue
		}
		src, _, _ := unstructured.NestedString(c.Object, "spec", "source", "name")
		dst, _, _ := unstructured.NestedString(c.Object, "spec", "target", "name")
		filters, _, _ := unstructured.NestedStringSlice(c.Object, "spec", "labelFilters")
		phase := "Succeeded"
		if err := f.cloneVM(ctx, src, dst, filters); err != nil {
			f.t.Logf("fake KubeVirt: clone %s: %v", c.GetName(), err)
			phase = "Failed"
		}
		if err := f.patchStatus(ctx, gvrClone, c.GetName(), map[string]any{"phase": phase, "targetName": dst}); err != nil {
			return err
		}
	}
	return nil
}

// cloneVM creates dst from src's spec and labels, as KubeVirt's clone
// controller does after restoring the snapshot it took.
func (f *fakeKubeVirt) cloneVM(ctx context.Context, src, dst string, filters []string) error {
	vm, err := f.res(gvrVM).Get(ctx, src, metav1.GetOptions{})
	if err != nil {
		return err
	}
	labels := maps.Clone(vm.GetLabels())
	if !slices.Contains(filters, "*") && len(filters) > 0 {
		labels = map[string]string{}
	}
	for _, flt := range filters {
		if k, ok := strings.CutPrefix(flt, "!"); ok {
			delete(labels, k)
		}
	}
	spec, _, _ := unstructured.NestedMap(vm.Object, "spec")
	out := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kubevirt.io/v1",
		"kind":       "VirtualMachine",
		"metadata":   map[string]any{"name": dst},
		"spec":       spec,
	}}
	out.SetLabels(labels)
	_, err = f.res(gvrVM).Create(ctx, out, metav1.CreateOptions{})
	return err
}
