package vdi_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/corral-dev/corral/app/fleet"
	"github.com/corral-dev/corral/app/tasks"
	"github.com/corral-dev/corral/app/vdi"
	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/backends/kubevirt"
	"github.com/corral-dev/corral/backends/sim"
)

// TestKubeVirtBrokerNamespaces runs two brokers over one store and one
// fleet holding a sim pool (namespace "-") and a KubeVirt pool whose
// claims are Leases of the real API server (hack/testenv.sh): the broker
// with CORRAL_VDI_NAMESPACES=- serves the sim pool only, the one with the
// KubeVirt namespace the KubeVirt pool only. Each answers 404 for the
// other pool, and its policy pass renews its own claim and leaves the
// other's alone (the Lease is not written).
func TestKubeVirtBrokerNamespaces(t *testing.T) {
	kube := kubeClient(t) // skips or fails without the API server
	ns := namespace(t, kube)
	cfg, err := clientcmd.BuildConfigFromFlags("", os.Getenv("TEST_KUBECONFIG"))
	if err != nil {
		t.Fatal(err)
	}
	dyn := dynamic.NewForConfigOrDie(cfg)
	ctx := context.Background()
	kv, err := kubevirt.New(kubevirt.Options{Context: "test", RESTConfig: cfg, Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"gold", "desk-1"} {
		if _, err := kv.Create(ctx, backends.Spec{Name: n, Namespace: ns, CPUs: 1, MemoryMiB: 256, Image: "quay.io/containerdisks/fedora:42"}); err != nil {
			t.Fatalf("create %s: %v", n, err)
		}
	}
	if _, err := dyn.Resource(gvrVM).Namespace(ns).Patch(ctx, "desk-1", types.MergePatchType,
		[]byte(`{"metadata":{"labels":{"`+vdi.LabelPool+`":"desk"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	clk := &clock{t: t0}
	lab := sim.New(sim.Options{Context: "lab", Now: clk.Now})
	if _, err := lab.Create(ctx, backends.Spec{Name: "gold", Type: backends.TypeVM, CPUs: 1, MemoryMiB: 512}); err != nil {
		t.Fatal(err)
	}
	f := fleet.New(fleet.Options{Timeout: time.Minute})
	for _, b := range []backends.Backend{kv, lab} {
		if err := f.Add(b); err != nil {
			t.Fatal(err)
		}
	}
	f.Refresh(ctx)
	st := openStore(t)
	tm := tasks.New(st, tasks.Options{Now: clk.Now})
	t.Cleanup(tm.Close)
	broker := func(namespaces ...string) *vdi.Service {
		return vdi.New(vdi.Options{Fleet: f, Tasks: tm, Store: st, Now: clk.Now, Namespaces: namespaces,
			Kube: func(string) (kubernetes.Interface, dynamic.Interface, error) { return kube, dyn, nil }})
	}
	simB, kvB := broker("-"), broker(ns)
	if _, err := simB.CreatePool(ctx, admin, vdi.PoolRequest{Name: "desk", Golden: golden, Size: 1}); err != nil {
		t.Fatalf("create the sim pool: %v", err)
	}
	if _, err := kvB.ImportPool(ctx, admin, "desk", "kubevirt/test/"+ns+"/gold"); err != nil {
		t.Fatalf("import the KubeVirt pool: %v", err)
	}
	simPool, kvPool := "vm/-/desk", "vm/"+ns+"/desk"
	lease := func() *metav1.MicroTime {
		t.Helper()
		l, err := kube.CoordinationV1().Leases(ns).Get(ctx, "corral-vdi-desk-1", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("the Lease of desk-1: %v", err)
		}
		return l.Spec.RenewTime
	}

	for _, tc := range []struct {
		b           *vdi.Service
		serves, not string
	}{{simB, simPool, kvPool}, {kvB, kvPool, simPool}} {
		ps, err := tc.b.BrokerPools(ctx)
		if err != nil || len(ps) != 1 || ps[0].ID != tc.serves {
			t.Fatalf("the pools of the broker serving %s = %+v, %v", tc.serves, ps, err)
		}
		if d, err := tc.b.Claim(ctx, alice, "rest", tc.serves); err != nil || d.Owner != alice.Login {
			t.Fatalf("claim of %s = %+v, %v", tc.serves, d, err)
		}
		if _, err := tc.b.Claim(ctx, alice, "rest", tc.not); !errors.Is(err, backends.ErrNotFound) {
			t.Fatalf("claim of %s by the broker serving %s = %v, want 404", tc.not, tc.serves, err)
		}
		ds, err := tc.b.Desktops(ctx, boss, true)
		if err != nil || len(ds) != 1 || ds[0].PoolID != tc.serves {
			t.Fatalf("the desktops of the broker serving %s = %+v, %v", tc.serves, ds, err)
		}
		if _, err := tc.b.Desktop(ctx, alice, tc.not+"-1"); !errors.Is(err, backends.ErrNotFound) {
			t.Fatalf("desktop %s-1 by the broker serving %s = %v, want 404", tc.not, tc.serves, err)
		}
	}
	claimedAt := lease()
	if claimedAt == nil || !claimedAt.Time.Equal(t0) {
		t.Fatalf("the Lease's renew time after the claim = %v, want %v", claimedAt, t0)
	}

	// Forty minutes on, the sim broker's pass renews the sim claim and
	// does not write the Lease; ten minutes later the KubeVirt broker's
	// pass renews the Lease and not the sim claim.
	clk.Set(t0.Add(40 * time.Minute))
	if err := simB.Pass(ctx); err != nil {
		t.Fatalf("the sim broker's pass: %v", err)
	}
	if got := lease(); !got.Time.Equal(t0) {
		t.Fatalf("the broker serving - renewed the Lease of %s to %v", kvPool, got)
	}
	if c, err := vdi.NewSQLClaims(st).Get(ctx, vdi.DesktopID{Kind: "vm", Namespace: "-", Member: "desk-1"}); err != nil || !c.Renewed.Equal(t0.Add(40*time.Minute)) {
		t.Fatalf("the sim claim after its broker's pass = %+v, %v; want renewed", c, err)
	}
	clk.Set(t0.Add(50 * time.Minute))
	if err := kvB.Pass(ctx); err != nil {
		t.Fatalf("the KubeVirt broker's pass: %v", err)
	}
	if got := lease(); !got.Time.Equal(t0.Add(50 * time.Minute)) {
		t.Fatalf("the Lease after the KubeVirt broker's pass: renewed %v, want %v", got, t0.Add(50*time.Minute))
	}
	if c, _ := vdi.NewSQLClaims(st).Get(ctx, vdi.DesktopID{Kind: "vm", Namespace: "-", Member: "desk-1"}); !c.Renewed.Equal(t0.Add(40 * time.Minute)) {
		t.Fatalf("the broker serving %s renewed the sim claim: %+v", ns, c)
	}
}
