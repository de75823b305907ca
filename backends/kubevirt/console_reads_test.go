package kubevirt_test

import (
	"net/http"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/backends/kubevirt"
	"github.com/corral-dev/corral/backends/kubevirt/kubelettest"
)

// countingTransport counts the requests a backend sends the API server.
type countingTransport struct {
	rt http.RoundTripper
	n  atomic.Int64
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.rt.RoundTrip(r)
}

// TestConsolesReads: the console list of an instance the caller holds (a
// VM page's, from the fleet snapshot) reads what decides and nothing
// more: nothing for a VM (refused), the pod for a CT; from a bare ref it
// takes two reads.
func TestConsolesReads(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	counter := &countingTransport{}
	cfg := rest.CopyConfig(e.cfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { counter.rt = rt; return counter })
	b, err := kubevirt.New(kubevirt.Options{Context: testContext, RESTConfig: cfg, Namespace: e.ns, Wait: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	reads := func(what string, want int64, f func()) {
		t.Helper()
		before := counter.n.Load()
		f()
		if got := counter.n.Load() - before; got != want {
			t.Errorf("%s: %d requests, want %d", what, got, want)
		}
	}

	vm, err := b.Create(ctx, backends.Spec{Name: "vm1", Namespace: e.ns, Image: "quay.io/containerdisks/fedora:42"})
	if err != nil {
		t.Fatal(err)
	}
	reads("ConsolesOf a VM", 0, func() {
		_, err := b.ConsolesOf(ctx, vm)
		wantKind(t, "ConsolesOf a KubeVirt VM", err, backends.ErrUnsupported)
	})
	reads("Consoles of a VM's ref", 2, func() {
		_, err := b.Consoles(ctx, vm.Ref)
		wantKind(t, "Consoles of a KubeVirt VM", err, backends.ErrUnsupported)
	})

	ct, err := b.CreateContainer(ctx, backends.Spec{Name: "ct1", Namespace: e.ns, CPUs: 1, MemoryMiB: 256}, "docker.io/library/debian:bookworm", false)
	if err != nil {
		t.Fatal(err)
	}
	reads("ConsolesOf a pending CT", 1, func() {
		if kinds, err := b.ConsolesOf(ctx, ct); err != nil || len(kinds) != 0 {
			t.Errorf("ConsolesOf a pending CT = %v, %v; want none", kinds, err)
		}
	})
	// Bound to a node that needs no kubelet: nothing dials it here.
	if err := kubelettest.Run(ctx, e.kube, e.ns, "ct1", e.ns+"-node"); err != nil {
		t.Fatal(err)
	}
	// ct is the snapshot's view from before the pod ran: the pod's read
	// decides, not the state the caller holds.
	reads("ConsolesOf a running CT", 1, func() {
		if kinds, err := b.ConsolesOf(ctx, ct); err != nil || !slices.Equal(kinds, []backends.ConsoleKind{backends.ConsoleSerial}) {
			t.Errorf("ConsolesOf a running CT = %v, %v; want [serial]", kinds, err)
		}
	})
	reads("Consoles of a CT's ref", 2, func() {
		if kinds, err := b.Consoles(ctx, ct.Ref); err != nil || !slices.Equal(kinds, []backends.ConsoleKind{backends.ConsoleSerial}) {
			t.Errorf("Consoles of a running CT = %v, %v; want [serial]", kinds, err)
		}
	})
}
