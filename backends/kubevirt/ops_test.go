package kubevirt_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/backends/kubevirt"
)

var gvrMigration = schema.GroupVersionResource{Group: "kubevirt.io", Version: "v1", Resource: "virtualmachineinstancemigrations"}

// runningVM creates a VM that starts, and waits for the fake controller
// to run it.
func runningVM(t *testing.T, e *env, b *kubevirt.Backend, name string) backends.InstanceRef {
	t.Helper()
	in, err := b.Create(ctxT(t), backends.Spec{Name: name, Namespace: e.ns, CPUs: 1, MemoryMiB: 512, Image: "quay.io/containerdisks/fedora:42", Start: true})
	if err != nil {
		t.Fatalf("Create %s: %v", name, err)
	}
	settle(t, b, in.Ref, backends.StateRunning)
	return in.Ref
}

func settle(t *testing.T, b *kubevirt.Backend, ref backends.InstanceRef, want backends.State) backends.Instance {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		in, err := b.Get(ctxT(t), ref)
		if err == nil && in.State == want {
			return in
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: state %s (%v), want %s", ref, in.State, err, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// setVMICondition plays virt-controller: it writes the VMI's
// LiveMigratable condition (a VMI's status is part of the object).
func (e *env) setVMICondition(t *testing.T, name, status, reason string) {
	t.Helper()
	p, _ := jsonPatch(map[string]any{"status": map[string]any{"conditions": []any{
		map[string]any{"type": "Ready", "status": "True"},
		map[string]any{"type": "LiveMigratable", "status": status, "reason": reason},
	}}})
	if _, err := e.dyn.Resource(gvrVMI).Namespace(e.ns).Patch(ctxT(t), name, types.MergePatchType, p, metav1.PatchOptions{}); err != nil {
		t.Fatalf("patch VMI %s: %v", name, err)
	}
}

// setMigrationPhase plays the migration controller.
func (e *env) setMigrationPhase(t *testing.T, name, phase string) {
	p, _ := jsonPatch(map[string]any{"status": map[string]any{"phase": phase}})
	if _, err := e.dyn.Resource(gvrMigration).Namespace(e.ns).Patch(context.Background(), name, types.MergePatchType, p, metav1.PatchOptions{}, "status"); err != nil {
		t.Errorf("patch migration %s: %v", name, err)
	}
}

func TestMigrate(t *testing.T) {
	e := newEnv(t)
	b := e.backend(t)
	ctx := ctxT(t)

	if _, err := b.Create(ctx, backends.Spec{Name: "cold", Namespace: e.ns, Image: "quay.io/containerdisks/fedora:42"}); err != nil {
		t.Fatal(err)
	}
	_, err := b.Migrate(ctx, e.ref("cold"), "")
	wantKind(t, "migrate a stopped VM", err, backends.ErrConflict)

	ref := runningVM(t, e, b, "mover")
	e.setVMICondition(t, "mover", "False", "DisksNotLiveMigratable")
	_, err = b.Migrate(ctx, ref, "")
	wantKind(t, "migrate a VM whose disks cannot migrate", err, backends.ErrUnsupported)
	if !strings.Contains(backends.SafeMessage(err), "ReadWriteMany") {
		t.Errorf("refusal %q gives no remedy", backends.SafeMessage(err))
	}
	e.setVMICondition(t, "mover", "True", "")

	_, err = b.Migrate(ctx, ref, e.ns+"-nowhere")
	wantKind(t, "migrate to a node that does not exist", err, backends.ErrInvalid)
	_, err = b.Migrate(ctx, ref, "node-a")
	wantKind(t, "migrate to the node it runs on", err, backends.ErrInvalid)

	target := e.ns + "-b"
	if _, err := e.kube.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: target}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.kube.CoreV1().Nodes().Delete(context.Background(), target, metav1.DeleteOptions{}) })

	m, err := b.Migrate(ctx, ref, target)
	if err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	obj, err := e.dyn.Resource(gvrMigration).Namespace(e.ns).Get(ctx, m.Name(), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the migration object %s: %v", m.Name(), err)
	}
	if v, _, _ := unstructured.NestedString(obj.Object, "spec", "vmiName"); v != "mover" {
		t.Errorf("spec.vmiName = %q, want mover", v)
	}
	if v, _, _ := unstructured.NestedString(obj.Object, "spec", "addedNodeSelector", "kubernetes.io/hostname"); v != target {
		t.Errorf("spec.addedNodeSelector = %q, want kubernetes.io/hostname=%s", v, target)
	}
	_, err = b.Migrate(ctx, ref, "")
	wantKind(t, "a second migration while one runs", err, backends.ErrConflict)

	var mu sync.Mutex
	var phases []string
	done := make(chan error, 1)
	go func() {
		done <- m.Wait(ctx, func(p string) { mu.Lock(); phases = append(phases, p); mu.Unlock() })
	}()
	for _, p := range []string{"Scheduling", "Running", "Succeeded"} {
		e.setMigrationPhase(t, m.Name(), p)
	}
	if err := <-done; err != nil {
		t.Fatalf("Wait after Succeeded: %v", err)
	}
	mu.Lock()
	if len(phases) == 0 || phases[len(phases)-1] != "Succeeded" {
		t.Errorf("phases seen %v, want them to end with Succeeded", phases)
	}
	mu.Unlock()

	// A failed migration ends Wait with a failure.
	m2, err := b.Migrate(ctx, ref, "")
	if err != nil {
		t.Fatalf("Migrate after the first ended: %v", err)
	}
	go func() { done <- m2.Wait(ctx, nil) }()
	e.setMigrationPhase(t, m2.Name(), "Failed")
	wantKind(t, "a migration that failed", <-done, backends.ErrFailed)

	// Deleting the VM deletes its migrations.
	if err := b.Delete(ctx, ref); err != nil {
		t.Fatal(err)
	}
	left, err := e.dyn.Resource(gvrMigration).Namespace(e.ns).List(ctx, metav1.ListOptions{LabelSelector: "corral.dev/vm=mover"})
	if err != nil || len(left.Items) != 0 {
		t.Errorf("after Delete, %d migrations of the VM are left (%v)", len(left.Items), err)
	}
}

func vmDomain(t *testing.T, e *env, name string) (map[string]any, string) {
	t.Helper()
	vm, err := e.dyn.Resource(gvrVM).Namespace(e.ns).Get(ctxT(t), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	d, _, _ := unstructured.NestedMap(vm.Object, "spec", "template", "spec", "domain")
	rs, _, _ := unstructured.NestedString(vm.Object, "spec", "runStrategy")
	return d, rs
}

func vmiUID(t *testing.T, e *env, name string) types.UID {
	t.Helper()
	vmi, err := e.dyn.Resource(gvrVMI).Namespace(e.ns).Get(ctxT(t), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("VMI %s: %v", name, err)
	}
	return vmi.GetUID()
}

func TestScale(t *testing.T) {
	e := newEnv(t)
	b := e.backend(t)
	ctx := ctxT(t)

	// Stopped: the template changes, the VM stays stopped.
	in, err := b.Create(ctx, backends.Spec{Name: "small", Namespace: e.ns, CPUs: 1, MemoryMiB: 512, Image: "quay.io/containerdisks/fedora:42"})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Scale(ctx, in.Ref, 4, 2048); err != nil {
		t.Fatalf("Scale stopped: %v", err)
	}
	got := settle(t, b, in.Ref, backends.StateStopped)
	if got.CPUs != 4 || got.MemoryMiB != 2048 {
		t.Errorf("after Scale: %d CPU, %d MiB; want 4, 2048", got.CPUs, got.MemoryMiB)
	}
	wantKind(t, "scale to 0 CPUs", b.Scale(ctx, in.Ref, 0, 2048), backends.ErrInvalid)

	// Running, not made for hotplug: stop, patch, start; a new VMI.
	ref := runningVM(t, e, b, "busy")
	before := vmiUID(t, e, "busy")
	if err := b.Scale(ctx, ref, 2, 1024); err != nil {
		t.Fatalf("Scale running: %v", err)
	}
	got = settle(t, b, ref, backends.StateRunning)
	if got.CPUs != 2 || got.MemoryMiB != 1024 {
		t.Errorf("after Scale: %d CPU, %d MiB; want 2, 1024", got.CPUs, got.MemoryMiB)
	}
	if after := vmiUID(t, e, "busy"); after == before {
		t.Errorf("the VMI was not replaced: a VM not made for hotplug must restart to take a new size")
	}
	if _, rs := vmDomain(t, e, "busy"); rs != "Always" {
		t.Errorf("runStrategy after Scale = %s, want Always", rs)
	}

	// Running, made for hotplug and live-migratable: live, same VMI.
	p, _ := jsonPatch(map[string]any{"spec": map[string]any{"template": map[string]any{"spec": map[string]any{"domain": map[string]any{
		"cpu": map[string]any{"cores": int64(1), "sockets": int64(1), "maxSockets": int64(4)}, "memory": map[string]any{"guest": "512Mi", "maxGuest": "4Gi"},
	}}}}})
	if _, err := e.dyn.Resource(gvrVM).Namespace(e.ns).Patch(ctx, "busy", types.MergePatchType, p, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	e.setVMICondition(t, "busy", "True", "")
	before = vmiUID(t, e, "busy")
	if err := b.Scale(ctx, ref, 3, 2048); err != nil {
		t.Fatalf("Scale live: %v", err)
	}
	d, rs := vmDomain(t, e, "busy")
	if s, _, _ := unstructured.NestedInt64(d, "cpu", "sockets"); s != 3 || rs != "Always" {
		t.Errorf("live scale: sockets %d, runStrategy %s; want 3, Always", s, rs)
	}
	if g, _, _ := unstructured.NestedString(d, "memory", "guest"); g != "2048Mi" {
		t.Errorf("live scale: memory.guest %s, want 2048Mi", g)
	}
	if after := vmiUID(t, e, "busy"); after != before {
		t.Errorf("the VMI was replaced: a hotplug must not restart the VM")
	}
}

func TestTemplate(t *testing.T) {
	e := newEnv(t)
	b := e.backend(t)
	ctx := ctxT(t)
	ref := runningVM(t, e, b, "golden")
	wantKind(t, "mark a running VM", b.SetTemplate(ctx, ref, true), backends.ErrConflict)
	if err := b.Power(ctx, ref, backends.ActionStop); err != nil {
		t.Fatal(err)
	}
	settle(t, b, ref, backends.StateStopped)
	if err := b.SetTemplate(ctx, ref, true); err != nil {
		t.Fatalf("SetTemplate on: %v", err)
	}
	if in, _ := b.Get(ctx, ref); !in.Template {
		t.Errorf("Get does not report the template mark")
	}
	vm, _ := e.dyn.Resource(gvrVM).Namespace(e.ns).Get(ctx, "golden", metav1.GetOptions{})
	if vm.GetLabels()["corral.dev/template"] != "true" {
		t.Errorf("labels %v lack corral.dev/template=true", vm.GetLabels())
	}
	err := b.Power(ctx, ref, backends.ActionStart)
	wantKind(t, "start a template", err, backends.ErrUnsupported)
	if !strings.Contains(backends.SafeMessage(err), "clone") {
		t.Errorf("refusal %q does not say to clone", backends.SafeMessage(err))
	}
	// Its clone is an ordinary VM.
	clone, err := b.Clone(ctx, ref, "golden-copy")
	if err != nil {
		t.Fatalf("Clone a template: %v", err)
	}
	if clone.Template {
		t.Errorf("the clone of a template is marked as a template")
	}
	if err := b.Power(ctx, clone.Ref, backends.ActionStart); err != nil {
		t.Errorf("start the clone of a template: %v", err)
	}
	if err := b.SetTemplate(ctx, ref, false); err != nil {
		t.Fatalf("SetTemplate off: %v", err)
	}
	if err := b.Power(ctx, ref, backends.ActionStart); err != nil {
		t.Errorf("start after unmarking: %v", err)
	}
}

func TestCreateFromPVC(t *testing.T) {
	e := newEnv(t)
	b := e.backend(t)
	ctx := ctxT(t)
	_, err := b.Create(ctx, backends.Spec{Name: "frompvc", Namespace: e.ns, PVC: "missing-disk"})
	wantKind(t, "create from a PVC that does not exist", err, backends.ErrInvalid)
	if !strings.Contains(backends.SafeMessage(err), "missing-disk") {
		t.Errorf("error %q does not name the PVC", backends.SafeMessage(err))
	}
	_, err = b.Create(ctx, backends.Spec{Name: "frompvc", Namespace: e.ns, PVC: "x", Image: "quay.io/containerdisks/fedora:42"})
	wantKind(t, "create from both an image and a PVC", err, backends.ErrInvalid)

	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "golden-disk"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("20Gi")}},
		},
	}
	if _, err := e.kube.CoreV1().PersistentVolumeClaims(e.ns).Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	in, err := b.Create(ctx, backends.Spec{Name: "frompvc", Namespace: e.ns, PVC: "golden-disk"})
	if err != nil {
		t.Fatalf("Create from a PVC: %v", err)
	}
	if in.DiskMiB != 20*1024 {
		t.Errorf("disk = %d MiB, want the PVC's 20480", in.DiskMiB)
	}
	vm, _ := e.dyn.Resource(gvrVM).Namespace(e.ns).Get(ctx, "frompvc", metav1.GetOptions{})
	vols, _, _ := unstructured.NestedSlice(vm.Object, "spec", "template", "spec", "volumes")
	if !slices.ContainsFunc(vols, func(v any) bool {
		c, _, _ := unstructured.NestedString(v.(map[string]any), "persistentVolumeClaim", "claimName")
		return c == "golden-disk"
	}) {
		t.Errorf("volumes %v do not boot from the PVC golden-disk", vols)
	}
	if dvs, _ := e.dyn.Resource(gvrDV).Namespace(e.ns).List(ctx, metav1.ListOptions{}); len(dvs.Items) != 0 {
		t.Errorf("a VM made from a PVC made %d DataVolumes, want none", len(dvs.Items))
	}
	if err := b.Delete(ctx, in.Ref); err != nil {
		t.Fatal(err)
	}
	if _, err := e.kube.CoreV1().PersistentVolumeClaims(e.ns).Get(ctx, "golden-disk", metav1.GetOptions{}); err != nil {
		t.Errorf("Delete removed the PVC the VM was given: %v", err)
	}
}
