package vdi_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
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
	"github.com/corral-dev/corral/store"
)

var gvrVM = schema.GroupVersionResource{Group: "kubevirt.io", Version: "v1", Resource: "virtualmachines"}

// TestKubeVirtPoolUpgradeFromV060 runs the broker on a KubeVirt context
// of the real API server (hack/testenv.sh) over a pool that v0.6.0 left:
// VMs labelled corral.dev/vdi-pool, one of them assigned by label only.
// It checks the upgrade rules of spec/vdi.md: the labelled member counts
// as claimed, another user never gets it, a claim by the identity in the
// label adopts it with a Lease; claims are Leases named corral-vdi-MEMBER
// whose holder the VM's labels copy; a release ends the Lease and the
// copy; an unassign clears a label-only assignment.
func TestKubeVirtPoolUpgradeFromV060(t *testing.T) {
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
	// What v0.6.0 left: pool labels, and two assignments held by labels.
	label := func(name string, labels map[string]any, anns map[string]any) {
		t.Helper()
		body := map[string]any{"metadata": map[string]any{"labels": labels, "annotations": anns}}
		data, _ := jsonMarshal(body)
		if _, err := dyn.Resource(gvrVM).Namespace(ns).Patch(ctx, name, types.MergePatchType, data, metav1.PatchOptions{}); err != nil {
			t.Fatalf("label %s: %v", name, err)
		}
	}
	for _, n := range []string{"desk-1", "desk-2", "desk-3", "desk-4"} {
		label(n, map[string]any{vdi.LabelPool: "desk"}, nil)
	}
	label("desk-2", map[string]any{vdi.LabelAssignedTo: "alice"}, map[string]any{vdi.AnnClaimedAt: "2026-01-01T00:00:00Z"})
	label("desk-4", map[string]any{vdi.LabelAssignedTo: "zed"}, nil)

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

	golden := "kubevirt/test/" + ns + "/gold"
	p, err := svc.ImportPool(ctx, admin, "desk", golden)
	if err != nil {
		t.Fatalf("import: %v", err)
	}
	poolID := "vm/" + ns + "/desk"
	if p.ID != poolID || len(p.Members) != 4 || p.Members[1].Holder != "alice" || p.Members[3].Holder != "zed" || p.Members[0].Holder != "" {
		t.Fatalf("imported pool = %+v", p)
	}
	if ps, _ := svc.BrokerPools(ctx); len(ps) != 1 || ps[0].Claimed != 2 || ps[0].Free != 2 {
		t.Fatalf("broker pools = %+v", ps)
	}

	lease := func(member string) (string, bool) {
		t.Helper()
		l, err := kube.CoordinationV1().Leases(ns).Get(ctx, "corral-vdi-"+member, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return "", false
		}
		if err != nil {
			t.Fatal(err)
		}
		return *l.Spec.HolderIdentity, true
	}
	vmMeta := func(member string) (string, string) {
		t.Helper()
		vm, err := dyn.Resource(gvrVM).Namespace(ns).Get(ctx, member, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return vm.GetLabels()[vdi.LabelAssignedTo], vm.GetAnnotations()[vdi.AnnAssignedTo]
	}

	// Two other users get the two free members, never alice's or zed's.
	bob := auth.Identity{Login: "bob@example.com", Via: auth.ViaTailscale}
	carol := auth.Identity{Login: "carol@example.com", Via: auth.ViaTailscale}
	got := map[string]string{}
	for _, who := range []auth.Identity{bob, carol} {
		d, err := svc.Claim(ctx, who, "rest", poolID)
		if err != nil {
			t.Fatalf("claim by %s: %v", who.Login, err)
		}
		member := d.ID[len("vm/"+ns+"/"):]
		if member == "desk-2" || member == "desk-4" {
			t.Fatalf("%s got %s, which v0.6.0 assigned", who.Login, member)
		}
		got[who.Login] = member
		if h, ok := lease(member); !ok || h != who.Login {
			t.Fatalf("Lease of %s: holder %q, exists %v", member, h, ok)
		}
		if l, a := vmMeta(member); l != vdi.LabelSafe(who.Login) || a != who.Login {
			t.Fatalf("%s's assignment copy: label %q annotation %q", member, l, a)
		}
	}
	dave := auth.Identity{Login: "dave@example.com", Via: auth.ViaTailscale}
	if _, err := svc.Claim(ctx, dave, "rest", poolID); !errors.Is(err, backends.ErrConflict) {
		t.Fatalf("claim with no free member: %v", err)
	}
	// alice (the exact string of the label) adopts her v0.6.0 desktop.
	d, err := svc.Claim(ctx, auth.Identity{Login: "alice", Via: auth.ViaTailscale}, "rest", poolID)
	if err != nil || d.ID != "vm/"+ns+"/desk-2" {
		t.Fatalf("alice's adoption = %+v, %v", d, err)
	}
	if h, ok := lease("desk-2"); !ok || h != "alice" {
		t.Fatalf("adopted Lease: %q %v", h, ok)
	}
	// bob releases: the Lease and the copy go.
	tk, err := svc.Release(ctx, bob, "rest", "vm/"+ns+"/"+got[bob.Login])
	if err != nil {
		t.Fatal(err)
	}
	for range 200 {
		if t2, _, _ := tm.Get(ctx, tk.ID); t2.Status != store.TaskRunning {
			if t2.Status != store.TaskDone {
				t.Fatalf("release: %+v", t2)
			}
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, ok := lease(got[bob.Login]); ok {
		t.Fatal("the Lease outlived the release")
	}
	if l, a := vmMeta(got[bob.Login]); l != "" || a != "" {
		t.Fatalf("assignment copy after release: %q %q", l, a)
	}
	// zed's label-only assignment is cleared by an admin's unassign.
	if err := svc.Unassign(ctx, admin, "vm/"+ns+"/desk-4"); err != nil {
		t.Fatalf("unassign of a label-only assignment: %v", err)
	}
	if l, _ := vmMeta("desk-4"); l != "" {
		t.Fatalf("label after unassign: %q", l)
	}
	if ps, _ := svc.BrokerPools(ctx); ps[0].Free != 2 {
		t.Fatalf("free after release and unassign = %+v", ps)
	}
}

func jsonMarshal(v any) ([]byte, error) { return json.Marshal(v) }
