package vdi_test

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/corral-dev/corral/app/auth"
	"github.com/corral-dev/corral/app/fleet"
	"github.com/corral-dev/corral/app/tasks"
	"github.com/corral-dev/corral/app/vdi"
	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/backends/kubevirt"
)

// TestKubeVirtPoolShrink: a shrink of a KubeVirt pool on the real API
// server (claims are Leases): a member with a Lease and a member that
// v0.6.0 assigned by label both count as claimed; the refusal names them;
// the shrink deletes the highest unclaimed VM and leaves no Lease of its
// own behind. (Growing clones through KubeVirt's clone controller, which
// the test server does not run: growth is tested on sim and QEMU.)
func TestKubeVirtPoolShrink(t *testing.T) {
	path := os.Getenv("TEST_KUBECONFIG")
	kube := kubeClient(t) // skips or fails without the API server
	ns := namespace(t, kube)
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatal(err)
	}
	dyn := dynamic.NewForConfigOrDie(cfg)
	ctx := context.Background()
	b, err := kubevirt.New(kubevirt.Options{Context: "test", RESTConfig: cfg, Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"gold", "desk-1", "desk-2", "desk-3", "desk-4"} {
		if _, err := b.Create(ctx, backends.Spec{Name: n, Namespace: ns, CPUs: 1, MemoryMiB: 256, Image: "quay.io/containerdisks/fedora:42"}); err != nil {
			t.Fatalf("create %s: %v", n, err)
		}
	}
	label := func(name string, labels map[string]any) {
		t.Helper()
		data, _ := jsonMarshal(map[string]any{"metadata": map[string]any{"labels": labels}})
		if _, err := dyn.Resource(gvrVM).Namespace(ns).Patch(ctx, name, types.MergePatchType, data, metav1.PatchOptions{}); err != nil {
			t.Fatalf("label %s: %v", name, err)
		}
	}
	for _, n := range []string{"desk-1", "desk-2", "desk-3", "desk-4"} {
		label(n, map[string]any{vdi.LabelPool: "desk"})
	}
	label("desk-4", map[string]any{vdi.LabelAssignedTo: "zed"}) // v0.6.0's assignment
	f := fleet.New(fleet.Options{Timeout: time.Minute})
	if err := f.Add(b); err != nil {
		t.Fatal(err)
	}
	f.Refresh(ctx)
	st := openStore(t)
	tm := tasks.New(st, tasks.Options{})
	t.Cleanup(tm.Close)
	svc := vdi.New(vdi.Options{Fleet: f, Tasks: tm, Store: st,
		Kube: func(string) (kubernetes.Interface, dynamic.Interface, error) { return kube, dyn, nil }})
	if _, err := svc.ImportPool(ctx, admin, "desk", "kubevirt/test/"+ns+"/gold"); err != nil {
		t.Fatalf("import: %v", err)
	}
	poolID := "vm/" + ns + "/desk"
	d, err := svc.Claim(ctx, auth.Identity{Login: "bob@example.com", Via: auth.ViaTailscale}, "rest", poolID)
	if err != nil {
		t.Fatal(err)
	}
	zed := "vm/" + ns + "/desk-4"
	_, err = svc.ResizePool(ctx, root, "rest", poolID, 1)
	if !errors.Is(err, backends.ErrInvalid) || !strings.Contains(err.Error(), d.ID) || !strings.Contains(err.Error(), zed) ||
		!strings.Contains(err.Error(), "the smallest size now is 2") {
		t.Fatalf("shrink below the claims: %v", err)
	}
	r, err := svc.ResizePool(ctx, root, "rest", poolID, 3)
	if err != nil || len(r.Removed) != 1 {
		t.Fatalf("shrink to 3 = %+v, %v", r, err)
	}
	// The highest unclaimed member: desk-3, unless bob holds it.
	want := "vm/" + ns + "/desk-3"
	if d.ID == want {
		want = "vm/" + ns + "/desk-2"
	}
	if r.Removed[0] != want {
		t.Fatalf("removed %v, want %s (bob holds %s, zed desk-4)", r.Removed, want, d.ID)
	}
	gone := strings.TrimPrefix(want, "vm/"+ns+"/")
	if _, err := dyn.Resource(gvrVM).Namespace(ns).Get(ctx, gone, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the removed VM %s: %v", gone, err)
	}
	if _, err := kube.CoordinationV1().Leases(ns).Get(ctx, "corral-vdi-"+gone, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the shrink's Lease on %s stayed: %v", gone, err)
	}
	p, err := svc.Pools(ctx)
	if err != nil || len(p) != 1 {
		t.Fatalf("pools: %+v, %v", p, err)
	}
	var left []string
	for _, m := range p[0].Members {
		left = append(left, m.Desktop)
	}
	if len(left) != 3 || slices.Contains(left, want) || !slices.Contains(left, d.ID) || !slices.Contains(left, zed) {
		t.Fatalf("members after the shrink: %v", left)
	}
}
