package vdi_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

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

// BenchmarkBrokerClaimRaceKubeVirt is BenchmarkBrokerClaimRace on a
// KubeVirt context of the real API server (hack/testenv.sh): 200 users
// call Service.Claim at once on a pool of 100 stopped VirtualMachines
// whose claims are Leases. A claim there creates the member's Lease,
// patches the VM's assignment label and annotations, and starts it (a
// runStrategy patch). No KubeVirt controller runs: the VMs stay objects.
// It checks that exactly 100 users win, each a different member, and
// that each winner's Lease names them and their VM is set to run; it
// reports the mean of each race's p99 latency of one claim.
func BenchmarkBrokerClaimRaceKubeVirt(b *testing.B) {
	kube := kubeClient(b) // skips or fails without the API server
	cfg, err := clientcmd.BuildConfigFromFlags("", os.Getenv("TEST_KUBECONFIG"))
	if err != nil {
		b.Fatal(err)
	}
	// The broker's own client settings, as app/vdi.go builds them; the
	// backend keeps its own (kubevirt.New), as app/contexts.go builds it.
	dyn := dynamic.NewForConfigOrDie(vdi.ClientConfig(cfg, "corral-test"))
	var p99s []float64
	worst := 0.0
	for b.Loop() {
		b.StopTimer()
		svc, ns, poolID := kubevirtPool(b, kube, dyn, 100)
		b.StartTimer()
		var (
			mu   sync.Mutex
			lat  []time.Duration
			won  = map[string]string{}
			lost int
			wg   sync.WaitGroup
			gate = make(chan struct{})
		)
		for i := range 200 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				who := auth.Identity{Login: fmt.Sprintf("user%03d@example.com", i), Via: auth.ViaTailscale}
				<-gate
				start := time.Now()
				d, err := svc.Claim(context.Background(), who, "rest", poolID)
				took := time.Since(start)
				mu.Lock()
				defer mu.Unlock()
				lat = append(lat, took)
				switch {
				case errors.Is(err, backends.ErrConflict):
					lost++
				case err != nil:
					b.Errorf("%s: %v", who.Login, err)
				case d.StartError != "":
					b.Errorf("%s: %s did not start: %s", who.Login, d.ID, d.StartError)
				case won[d.ID] != "":
					b.Errorf("%s given twice", d.ID)
				default:
					won[d.ID] = who.Login
				}
			}()
		}
		close(gate)
		wg.Wait()
		b.StopTimer()
		if len(won) != 100 || lost != 100 {
			b.Fatalf("%d winners, %d losers", len(won), lost)
		}
		checkKubeVirtWinners(b, kube, dyn, ns, won)
		slices.Sort(lat)
		p99s = append(p99s, float64(lat[len(lat)*99/100-1].Microseconds())/1000)
		worst = max(worst, float64(lat[len(lat)-1].Microseconds())/1000)
		b.StartTimer()
	}
	sum := 0.0
	for _, p := range p99s {
		sum += p
	}
	b.ReportMetric(sum/float64(len(p99s)), "p99-ms")
	b.ReportMetric(worst, "max-ms")
}

// kubevirtPool builds a broker over a KubeVirt context of the test API
// server with a pool "desk" of size stopped members in a fresh namespace,
// adopted by ImportPool from VMs labelled with the pool (as v0.6.0 left
// them), so no clone controller is needed. It returns the service, the
// namespace and the pool's ID.
func kubevirtPool(b *testing.B, kube kubernetes.Interface, dyn dynamic.Interface, size int) (*vdi.Service, string, string) {
	b.Helper()
	ctx := context.Background()
	ns := namespace(b, kube)
	cfg, err := clientcmd.BuildConfigFromFlags("", os.Getenv("TEST_KUBECONFIG"))
	if err != nil {
		b.Fatal(err)
	}
	kb, err := kubevirt.New(kubevirt.Options{Context: "test", RESTConfig: cfg, Namespace: ns})
	if err != nil {
		b.Fatal(err)
	}
	spec := backends.Spec{Namespace: ns, CPUs: 1, MemoryMiB: 256, Image: "quay.io/containerdisks/fedora:42"}
	spec.Name = "gold"
	if _, err := kb.Create(ctx, spec); err != nil {
		b.Fatalf("create gold: %v", err)
	}
	pool, _ := jsonMarshal(map[string]any{"metadata": map[string]any{"labels": map[string]any{vdi.LabelPool: "desk"}}})
	for i := range size {
		spec.Name = fmt.Sprintf("desk-%d", i+1)
		if _, err := kb.Create(ctx, spec); err != nil {
			b.Fatalf("create %s: %v", spec.Name, err)
		}
		if _, err := dyn.Resource(gvrVM).Namespace(ns).Patch(ctx, spec.Name, types.MergePatchType, pool, metav1.PatchOptions{}); err != nil {
			b.Fatalf("label %s: %v", spec.Name, err)
		}
	}
	// The broker gets a backend of its own, as a server has one: the
	// creations above drained the client-side rate limit of kb (50
	// requests a second, burst 100), which the race must not inherit.
	if kb, err = kubevirt.New(kubevirt.Options{Context: "test", RESTConfig: cfg, Namespace: ns}); err != nil {
		b.Fatal(err)
	}
	f := fleet.New(fleet.Options{Timeout: time.Minute})
	if err := f.Add(kb); err != nil {
		b.Fatal(err)
	}
	f.Refresh(ctx)
	st := openStore(b)
	tm := tasks.New(st, tasks.Options{})
	b.Cleanup(tm.Close)
	svc := vdi.New(vdi.Options{Fleet: f, Tasks: tm, Store: st,
		Kube: func(string) (kubernetes.Interface, dynamic.Interface, error) { return kube, dyn, nil }})
	p, err := svc.ImportPool(ctx, admin, "desk", "kubevirt/test/"+ns+"/gold")
	if err != nil {
		b.Fatalf("import: %v", err)
	}
	if len(p.Members) != size {
		b.Fatalf("imported %d members, want %d", len(p.Members), size)
	}
	return svc, ns, p.ID
}

// checkKubeVirtWinners reads what the race wrote: one Lease per winner
// naming them, and each winner's VM labelled with them and set to run.
func checkKubeVirtWinners(b *testing.B, kube kubernetes.Interface, dyn dynamic.Interface, ns string, won map[string]string) {
	b.Helper()
	ctx := context.Background()
	leases, err := kube.CoordinationV1().Leases(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	if len(leases.Items) != len(won) {
		b.Fatalf("%d Leases for %d winners", len(leases.Items), len(won))
	}
	vms, err := dyn.Resource(gvrVM).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	byName := map[string]map[string]any{}
	for _, vm := range vms.Items {
		byName[vm.GetName()] = vm.Object
	}
	for id, who := range won {
		member := id[len("vm/"+ns+"/"):]
		l, err := kube.CoordinationV1().Leases(ns).Get(ctx, "corral-vdi-"+member, metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != who {
			b.Fatalf("Lease of %s (won by %s): %v %v", member, who, l.Spec.HolderIdentity, err)
		}
		vm := byName[member]
		meta, _ := vm["metadata"].(map[string]any)
		labels, _ := meta["labels"].(map[string]any)
		spec, _ := vm["spec"].(map[string]any)
		if labels[vdi.LabelAssignedTo] != vdi.LabelSafe(who) || spec["runStrategy"] != "Always" {
			b.Fatalf("%s won by %s: label %v, runStrategy %v", member, who, labels[vdi.LabelAssignedTo], spec["runStrategy"])
		}
	}
}
