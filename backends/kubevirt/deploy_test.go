package kubevirt_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/utils/ptr"

	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/backends/kubevirt"
)

// readManifests decodes every document of deploy/kubernetes/*.yaml,
// namespaces first so the rest have somewhere to go.
func readManifests(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	files, err := filepath.Glob("../../deploy/kubernetes/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in deploy/kubernetes: %v", err)
	}
	var out []*unstructured.Unstructured
	for _, f := range files {
		r, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewYAMLOrJSONDecoder(r, 4096)
		for {
			u := &unstructured.Unstructured{}
			if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if len(u.Object) > 0 {
				out = append(out, u)
			}
		}
		r.Close()
	}
	rank := func(u *unstructured.Unstructured) int {
		if u.GetKind() == "Namespace" {
			return 0
		}
		return 1
	}
	slices.SortStableFunc(out, func(a, b *unstructured.Unstructured) int { return rank(a) - rank(b) })
	return out
}

// TestDeployManifests applies deploy/kubernetes with server-side apply, so
// the API server validates every object, then runs the backend as the
// manifests' ServiceAccount (by impersonation) through every operation it
// has: the ClusterRole must allow all of them. A ServiceAccount without
// the binding is Forbidden.
func TestDeployManifests(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(e.kube.Discovery()))
	var kinds []string
	for _, u := range readManifests(t) {
		gvk := u.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			t.Fatalf("%s %s: %v", gvk, u.GetName(), err)
		}
		res := e.dyn.Resource(m.Resource)
		data, err := json.Marshal(u.Object)
		if err != nil {
			t.Fatal(err)
		}
		opts := metav1.PatchOptions{FieldManager: "corral-test", Force: ptr.To(true)}
		if m.Scope.Name() == meta.RESTScopeNameNamespace {
			_, err = res.Namespace(u.GetNamespace()).Patch(ctx, u.GetName(), types.ApplyPatchType, data, opts)
		} else {
			_, err = res.Patch(ctx, u.GetName(), types.ApplyPatchType, data, opts)
		}
		if err != nil {
			t.Fatalf("apply %s %s: %v", gvk.Kind, u.GetName(), err)
		}
		kinds = append(kinds, gvk.Kind)
	}
	for _, k := range []string{"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Deployment", "Service", "PersistentVolumeClaim"} {
		if !slices.Contains(kinds, k) {
			t.Errorf("deploy/kubernetes has no %s", k)
		}
	}
	dep, err := e.kube.AppsV1().Deployments("corral").Get(ctx, "corral", metav1.GetOptions{})
	if err != nil || *dep.Spec.Replicas != 1 || dep.Spec.Template.Spec.ServiceAccountName != "corral" {
		t.Fatalf("Deployment = %+v, %v; want one replica running as the corral ServiceAccount", dep, err)
	}

	as := func(user string) *kubevirt.Backend {
		cfg := rest.CopyConfig(e.cfg)
		cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:serviceaccounts", "system:authenticated"}}
		b, err := kubevirt.New(kubevirt.Options{Context: testContext, RESTConfig: cfg, Namespace: e.ns, Wait: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	_, err = as("system:serviceaccount:corral:nobody").List(ctx)
	wantKind(t, "List without the binding", err, backends.ErrForbidden)

	b := as("system:serviceaccount:corral:corral")
	for _, c := range b.Doctor(ctx) {
		if !c.OK {
			t.Errorf("Doctor as the ServiceAccount: %q failed: %s", c.Name, c.Message)
		}
	}
	wctx, stop := context.WithCancel(ctx)
	events, err := b.Watch(wctx)
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	step := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s as the ServiceAccount: %v", what, err)
		}
	}
	in, err := b.Create(ctx, backends.Spec{Name: "rbac", Namespace: e.ns, Image: "https://images.example/disk.qcow2", CloudInit: &backends.CloudInit{Password: "pw"}, Tags: []string{"x"}})
	step("Create", err)
	step("SetTag", b.SetTag(ctx, in.Ref, "y", true))
	step("start", b.Power(ctx, in.Ref, backends.ActionStart))
	waitState(t, b, in.Ref, backends.StateRunning)
	// Pause reaches the aggregated API, which RBAC allows and the test
	// server does not serve: a refusal, not Forbidden.
	wantKind(t, "pause as the ServiceAccount", b.Power(ctx, in.Ref, backends.ActionPause), backends.ErrUnsupported)
	// A node that does not exist is found so only when the ServiceAccount
	// may read nodes (a Forbidden read skips the check).
	_, err = b.Migrate(ctx, in.Ref, e.ns+"-no-node")
	wantKind(t, "migrate to a missing node as the ServiceAccount", err, backends.ErrInvalid)
	_, err = b.Migrate(ctx, in.Ref, "")
	step("Migrate", err)
	step("restart", b.Power(ctx, in.Ref, backends.ActionRestart))
	_, err = b.CreateSnapshot(ctx, in.Ref, "s1")
	step("CreateSnapshot", err)
	step("stop", b.Power(ctx, in.Ref, backends.ActionStop))
	waitState(t, b, in.Ref, backends.StateStopped)
	step("RevertSnapshot", b.RevertSnapshot(ctx, in.Ref, "s1"))
	step("Scale", b.Scale(ctx, in.Ref, 2, 1024))
	step("SetTemplate", b.SetTemplate(ctx, in.Ref, true))
	step("SetTemplate off", b.SetTemplate(ctx, in.Ref, false))
	_, err = b.Snapshots(ctx, in.Ref)
	step("Snapshots", err)
	c, err := b.Clone(ctx, in.Ref, "rbac-copy")
	step("Clone", err)
	step("DeleteSnapshot", b.DeleteSnapshot(ctx, in.Ref, "s1"))
	step("Delete", b.Delete(ctx, in.Ref))
	step("Delete clone", b.Delete(ctx, c.Ref))

	// A CT: its Pod, PVC and Service, listed beside the VMs (List skips
	// CTs it may not read, so the listing is the check of that RBAC).
	ct, err := b.CreateContainer(ctx, backends.Spec{Name: "rbac-ct", Namespace: e.ns, CPUs: 1, MemoryMiB: 256}, "docker.io/library/busybox:1.36", false)
	step("CreateContainer", err)
	list, err := b.List(ctx)
	step("List", err)
	if !slices.ContainsFunc(list, func(i backends.Instance) bool { return i.Ref == ct.Ref && i.Type == backends.TypeCT }) {
		t.Fatalf("List as the ServiceAccount does not show the CT %s", ct.Ref)
	}
	step("stop CT", b.Power(ctx, ct.Ref, backends.ActionStop))
	step("start CT", b.Power(ctx, ct.Ref, backends.ActionStart))
	step("Delete CT", b.Delete(ctx, ct.Ref))
	stop()
	for range events { // drains until Watch closes the channel
	}
}

func waitState(t *testing.T, b backends.Backend, ref backends.InstanceRef, want backends.State) {
	t.Helper()
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		in, err := b.Get(ctxT(t), ref)
		if err != nil {
			t.Fatalf("Get(%s): %v", ref, err)
		}
		if in.State == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s is %s, want %s", ref, in.State, want)
		}
	}
}
