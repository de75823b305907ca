package kubevirt

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/corral-dev/corral/backends"
)

var _ backends.Migrator = (*Backend)(nil)

var gvrMigration = schema.GroupVersionResource{Group: "kubevirt.io", Version: "v1", Resource: "virtualmachineinstancemigrations"}

// hostnameLabel is the well-known node label a target node is selected by.
const hostnameLabel = "kubernetes.io/hostname"

// Phases of a VirtualMachineInstanceMigration that end it.
const (
	migrationSucceeded = "Succeeded"
	migrationFailed    = "Failed"
)

// liveMigratableRemedies says what to do about the reasons KubeVirt gives
// in a VMI's LiveMigratable condition when it is False.
var liveMigratableRemedies = map[string]string{
	"DisksNotLiveMigratable":       "its disks are not shared: give it ReadWriteMany PVCs (or a containerdisk), or stop it and use a cold move",
	"InterfaceNotLiveMigratable":   "its network binding (bridge on the pod network) cannot migrate: use masquerade, or stop it and use a cold move",
	"HotplugNotLiveMigratable":     "it has hotplugged disks that cannot migrate: remove them first",
	"CPUModeLiveMigratable":        "its CPU mode host-passthrough pins it to this host's CPU: use host-model, or stop it and use a cold move",
	"HostDeviceNotLiveMigratable":  "it uses host devices (GPU or SR-IOV passthrough): detach them, or stop it and use a cold move",
	"SEVNotLiveMigratable":         "it runs with AMD SEV memory encryption, which KubeVirt cannot migrate: stop it and use a cold move",
	"SecureExecutionNotMigratable": "it runs as a Secure Execution guest, which cannot migrate: stop it and use a cold move",
	"PersistentReservation":        "it uses SCSI persistent reservations, which cannot migrate: stop it and use a cold move",
}

// Migrate implements backends.Migrator by creating a
// VirtualMachineInstanceMigration for the VM's VMI, labelled
// corral.dev/vm=NAME (Delete removes it with the VM).
//
// A target node is requested through the migration's addedNodeSelector
// (KubeVirt 1.6 and later): {"kubernetes.io/hostname": NODE} is added to
// the VMI's own node selector for this one migration, without changing the
// VM. A KubeVirt older than that ignores the field and lets its scheduler
// choose; nothing else in its API can pin a single migration.
//
// Refused at once: a VM that is not running (Conflict), a VMI whose
// LiveMigratable condition is False (Unsupported, with a remedy for the
// reason KubeVirt gives), a VM already migrating (Conflict), a target
// that is the current node or no node of the cluster (Invalid), and CTs
// (a pod does not live-migrate).
func (b *Backend) Migrate(ctx context.Context, ref backends.InstanceRef, targetNode string) (backends.Migration, error) {
	vm, vmi, err := b.getVM(ctx, ref)
	if err != nil {
		if _, _, ok := b.asCT(ctx, ref, err); ok {
			return nil, backends.Refuse(backends.KindKubeVirt, "migrate", "a container's pod cannot live-migrate; stop and start it to let the scheduler place it again")
		}
		return nil, err
	}
	what := "VM " + ref.Namespace + "/" + ref.Name
	if vmi == nil || state(vm.Object, vmi) != backends.StateRunning && state(vm.Object, vmi) != backends.StatePaused {
		return nil, backends.Conflictf("%s is not running, so it cannot be live-migrated: start it first, or use a cold move", what)
	}
	for _, c := range list(vmi, "status", "conditions") {
		c, _ := c.(obj)
		if str(c, "type") == "LiveMigratable" && str(c, "status") == "False" {
			reason := str(c, "reason")
			remedy, ok := liveMigratableRemedies[reason]
			if !ok {
				remedy = "KubeVirt reports it not live-migratable (" + safeReason(reason) + "): stop it and use a cold move"
			}
			return nil, backends.Refuse(backends.KindKubeVirt, "migrate", what+" cannot live-migrate: "+remedy)
		}
	}
	node := str(vmi, "status", "nodeName")
	if targetNode != "" {
		if errs := validation.IsDNS1123Subdomain(targetNode); len(errs) > 0 {
			return nil, backends.Invalidf("targetNode %q is not a node name: give the name of a node of context %s, or none to let the scheduler choose", targetNode, b.opts.Context)
		}
		if targetNode == node {
			return nil, backends.Invalidf("%s already runs on node %s: give another node, or none to let the scheduler choose", what, node)
		}
		// A credential that may not read nodes skips this check; the
		// migration then stays pending, which its phase shows.
		if _, err := b.kube.CoreV1().Nodes().Get(ctx, targetNode, metav1.GetOptions{}); apierrors.IsNotFound(err) {
			return nil, backends.Invalidf("node %s does not exist in context %s: give one of its nodes, or none to let the scheduler choose", targetNode, b.opts.Context)
		}
	}
	migs, err := b.dyn.Resource(gvrMigration).Namespace(ref.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, b.fail("list the migrations of", what, err)
	}
	for _, m := range migs.Items {
		if p := str(m.Object, "status", "phase"); str(m.Object, "spec", "vmiName") == ref.Name && p != migrationSucceeded && p != migrationFailed && m.GetDeletionTimestamp() == nil {
			return nil, backends.Conflictf("%s is already migrating (%s); wait for it to end", what, m.GetName())
		}
	}
	spec := obj{"vmiName": ref.Name}
	if targetNode != "" {
		spec["addedNodeSelector"] = obj{hostnameLabel: targetNode}
	}
	m := &unstructured.Unstructured{Object: obj{
		"apiVersion": "kubevirt.io/v1",
		"kind":       "VirtualMachineInstanceMigration",
		"metadata":   obj{"generateName": ref.Name + "-migration-", "namespace": ref.Namespace, "labels": obj{labelVM: ref.Name}},
		"spec":       spec,
	}}
	created, err := b.dyn.Resource(gvrMigration).Namespace(ref.Namespace).Create(ctx, m, metav1.CreateOptions{FieldManager: fieldManager})
	if err != nil {
		return nil, b.fail("migrate", what, err)
	}
	return &migration{b: b, ns: ref.Namespace, name: created.GetName(), vm: ref.Name, rv: created.GetResourceVersion()}, nil
}

// safeReason keeps a condition reason only when it is a bare CamelCase
// word, as KubeVirt writes them; anything else is not shown.
func safeReason(r string) string {
	if r == "" || len(r) > 64 || strings.ContainsFunc(r, func(c rune) bool {
		return !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9')
	}) {
		return "no reason given"
	}
	return r
}

// migration follows one VirtualMachineInstanceMigration.
type migration struct {
	b    *Backend
	ns   string
	name string
	vm   string
	rv   string // the resourceVersion to watch from
}

func (m *migration) Name() string { return m.name }

// Wait watches the migration object until status.phase is Succeeded or
// Failed. A watch that ends early (the API server closes watches after a
// while) is started again from the last version seen; a migration that
// is deleted before it ends is a failure.
func (m *migration) Wait(ctx context.Context, phase func(string)) error {
	what := "the migration " + m.name + " of VM " + m.ns + "/" + m.vm
	res := m.b.dyn.Resource(gvrMigration).Namespace(m.ns)
	last := ""
	seen := func(o obj) (bool, error) {
		p := str(o, "status", "phase")
		if p != "" && p != last {
			last = p
			if phase != nil {
				phase(p)
			}
		}
		switch p {
		case migrationSucceeded:
			return true, nil
		case migrationFailed:
			// The failure reason is KubeVirt's text: logged, not shown.
			cause := fmt.Errorf("kubevirt: migration failed: %s", str(o, "status", "migrationState", "failureReason"))
			return true, backends.Failed(what+" failed; the VM keeps running on its node (see the migration's status with kubectl)", cause)
		}
		return false, nil
	}
	for {
		// Read first: the phase may have moved before the watch starts.
		cur, err := res.Get(ctx, m.name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return backends.Failed(what+" was deleted before it ended", err)
		}
		if err != nil {
			return m.b.fail("follow", what, err)
		}
		if done, err := seen(cur.Object); done {
			return err
		}
		w, err := res.Watch(ctx, metav1.ListOptions{
			FieldSelector:   fields.OneTermEqualSelector("metadata.name", m.name).String(),
			ResourceVersion: cur.GetResourceVersion(),
		})
		if err != nil {
			return m.b.fail("follow", what, err)
		}
		done, err := m.drain(ctx, w, seen)
		w.Stop()
		if done {
			return err
		}
		if ctx.Err() != nil {
			return m.b.fail("follow", what, ctx.Err())
		}
	}
}

// drain reads events until the migration ends (done) or the watch closes.
func (m *migration) drain(ctx context.Context, w watch.Interface, seen func(obj) (bool, error)) (bool, error) {
	for {
		select {
		case <-ctx.Done():
			return false, nil
		case ev, ok := <-w.ResultChan():
			if !ok {
				return false, nil
			}
			u, isObj := ev.Object.(*unstructured.Unstructured)
			switch {
			case ev.Type == watch.Deleted:
				return true, backends.Failed("the migration "+m.name+" of VM "+m.ns+"/"+m.vm+" was deleted before it ended", nil)
			case ev.Type == watch.Error || !isObj:
				return false, nil // start again from a fresh read
			}
			if done, err := seen(u.Object); done {
				return true, err
			}
		}
	}
}
