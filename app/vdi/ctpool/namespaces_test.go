package ctpool_test

import (
	"errors"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/corral-dev/corral/app/fleet"
	"github.com/corral-dev/corral/app/tasks"
	"github.com/corral-dev/corral/app/vdi"
	"github.com/corral-dev/corral/app/vdi/ctpool"
	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/store"
)

// TestBrokerNamespaces: CT pools in two namespaces of the real API
// server, a broker serving one of them (CORRAL_VDI_NAMESPACES): it lists
// and claims the pool of its namespace only (the other is 404), and its
// policy pass renews the Lease of its own claim, not that of the other
// namespace's claim (made by a broker serving every namespace), nor
// reclaims it past the maximum session.
func TestBrokerNamespaces(t *testing.T) {
	in, out := newEnv(t), newEnv(t)
	for _, e := range []*env{in, out} {
		e.apply("desk", ctpool.Spec{Image: "img:1", Size: 1})
		e.reconcile("desk")
	}
	st, err := store.Open(in.ctx, filepath.Join(t.TempDir(), "c.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	tm := tasks.New(st, tasks.Options{})
	t.Cleanup(tm.Close)
	clock := &testClock{t: ct0}
	seam := &ctpool.Seam{Clusters: func() []ctpool.Cluster { return []ctpool.Cluster{{Context: "test", Kube: in.kube}} }, Now: clock.Now}
	broker := func(namespaces ...string) *vdi.Service {
		return vdi.New(vdi.Options{Fleet: fleet.New(fleet.Options{Timeout: time.Minute}), Tasks: tm, Store: st, Log: slog.New(slog.DiscardHandler),
			CT: seam, Now: clock.Now, MaxSession: time.Hour, Namespaces: namespaces})
	}
	served, all := broker(in.ns), broker()
	inPool, outPool := "ct/"+in.ns+"/desk", "ct/"+out.ns+"/desk"

	ps, err := served.BrokerPools(in.ctx)
	if err != nil || len(ps) != 1 || ps[0].ID != inPool {
		t.Fatalf("the pools of the broker serving %s = %+v, %v; want only %s", in.ns, ps, err, inPool)
	}
	if _, err := served.Claim(in.ctx, ctAlice, "rest", outPool); !errors.Is(err, backends.ErrNotFound) {
		t.Fatalf("claim of %s = %v, want 404", outPool, err)
	}
	if _, err := served.Claim(in.ctx, ctAlice, "rest", inPool); err != nil {
		t.Fatalf("claim of %s: %v", inPool, err)
	}
	if _, err := all.Claim(in.ctx, ctBob, "rest", outPool); err != nil {
		t.Fatalf("claim of %s by the broker serving every namespace: %v", outPool, err)
	}
	if ds, err := served.Desktops(in.ctx, ctBob, false); err != nil || len(ds) != 0 {
		t.Fatalf("bob's desktops on the broker serving %s = %+v, %v; want none", in.ns, ds, err)
	}
	renewed := func(e *env) time.Time {
		t.Helper()
		l, err := e.kube.CoordinationV1().Leases(e.ns).Get(e.ctx, "corral-vdi-ct-desk-1", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("the Lease of %s/desk-1: %v", e.ns, err)
		}
		return l.Spec.RenewTime.Time
	}
	// Forty minutes on: the served claim is renewed, the other not.
	clock.At(40 * time.Minute)
	if err := served.Pass(in.ctx); err != nil {
		t.Fatal(err)
	}
	if got := renewed(in); !got.Equal(ct0.Add(40 * time.Minute)) {
		t.Errorf("the served Lease renewed at %v, want %v", got, ct0.Add(40*time.Minute))
	}
	if got := renewed(out); !got.Equal(ct0) {
		t.Errorf("the Lease outside the namespaces renewed at %v, want untouched (%v)", got, ct0)
	}
	// Past the maximum session: the served claim is reclaimed (its
	// member recreated, the claim gone), the other left alone.
	clock.At(2 * time.Hour)
	if err := served.Pass(in.ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := all.Desktop(in.ctx, ctAlice, "ct/"+in.ns+"/desk-1"); !errors.Is(err, backends.ErrNotFound) {
		t.Errorf("the served claim past the maximum session: %v, want reclaimed", err)
	}
	if d, err := all.Desktop(in.ctx, ctBob, "ct/"+out.ns+"/desk-1"); err != nil || d.Owner != ctBob.Login {
		t.Errorf("the claim outside the namespaces after the pass = %+v, %v; want bob's still", d, err)
	}
}
