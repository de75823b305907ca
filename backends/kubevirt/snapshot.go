package kubevirt

import (
	"cmp"
	"context"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	"github.com/corral-dev/corral/backends"
)

// Snapshots are VirtualMachineSnapshots (snapshot.kubevirt.io/v1beta1).
// One made by Corral is named VM.SNAPSHOT (a dot cannot occur in either
// name, so two VMs of a namespace never collide, which matters for
// schedules that name snapshots auto-DATE on every VM) and labelled
// corral.dev/vm and corral.dev/snapshot; one made with kubectl is listed
// under its object name. Both are found by spec.source.
//
// Consistency comes from KubeVirt's status once the snapshot is ready:
// the indication GuestAgent (without QuiesceFailed) means the guest agent
// froze the filesystems, Online without it means a live capture with
// nothing quiesced (crash), and no Online indication means the VM was
// stopped (offline). Until KubeVirt fills the status, the consistency
// Corral judged at creation is reported: offline when the VM had no VMI,
// filesystem when its VMI had the guest agent connected, crash otherwise.
// It is kept in the annotation corral.dev/consistency.

// Snapshots implements backends.Snapshotter, oldest first.
func (b *Backend) Snapshots(ctx context.Context, ref backends.InstanceRef) ([]backends.Snapshot, error) {
	if _, _, err := b.getVM(ctx, ref); err != nil {
		return nil, err
	}
	items, err := b.snapshotsOf(ctx, ref)
	if err != nil {
		return nil, err
	}
	out := make([]backends.Snapshot, 0, len(items))
	for _, it := range items {
		out = append(out, snapshotOf(it))
	}
	slices.SortFunc(out, func(a, b backends.Snapshot) int { return a.Created.Compare(b.Created) })
	return out, nil
}

// CreateSnapshot implements backends.Snapshotter. It waits until KubeVirt
// reports the snapshot ready to use, or failed, or until the caller's
// deadline (Options.Wait when the caller has none).
func (b *Backend) CreateSnapshot(ctx context.Context, ref backends.InstanceRef, name string) (backends.Snapshot, error) {
	if err := backends.ValidateName("snapshot", name); err != nil {
		return backends.Snapshot{}, err
	}
	vm, vmi, err := b.getVM(ctx, ref)
	if err != nil {
		return backends.Snapshot{}, err
	}
	if _, err := b.findSnapshot(ctx, ref, name); err == nil {
		return backends.Snapshot{}, backends.Conflictf("VM %s/%s already has a snapshot named %s", ref.Namespace, ref.Name, name)
	}
	c := backends.ConsistencyOffline
	if vmi != nil {
		c = backends.ConsistencyCrash
		if hasCondition(vmi, "AgentConnected") {
			c = backends.ConsistencyFilesystem
		}
	}
	snap := &unstructured.Unstructured{Object: obj{
		"apiVersion": "snapshot.kubevirt.io/v1beta1",
		"kind":       "VirtualMachineSnapshot",
		"metadata": obj{
			"name":        ref.Name + "." + name,
			"namespace":   ref.Namespace,
			"labels":      obj{labelVM: ref.Name, labelSnapshot: name},
			"annotations": obj{annConsistency: string(c)},
		},
		"spec": obj{"source": obj{"apiGroup": "kubevirt.io", "kind": "VirtualMachine", "name": vm.GetName()}},
	}}
	what := "snapshot " + name + " of VM " + ref.Namespace + "/" + ref.Name
	created, err := b.dyn.Resource(gvrSnapshot).Namespace(ref.Namespace).Create(ctx, snap, metav1.CreateOptions{FieldManager: fieldManager})
	if err != nil {
		return backends.Snapshot{}, b.fail("create", what, err)
	}
	done, err := b.waitFor(ctx, gvrSnapshot, ref.Namespace, created.GetName(), what, func(o obj) (bool, error) {
		if str(o, "status", "phase") == "Failed" {
			return false, backends.Failed("KubeVirt could not take "+what+"; see the VirtualMachineSnapshot's status", nil)
		}
		ready, _, _ := unstructured.NestedBool(o, "status", "readyToUse")
		return ready, nil
	})
	if err != nil {
		return backends.Snapshot{}, err
	}
	return snapshotOf(*done), nil
}

// RevertSnapshot implements backends.Snapshotter with a
// VirtualMachineRestore. KubeVirt restores only a stopped VM, so a running
// one is a Conflict. It waits for the restore to complete, then deletes
// the restore object, which has done its work.
func (b *Backend) RevertSnapshot(ctx context.Context, ref backends.InstanceRef, name string) error {
	vm, vmi, err := b.getVM(ctx, ref)
	if err != nil {
		return err
	}
	snap, err := b.findSnapshot(ctx, ref, name)
	if err != nil {
		return err
	}
	what := "VM " + ref.Namespace + "/" + ref.Name
	if ready, _, _ := unstructured.NestedBool(snap.Object, "status", "readyToUse"); !ready {
		return backends.Conflictf("snapshot %s of %s is not ready to use yet", name, what)
	}
	if st := state(vm.Object, vmi); st != backends.StateStopped {
		return backends.Conflictf("%s is %s: stop it before reverting to a snapshot", what, st)
	}
	restore := &unstructured.Unstructured{Object: obj{
		"apiVersion": "snapshot.kubevirt.io/v1beta1",
		"kind":       "VirtualMachineRestore",
		"metadata": obj{
			"generateName": ref.Name + "-restore-",
			"namespace":    ref.Namespace,
			"labels":       obj{labelVM: ref.Name, labelSnapshot: name},
		},
		"spec": obj{
			"target":                     obj{"apiGroup": "kubevirt.io", "kind": "VirtualMachine", "name": ref.Name},
			"virtualMachineSnapshotName": snap.GetName(),
		},
	}}
	created, err := b.dyn.Resource(gvrRestore).Namespace(ref.Namespace).Create(ctx, restore, metav1.CreateOptions{FieldManager: fieldManager})
	if err != nil {
		return b.fail("revert", what, err)
	}
	_, err = b.waitFor(ctx, gvrRestore, ref.Namespace, created.GetName(), "the revert of "+what, func(o obj) (bool, error) {
		if hasCondition(o, "Failure") {
			return false, backends.Failed("KubeVirt could not revert "+what+" to snapshot "+name+"; see the VirtualMachineRestore's status", nil)
		}
		complete, _, _ := unstructured.NestedBool(o, "status", "complete")
		return complete, nil
	})
	if err != nil {
		return err
	}
	err = b.dyn.Resource(gvrRestore).Namespace(ref.Namespace).Delete(ctx, created.GetName(), metav1.DeleteOptions{})
	if err != nil {
		b.opts.Logger.Warn("kubevirt: could not delete a completed restore", "vm", ref.String(), "restore", created.GetName(), "err", err)
	}
	return nil
}

// DeleteSnapshot implements backends.Snapshotter.
func (b *Backend) DeleteSnapshot(ctx context.Context, ref backends.InstanceRef, name string) error {
	if _, _, err := b.getVM(ctx, ref); err != nil {
		return err
	}
	snap, err := b.findSnapshot(ctx, ref, name)
	if err != nil {
		return err
	}
	err = b.dyn.Resource(gvrSnapshot).Namespace(ref.Namespace).Delete(ctx, snap.GetName(), metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{UID: ptr.To(snap.GetUID())},
	})
	return b.fail("delete", "snapshot "+name+" of VM "+ref.Namespace+"/"+ref.Name, err)
}

// snapshotsOf lists the VirtualMachineSnapshots whose source is ref's VM.
func (b *Backend) snapshotsOf(ctx context.Context, ref backends.InstanceRef) ([]unstructured.Unstructured, error) {
	all, err := b.dyn.Resource(gvrSnapshot).Namespace(ref.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, b.fail("list the snapshots of", "VM "+ref.Namespace+"/"+ref.Name, err)
	}
	var out []unstructured.Unstructured
	for _, it := range all.Items {
		if str(it.Object, "spec", "source", "kind") == "VirtualMachine" && str(it.Object, "spec", "source", "name") == ref.Name {
			out = append(out, it)
		}
	}
	return out, nil
}

// findSnapshot returns the snapshot of ref's VM that Corral calls name.
func (b *Backend) findSnapshot(ctx context.Context, ref backends.InstanceRef, name string) (*unstructured.Unstructured, error) {
	items, err := b.snapshotsOf(ctx, ref)
	if err != nil {
		return nil, err
	}
	for i := range items {
		if snapshotName(items[i]) == name {
			return &items[i], nil
		}
	}
	return nil, backends.NotFoundf("VM %s/%s has no snapshot named %s", ref.Namespace, ref.Name, name)
}

func snapshotName(u unstructured.Unstructured) string {
	return cmp.Or(u.GetLabels()[labelSnapshot], u.GetName())
}

func snapshotOf(u unstructured.Unstructured) backends.Snapshot {
	s := backends.Snapshot{Name: snapshotName(u), Created: u.GetCreationTimestamp().Time, Consistency: snapshotConsistency(u)}
	if t, err := time.Parse(time.RFC3339, str(u.Object, "status", "creationTime")); err == nil {
		s.Created = t
	}
	return s
}

// snapshotConsistency applies the rule in the comment at the top of this
// file.
func snapshotConsistency(u unstructured.Unstructured) backends.Consistency {
	ready, _, _ := unstructured.NestedBool(u.Object, "status", "readyToUse")
	if ready || str(u.Object, "status", "phase") == "Succeeded" {
		ind, _, _ := unstructured.NestedStringSlice(u.Object, "status", "indications")
		switch {
		case slices.Contains(ind, "GuestAgent") && !slices.Contains(ind, "QuiesceFailed"):
			return backends.ConsistencyFilesystem
		case slices.Contains(ind, "Online"):
			return backends.ConsistencyCrash
		}
		return backends.ConsistencyOffline
	}
	switch c := backends.Consistency(u.GetAnnotations()[annConsistency]); c {
	case backends.ConsistencyOffline, backends.ConsistencyFilesystem, backends.ConsistencyCrash:
		return c
	}
	// Nothing known: claim the least.
	return backends.ConsistencyCrash
}

// hasCondition reports whether o's status has the condition typ with
// status True.
func hasCondition(o obj, typ string) bool {
	for _, c := range list(o, "status", "conditions") {
		if c, ok := c.(obj); ok && str(c, "type") == typ && str(c, "status") == "True" {
			return true
		}
	}
	return false
}
