package kubevirt

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/corral-dev/corral/backends"
)

// List implements backends.Backend: the VirtualMachines of every
// namespace, merged with the VirtualMachineInstances of the same name for
// the IP, the node and the phase. Two requests, whatever the fleet's
// size. VMIs without a VM (made directly, not through a VM) are not
// listed: Corral powers instances through the VM's run strategy, which a
// bare VMI does not have.
//
// List always asks the API server rather than the watch's cache, so a
// caller that just deleted a VM never sees it again.
func (b *Backend) List(ctx context.Context) ([]backends.Instance, error) {
	vms, err := b.dyn.Resource(gvrVM).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, b.fail("list the virtual machines of", "context "+b.opts.Context, err)
	}
	vmis, err := b.dyn.Resource(gvrVMI).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, b.fail("list the virtual machine instances of", "context "+b.opts.Context, err)
	}
	byKey := make(map[types.NamespacedName]obj, len(vmis.Items))
	for _, i := range vmis.Items {
		byKey[types.NamespacedName{Namespace: i.GetNamespace(), Name: i.GetName()}] = i.Object
	}
	out := make([]backends.Instance, 0, len(vms.Items))
	for _, vm := range vms.Items {
		vmi := byKey[types.NamespacedName{Namespace: vm.GetNamespace(), Name: vm.GetName()}]
		out = append(out, b.instance(vm.Object, vmi))
	}
	cts, err := b.listCTs(ctx)
	if errors.Is(err, backends.ErrForbidden) {
		// Credentials that may read VMs but not pods or PVCs: list the VMs.
		b.opts.Logger.Warn("kubevirt: containers not listed", "context", b.opts.Context, "err", err)
		return out, nil
	}
	if err != nil {
		return nil, err
	}
	return append(out, cts...), nil
}

// Get implements backends.Backend.
func (b *Backend) Get(ctx context.Context, ref backends.InstanceRef) (backends.Instance, error) {
	vm, vmi, err := b.getVM(ctx, ref)
	if err != nil {
		if pvc, pod, ok := b.asCT(ctx, ref, err); ok {
			return b.ctInstance(pvc, pod), nil
		}
		return backends.Instance{}, err
	}
	return b.instance(vm.Object, vmi), nil
}

// getVM returns the VM ref names and its VMI (nil when it has none).
func (b *Backend) getVM(ctx context.Context, ref backends.InstanceRef) (*unstructured.Unstructured, obj, error) {
	if err := b.check(ref); err != nil {
		return nil, nil, err
	}
	vm, err := b.dyn.Resource(gvrVM).Namespace(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	if err != nil {
		return nil, nil, b.fail("read", "VM "+ref.Namespace+"/"+ref.Name, err)
	}
	vmi, err := b.getVMI(ctx, ref.Namespace, ref.Name)
	if err != nil {
		return nil, nil, err
	}
	return vm, vmi, nil
}

// getVMI returns the VMI of a VM, or nil when it has none.
func (b *Backend) getVMI(ctx context.Context, namespace, name string) (obj, error) {
	vmi, err := b.dyn.Resource(gvrVMI).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, b.fail("read the instance of", "VM "+namespace+"/"+name, err)
	}
	return vmi.Object, nil
}

// Delete implements backends.Backend. Nothing is left to a garbage
// collector: the VM goes first (so it leaves the inventory at once), then
// its VMI, the DataVolumes of its dataVolumeTemplates, and every
// DataVolume, PVC, Secret, snapshot, restore and clone object labelled
// corral.dev/vm=NAME or naming it as their source or target. PVCs and
// DataVolumes the VM merely uses (an existing PVC it was given) carry no
// label and are kept.
func (b *Backend) Delete(ctx context.Context, ref backends.InstanceRef) error {
	vm, _, err := b.getVM(ctx, ref)
	if err != nil {
		if _, _, ok := b.asCT(ctx, ref, err); ok {
			return b.deleteCT(ctx, ref.Namespace, ref.Name)
		}
		return err
	}
	what := "VM " + ref.Namespace + "/" + ref.Name
	if err := b.dyn.Resource(gvrVM).Namespace(ref.Namespace).Delete(ctx, ref.Name, metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{UID: ptr.To(vm.GetUID())},
	}); err != nil {
		return b.fail("delete", what, err)
	}
	var errs []error
	gone := func(op string, err error) {
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, b.fail(op, what, err))
		}
	}
	ns := b.dyn.Resource(gvrVMI).Namespace(ref.Namespace)
	gone("delete the instance of", ns.Delete(ctx, ref.Name, metav1.DeleteOptions{}))
	for _, t := range list(vm.Object, "spec", "dataVolumeTemplates") {
		if t, ok := t.(obj); ok {
			if name := str(t, "metadata", "name"); name != "" {
				gone("delete a DataVolume of", b.dyn.Resource(gvrDV).Namespace(ref.Namespace).Delete(ctx, name, metav1.DeleteOptions{}))
			}
		}
	}
	sel := metav1.ListOptions{LabelSelector: labelVM + "=" + ref.Name}
	for _, r := range []schema.GroupVersionResource{gvrDV, gvrClone, gvrMigration} {
		gone("delete the objects of", b.dyn.Resource(r).Namespace(ref.Namespace).DeleteCollection(ctx, metav1.DeleteOptions{}, sel))
	}
	gone("delete the PVCs of", b.kube.CoreV1().PersistentVolumeClaims(ref.Namespace).DeleteCollection(ctx, metav1.DeleteOptions{}, sel))
	gone("delete the secrets of", b.kube.CoreV1().Secrets(ref.Namespace).DeleteCollection(ctx, metav1.DeleteOptions{}, sel))
	// Snapshots and restores are found by what they point at, so those
	// made with kubectl go too, as the API reference promises.
	for _, r := range []struct {
		gvr  schema.GroupVersionResource
		path []string
	}{{gvrSnapshot, []string{"spec", "source", "name"}}, {gvrRestore, []string{"spec", "target", "name"}}} {
		items, err := b.dyn.Resource(r.gvr).Namespace(ref.Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			gone("list the snapshots of", err)
			continue
		}
		for _, it := range items.Items {
			if str(it.Object, r.path...) == ref.Name {
				gone("delete a snapshot of", b.dyn.Resource(r.gvr).Namespace(ref.Namespace).Delete(ctx, it.GetName(), metav1.DeleteOptions{}))
			}
		}
	}
	if len(errs) > 0 {
		b.opts.Logger.Warn("kubevirt: VM deleted, some of its objects were not", "context", b.opts.Context, "vm", ref.String(), "err", errors.Join(errs...))
		return backends.Failed(fmt.Sprintf("%s was deleted but some of its disks, secrets or snapshots were not; delete objects labelled %s=%s by hand", what, labelVM, ref.Name), errors.Join(errs...))
	}
	return nil
}

// SetTag implements backends.Tagger: the tag is the label
// corral.dev/tag.TAG=true, added or removed with a merge patch, so tags
// stay selectable with kubectl get vm -l.
func (b *Backend) SetTag(ctx context.Context, ref backends.InstanceRef, tag string, on bool) error {
	if err := b.check(ref); err != nil {
		return err
	}
	if err := validateTag(tag); err != nil {
		return err
	}
	var v any // nil removes the label
	if on {
		v = "true"
	}
	patch, err := jsonBytes(obj{"metadata": obj{"labels": obj{labelTagPrefix + tag: v}}})
	if err != nil {
		return err
	}
	_, err = b.dyn.Resource(gvrVM).Namespace(ref.Namespace).Patch(ctx, ref.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: fieldManager})
	return b.fail("tag", "VM "+ref.Namespace+"/"+ref.Name, err)
}
