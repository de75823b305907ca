package kubevirt_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/backends/kubevirt"
)

// foreignVM is a VM as kubectl would create it: memory as a resource
// request, three cores, running, no Corral labels.
func foreignVM(name string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kubevirt.io/v1",
		"kind":       "VirtualMachine",
		"metadata":   map[string]any{"name": name, "labels": map[string]any{"corral.dev/tag.db": "true"}},
		"spec": map[string]any{
			"runStrategy": "Always",
			"template": map[string]any{"spec": map[string]any{"domain": map[string]any{
				"cpu":       map[string]any{"cores": int64(3)},
				"resources": map[string]any{"requests": map[string]any{"memory": "2Gi"}},
				"devices":   map[string]any{},
			}}},
		},
	}}
}

// TestWatchSeesForeignVM: a VM created and deleted by someone else reaches
// the Watcher channel, and the channel closes when the context ends.
// TestWatchSeesCT: a CT's pod going away (a node drain, kubectl delete)
// reaches the fleet as an event naming the CT.
func TestWatchSeesCT(t *testing.T) {
	e := newEnv(t)
	b := e.backend(t)
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	ct, err := b.CreateContainer(ctx, backends.Spec{Name: "watched", Namespace: e.ns, CPUs: 1, MemoryMiB: 256}, "docker.io/library/busybox:1.36", false)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Delete(context.Background(), ct.Ref)
	ch, err := b.Watch(ctx)
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	zero := int64(0)
	if err := e.kube.CoreV1().Pods(e.ns).Delete(ctx, "watched", metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	timeout := time.After(15 * time.Second)
	for {
		select {
		case ev := <-ch:
			if ev.Ref == ct.Ref && ev.Deleted {
				return
			}
		case <-timeout:
			t.Fatalf("no event for the CT %v within 15 s of its pod's deletion", ct.Ref)
		}
	}
}

func TestWatchSeesForeignVM(t *testing.T) {
	e := newEnv(t)
	b := e.backend(t)
	ctx, cancel := context.WithCancel(ctxT(t))
	ch, err := b.Watch(ctx)
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	want := e.ref("foreign")
	if _, err := e.dyn.Resource(gvrVM).Namespace(e.ns).Create(ctx, foreignVM("foreign"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	wait := func(deleted bool) {
		t.Helper()
		timeout := time.After(15 * time.Second)
		for {
			select {
			case ev := <-ch:
				if ev.Ref == want && ev.Deleted == deleted {
					return
				}
			case <-timeout:
				t.Fatalf("no event for %v (deleted=%v) within 15 s", want, deleted)
			}
		}
	}
	wait(false)
	if err := e.dyn.Resource(gvrVM).Namespace(e.ns).Delete(ctx, "foreign", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	wait(true)
	cancel()
	timeout := time.After(15 * time.Second)
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		case <-timeout:
			t.Fatal("the channel stayed open after the context ended")
		}
	}
}

// TestInventory: a VM made outside Corral is listed with its CPUs, its
// memory from resources.requests, the IP and node of its VMI and its tags;
// a VM made by Corral carries its vmid label and its tags.
func TestInventory(t *testing.T) {
	e := newEnv(t)
	b := e.backend(t)
	ctx := ctxT(t)
	if _, err := e.dyn.Resource(gvrVM).Namespace(e.ns).Create(ctx, foreignVM("legacy"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var in backends.Instance
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		list, err := b.List(ctx)
		if err != nil {
			t.Fatalf("List: %v", err)
		}
		i := slices.IndexFunc(list, func(i backends.Instance) bool { return i.Ref == e.ref("legacy") })
		if i >= 0 && list[i].State == backends.StateRunning && list[i].IP != "" {
			in = list[i]
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("legacy VM not listed as running with an IP: %+v", list)
		}
	}
	if in.CPUs != 3 || in.MemoryMiB != 2048 || in.Node != "node-a" || !strings.HasPrefix(in.IP, "10.244.0.") || !slices.Equal(in.Tags, []string{"db"}) || in.Type != backends.TypeVM {
		t.Fatalf("legacy VM = %+v", in)
	}

	made, err := b.Create(ctx, backends.Spec{Name: "tagged", Namespace: e.ns, CPUs: 2, MemoryMiB: 1536, Image: "quay.io/containerdisks/fedora:42", Tags: []string{"web", "prod"}, Start: true})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	if made.State != backends.StateStarting || !slices.Equal(made.Tags, []string{"prod", "web"}) || made.MemoryMiB != 1536 {
		t.Fatalf("Create with Start = %+v, want starting with tags prod, web", made)
	}
	vm, err := e.dyn.Resource(gvrVM).Namespace(e.ns).Get(ctx, "tagged", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := vm.GetLabels()["corral.io/proxmox-vmid"]; got != strconv.FormatInt(kubevirt.VMID("tagged"), 10) {
		t.Fatalf("vmid label = %q, want %d", got, kubevirt.VMID("tagged"))
	}
	if err := b.SetTag(ctx, made.Ref, "web", false); err != nil {
		t.Fatalf("SetTag off: %v", err)
	}
	if err := b.SetTag(ctx, made.Ref, "blue", true); err != nil {
		t.Fatalf("SetTag on: %v", err)
	}
	got, err := b.Get(ctx, made.Ref)
	if err != nil || !slices.Equal(got.Tags, []string{"blue", "prod"}) {
		t.Fatalf("Get after SetTag = %+v, %v; want tags blue, prod", got, err)
	}
	wantKind(t, "SetTag with a space", b.SetTag(ctx, made.Ref, "bad tag", true), backends.ErrInvalid)
}

// TestDeleteRemovesWhatCreateMade: a VM imported from a URL with
// cloud-init gets a DataVolume and a Secret labelled for it; Delete
// removes them and the VM's snapshots, since nothing cascades.
func TestDeleteRemovesWhatCreateMade(t *testing.T) {
	e := newEnv(t)
	b := e.backend(t)
	ctx := ctxT(t)
	spec := backends.Spec{Name: "imported", Namespace: e.ns, DiskMiB: 4096, Image: "https://images.example/debian.qcow2",
		CloudInit: &backends.CloudInit{Password: "hunter2", SSHKeys: []string{"ssh-ed25519 AAAA test"}}}
	in, err := b.Create(ctx, spec)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	if in.DiskMiB != 4096 || in.CPUs != 1 || in.MemoryMiB != 1024 {
		t.Fatalf("Create = %+v, want 4096 MiB disk and the default 1 CPU, 1024 MiB", in)
	}
	dv, err := e.dyn.Resource(gvrDV).Namespace(e.ns).Get(ctx, "imported-rootdisk", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("DataVolume: %v", err)
	}
	if url, _, _ := unstructured.NestedString(dv.Object, "spec", "source", "http", "url"); url != spec.Image {
		t.Fatalf("DataVolume source url = %q", url)
	}
	sec, err := e.kube.CoreV1().Secrets(e.ns).Get(ctx, "imported-cloudinit", metav1.GetOptions{})
	if err != nil || !strings.Contains(string(sec.Data["userdata"]), `password: "hunter2"`) {
		t.Fatalf("cloud-init secret = %v, %v", sec, err)
	}
	vm, _ := e.dyn.Resource(gvrVM).Namespace(e.ns).Get(ctx, "imported", metav1.GetOptions{})
	if raw, _ := vm.MarshalJSON(); strings.Contains(string(raw), "hunter2") {
		t.Fatal("the password is in the VM object; it belongs in the secret")
	}
	if _, err := b.CreateSnapshot(ctx, in.Ref, "s1"); err != nil {
		t.Fatalf("CreateSnapshot: %v", err)
	}
	if err := b.Delete(ctx, in.Ref); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	for what, err := range map[string]error{
		"VM":         get(ctx, e, gvrVM, "imported"),
		"DataVolume": get(ctx, e, gvrDV, "imported-rootdisk"),
		"snapshot":   get(ctx, e, gvrSnapshot, "imported.s1"),
	} {
		if !apierrors.IsNotFound(err) {
			t.Errorf("%s after Delete: %v, want NotFound", what, err)
		}
	}
	if _, err := e.kube.CoreV1().Secrets(e.ns).Get(ctx, "imported-cloudinit", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("secret after Delete: %v, want NotFound", err)
	}
}

func get(ctx context.Context, e *env, gvr schema.GroupVersionResource, name string) error {
	_, err := e.dyn.Resource(gvr).Namespace(e.ns).Get(ctx, name, metav1.GetOptions{})
	return err
}

// TestBadInput: names Kubernetes rejects, a namespace that does not exist
// and an image a cluster cannot use are Invalid, with safe messages that
// name the problem and never the server's address.
func TestBadInput(t *testing.T) {
	e := newEnv(t)
	b := e.backend(t)
	ctx := ctxT(t)
	for _, c := range []struct {
		name string
		spec backends.Spec
		want string // in the safe message
	}{
		// ValidateName allows a trailing dash; Kubernetes (DNS-1123) does not.
		{"trailing dash", backends.Spec{Name: "web-", Namespace: e.ns, Image: "quay.io/containerdisks/fedora:42"}, "metadata.name"},
		{"missing namespace", backends.Spec{Name: "web", Namespace: "corral-no-such-ns", Image: "quay.io/containerdisks/fedora:42"}, "namespace corral-no-such-ns does not exist"},
		{"unqualified image", backends.Spec{Name: "web", Namespace: e.ns, Image: "fedora:42"}, "containerdisk reference"},
		{"local path", backends.Spec{Name: "web", Namespace: e.ns, Image: "/var/lib/images/debian.qcow2"}, "http(s) URL"},
		{"bad tag", backends.Spec{Name: "web", Namespace: e.ns, Tags: []string{"no spaces"}}, "tag"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := b.Create(ctx, c.spec)
			wantKind(t, "Create", err, backends.ErrInvalid)
			msg := backends.SafeMessage(err)
			if !strings.Contains(msg, c.want) {
				t.Fatalf("message %q does not name %q", msg, c.want)
			}
			if strings.Contains(msg, "127.0.0.1") || strings.Contains(msg, "https://127") {
				t.Fatalf("message %q names the server", msg)
			}
		})
	}
}

// TestStaleUpdateConflict: two updates from the same resourceVersion; the
// API server answers the second with 409, which is a Conflict with a
// retry hint. Power makes its run-strategy patch conditional the same way.
func TestStaleUpdateConflict(t *testing.T) {
	e := newEnv(t)
	b := e.backend(t)
	ctx := ctxT(t)
	vms := e.dyn.Resource(gvrVM).Namespace(e.ns)
	vm, err := vms.Create(ctx, foreignVM("stale"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The test's KubeVirt controller writes the VM's status meanwhile, so
	// the writes that must succeed re-read on a conflict; the one that
	// must fail uses a copy older than a write that did succeed.
	stale := vm.DeepCopy()
	stale.SetAnnotations(map[string]string{"who": "second"})
	if err := retryConflict(func() error {
		cur, err := vms.Get(ctx, "stale", metav1.GetOptions{})
		if err != nil {
			return err
		}
		cur.SetAnnotations(map[string]string{"who": "first"})
		_, err = vms.Update(ctx, cur, metav1.UpdateOptions{})
		return err
	}); err != nil {
		t.Fatalf("first update: %v", err)
	}
	_, err = vms.Update(ctx, stale, metav1.UpdateOptions{})
	if !apierrors.IsConflict(err) {
		t.Fatalf("second update: %v, want 409", err)
	}
	mapped := kubevirt.MapError(testContext, "update", "VM stale", err)
	wantKind(t, "a stale update", mapped, backends.ErrConflict)
	if msg := backends.SafeMessage(mapped); !strings.Contains(msg, "retry") {
		t.Fatalf("message %q has no retry hint", msg)
	}

	// The backend's own conditional write: vm is stale now.
	vm.SetAnnotations(nil)
	err = kubevirt.PatchRunStrategy(b, ctx, vm, "Halted")
	wantKind(t, "a run strategy patch from a stale read", err, backends.ErrConflict)
	cur, _ := vms.Get(ctx, "stale", metav1.GetOptions{})
	if rs, _, _ := unstructured.NestedString(cur.Object, "spec", "runStrategy"); rs != "Always" {
		t.Fatalf("the stale patch changed the run strategy to %q", rs)
	}
	// A fresh read goes through.
	if err := retryConflict(func() error {
		cur, err := vms.Get(ctx, "stale", metav1.GetOptions{})
		if err != nil {
			return err
		}
		return kubevirt.PatchRunStrategy(b, ctx, cur, "Halted")
	}); err != nil {
		t.Fatalf("patch from a fresh read: %v", err)
	}
}

// retryConflict runs fn again, up to five times, while it fails with a
// conflict: what a client does when another writer (here the test's
// controller) changed the object between its read and its write.
func retryConflict(fn func() error) error {
	var err error
	for range 5 {
		if err = fn(); err == nil || !(apierrors.IsConflict(err) || errors.Is(err, backends.ErrConflict)) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
	return err
}

// TestDoctor: on the test server every check passes; a default namespace
// that does not exist fails its check with a remedy.
func TestDoctor(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	for _, c := range e.backend(t).Doctor(ctx) {
		if !c.OK {
			t.Errorf("check %q failed: %s", c.Name, c.Message)
		}
	}
	b, err := kubevirt.New(kubevirt.Options{Context: testContext, Kubeconfig: e.kubeconfig, Namespace: "corral-missing"})
	if err != nil {
		t.Fatal(err)
	}
	checks := b.Doctor(ctx)
	last := checks[len(checks)-1]
	if last.OK || !strings.Contains(last.Message, "kubectl create namespace corral-missing") {
		t.Fatalf("namespace check = %+v", last)
	}
}

// wantKind fails the test unless err wraps kind and has a safe message.
func wantKind(t *testing.T, what string, err, kind error) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s succeeded, want an error of kind %v", what, kind)
	}
	if !errors.Is(err, kind) {
		t.Fatalf("%s: %v (kind %v), want kind %v", what, err, backends.KindOf(err), kind)
	}
	if backends.SafeMessage(err) == "" {
		t.Fatalf("%s: error %v has no safe message", what, err)
	}
}
