package kubevirt

import (
	"context"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/corral-dev/corral/backends"
)

// Clone implements backends.Cloner with a VirtualMachineClone
// (clone.kubevirt.io/v1beta1): KubeVirt's clone controller snapshots the
// source, restores the snapshot into a new VM and reports phase
// Succeeded. Corral does not copy objects itself: a clone made that way
// would share the source's disks. The clone copies every label except
// the vmid, which Corral then sets for the new name; the finished clone
// object is deleted.
func (b *Backend) Clone(ctx context.Context, ref backends.InstanceRef, target string) (backends.Instance, error) {
	if err := backends.ValidateName("clone", target); err != nil {
		return backends.Instance{}, err
	}
	if _, _, err := b.getVM(ctx, ref); err != nil {
		return backends.Instance{}, err
	}
	tref := b.ref(ref.Namespace, target)
	twhat := "VM " + ref.Namespace + "/" + target
	_, err := b.dyn.Resource(gvrVM).Namespace(ref.Namespace).Get(ctx, target, metav1.GetOptions{})
	switch {
	case err == nil:
		return backends.Instance{}, backends.Conflictf("%s already exists in context %s", twhat, b.opts.Context)
	case !apierrors.IsNotFound(err):
		return backends.Instance{}, b.fail("read", twhat, err)
	}
	vmRef := func(name string) obj { return obj{"apiGroup": "kubevirt.io", "kind": "VirtualMachine", "name": name} }
	clone := &unstructured.Unstructured{Object: obj{
		"apiVersion": "clone.kubevirt.io/v1beta1",
		"kind":       "VirtualMachineClone",
		"metadata": obj{
			"generateName": target + "-clone-",
			"namespace":    ref.Namespace,
			"labels":       obj{labelVM: target},
		},
		"spec": obj{
			"source":       vmRef(ref.Name),
			"target":       vmRef(target),
			"labelFilters": []any{"*", "!" + labelVMID, "!" + labelTemplate}, // a template's clone is an ordinary VM
		},
	}}
	what := "the clone of VM " + ref.Namespace + "/" + ref.Name + " into " + target
	created, err := b.dyn.Resource(gvrClone).Namespace(ref.Namespace).Create(ctx, clone, metav1.CreateOptions{FieldManager: fieldManager})
	if err != nil {
		return backends.Instance{}, b.fail("create", what, err)
	}
	_, err = b.waitFor(ctx, gvrClone, ref.Namespace, created.GetName(), what, func(o obj) (bool, error) {
		switch str(o, "status", "phase") {
		case "Failed":
			return false, backends.Failed("KubeVirt could not complete "+what+"; see the VirtualMachineClone's status", nil)
		case "Succeeded":
			return true, nil
		}
		return false, nil
	})
	if err != nil {
		return backends.Instance{}, err
	}
	patch, err := jsonBytes(obj{"metadata": obj{"labels": obj{labelVMID: strconv.FormatInt(VMID(target), 10)}}})
	if err != nil {
		return backends.Instance{}, err
	}
	if _, err := b.dyn.Resource(gvrVM).Namespace(ref.Namespace).Patch(ctx, target, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: fieldManager}); err != nil {
		return backends.Instance{}, b.fail("label", twhat, err)
	}
	if err := b.dyn.Resource(gvrClone).Namespace(ref.Namespace).Delete(ctx, created.GetName(), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		b.opts.Logger.Warn("kubevirt: could not delete a finished clone object", "vm", tref.String(), "clone", created.GetName(), "err", err)
	}
	return b.Get(ctx, tref)
}

// waitFor polls the object until done reports true or an error, backing
// off from 50 ms to 2 s. Without a deadline on ctx it waits at most
// Options.Wait. Running out of time is ErrTimeout: the operation was
// asked for and may still finish, which the message says.
func (b *Backend) waitFor(ctx context.Context, gvr schema.GroupVersionResource, ns, name, what string, done func(obj) (bool, error)) (*unstructured.Unstructured, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, b.opts.Wait)
		defer cancel()
	}
	delay := 50 * time.Millisecond
	for {
		o, err := b.dyn.Resource(gvr).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if ctx.Err() != nil {
			break
		}
		if err != nil {
			return nil, b.fail("follow", what, err)
		}
		if ok, err := done(o.Object); err != nil || ok {
			return o, err
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
		case <-t.C:
		}
		delay = min(delay*2, 2*time.Second)
	}
	return nil, &backends.Error{Kind: backends.ErrTimeout, Msg: what + " did not finish in time; KubeVirt may still complete it", Err: ctx.Err()}
}
