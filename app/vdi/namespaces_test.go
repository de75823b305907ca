package vdi_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/corral-dev/corral/app/auth"
	"github.com/corral-dev/corral/app/vdi"
	"github.com/corral-dev/corral/backends"
)

// nsCT is a CT seam with one pool and one claim in each of two
// namespaces; it records the renewals and releases the broker asks of it.
type nsCT struct {
	vdi.CTPools // nil: any other call panics
	claims      []vdi.Claim

	mu       sync.Mutex
	updated  []string // desktops renewed or marked
	released []string // desktops reclaimed
	claimed  []string // pools claimed
}

func newNSCT() *nsCT {
	var cs []vdi.Claim
	for _, ns := range []string{"desktops", "other"} {
		cs = append(cs, vdi.Claim{Desktop: vdi.DesktopID{Kind: "ct", Namespace: ns, Member: "web-1"}, Pool: "web", Holder: alice.Login,
			Session: "s-" + ns, Acquired: t0, Renewed: t0, Expires: t0.Add(vdi.ClaimTTL), Version: "1"})
	}
	return &nsCT{claims: cs}
}

func (f *nsCT) Summaries(context.Context) ([]vdi.PoolSummary, error) {
	return []vdi.PoolSummary{{ID: "ct/desktops/web", Ephemeral: true, Members: 1, Claimed: 1}, {ID: "ct/other/web", Ephemeral: true, Members: 1, Claimed: 1}}, nil
}

func (f *nsCT) Claim(_ context.Context, p vdi.PoolID, holder string) (vdi.Claim, error, error) {
	f.mu.Lock()
	f.claimed = append(f.claimed, p.String())
	f.mu.Unlock()
	for _, c := range f.claims {
		if c.Desktop.Namespace == p.Namespace && c.Holder == holder {
			return c, nil, nil
		}
	}
	return vdi.Claim{}, nil, backends.Conflictf("pool %s has no free members", p)
}

func (f *nsCT) Claims(context.Context) ([]vdi.Claim, error) { return slices.Clone(f.claims), nil }

func (f *nsCT) Get(_ context.Context, d vdi.DesktopID) (vdi.Claim, error) {
	for _, c := range f.claims {
		if c.Desktop == d {
			return c, nil
		}
	}
	return vdi.Claim{}, vdi.ErrNoClaim
}

func (f *nsCT) Members(_ context.Context, cs []vdi.Claim) []vdi.MemberView {
	out := make([]vdi.MemberView, len(cs))
	for i, c := range cs {
		out[i] = vdi.MemberView{Ref: "kubevirt/k/" + c.Desktop.Namespace + "/" + c.Desktop.Member, Phase: "Running", Running: true}
	}
	return out
}

func (f *nsCT) Update(_ context.Context, c vdi.Claim) (vdi.Claim, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.updated = append(f.updated, c.Desktop.String())
	return c, nil
}

func (f *nsCT) Release(_ context.Context, c vdi.Claim) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.released = append(f.released, c.Desktop.String())
	return nil
}

func (f *nsCT) Desktop(_ context.Context, ref backends.InstanceRef) (vdi.DesktopID, bool) {
	if ref.Backend == backends.KindKubeVirt && ref.Name == "web-1" {
		return vdi.DesktopID{Kind: "ct", Namespace: ref.Namespace, Member: "web-1"}, true
	}
	return vdi.DesktopID{}, false
}

func (f *nsCT) calls() (updated, released, claimed []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.updated), slices.Clone(f.released), slices.Clone(f.claimed)
}

// TestBrokerNamespaces: with CORRAL_VDI_NAMESPACES=desktops the broker
// serves the CT pool of desktops and nothing of namespace other nor the
// sim pool (namespace "-"): those are absent from the pools list, 404 on
// claim and on the desktop routes, missing from the desktops lists, and
// the policy loop neither renews nor reclaims their claims. The admin's
// commands (pool list, assign, unassign) still reach every pool; a
// broker that serves "-" reclaims the same sim claim.
func TestBrokerNamespaces(t *testing.T) {
	ct := newNSCT()
	e := newEnv(t, vdi.Options{CT: ct, MaxSession: time.Hour, Namespaces: []string{"desktops"}})
	ctx := context.Background()
	e.pool(t, 2, false)

	ps, err := e.svc.BrokerPools(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, p := range ps {
		ids = append(ids, p.ID)
	}
	if !slices.Equal(ids, []string{"ct/desktops/web"}) {
		t.Fatalf("broker pools = %v, want only ct/desktops/web", ids)
	}
	if d, err := e.svc.Claim(ctx, alice, "rest", "ct/desktops/web"); err != nil || d.ID != "ct/desktops/web-1" {
		t.Fatalf("claim in a listed namespace = %+v, %v", d, err)
	}
	for _, pool := range []string{"vm/-/desk", "ct/other/web"} {
		if _, err := e.svc.Claim(ctx, alice, "rest", pool); !errors.Is(err, backends.ErrNotFound) || backends.SafeMessage(err) != "pool "+pool+" does not exist" {
			t.Errorf("claim of %s outside the namespaces = %v, want 404 as if absent", pool, err)
		}
	}
	if _, _, claimed := ct.calls(); !slices.Equal(claimed, []string{"ct/desktops/web"}) {
		t.Errorf("the CT seam was asked to claim %v, want only ct/desktops/web", claimed)
	}

	// The admin assigns a member of the sim pool: the CLI is not the broker.
	simDesk, err := e.svc.Assign(ctx, admin, "vm/-/desk", alice.Login)
	if err != nil {
		t.Fatalf("assign outside the namespaces: %v", err)
	}
	simID, _ := vdi.ParseDesktopID(simDesk.ID)
	simRef, _ := backends.ParseRef(simDesk.Ref)
	if pools, err := e.svc.Pools(ctx); err != nil || len(pools) != 1 || pools[0].ID != "vm/-/desk" {
		t.Fatalf("admin pool list = %+v, %v", pools, err)
	}
	for _, desk := range []string{simDesk.ID, "ct/other/web-1"} {
		if _, err := e.svc.Desktop(ctx, alice, desk); !errors.Is(err, backends.ErrNotFound) {
			t.Errorf("desktop %s = %v, want 404", desk, err)
		}
		if _, err := e.svc.Connect(ctx, alice, desk); !errors.Is(err, backends.ErrNotFound) {
			t.Errorf("connect %s = %v, want 404", desk, err)
		}
		if _, err := e.svc.Start(ctx, alice, "rest", desk); !errors.Is(err, backends.ErrNotFound) {
			t.Errorf("start %s = %v, want 404", desk, err)
		}
		if _, err := e.svc.Release(ctx, boss, "rest", desk); !errors.Is(err, backends.ErrNotFound) {
			t.Errorf("release %s by an admin = %v, want 404", desk, err)
		}
	}
	for _, who := range []bool{false, true} {
		ds, err := e.svc.Desktops(ctx, map[bool]auth.Identity{false: alice, true: boss}[who], who)
		if err != nil {
			t.Fatal(err)
		}
		if len(ds) != 1 || ds[0].ID != "ct/desktops/web-1" {
			t.Errorf("desktops (all=%v) = %+v, want only ct/desktops/web-1", who, ds)
		}
	}
	// Its holder opens its consoles only as admins may; an admin does.
	otherRef := backends.InstanceRef{Backend: backends.KindKubeVirt, Context: "k", Namespace: "other", Name: "web-1"}
	for _, ref := range []backends.InstanceRef{simRef, otherRef} {
		if holder, err := e.svc.ConsoleAccess(ctx, alice, ref); holder || !errors.Is(err, backends.ErrForbidden) {
			t.Errorf("console access of the holder to %s = %v, %v; want 403", ref, holder, err)
		}
		if _, err := e.svc.ConsoleAccess(ctx, boss, ref); err != nil {
			t.Errorf("console access of an admin to %s: %v", ref, err)
		}
	}
	inRef := backends.InstanceRef{Backend: backends.KindKubeVirt, Context: "k", Namespace: "desktops", Name: "web-1"}
	if holder, err := e.svc.ConsoleAccess(ctx, alice, inRef); !holder || err != nil {
		t.Errorf("console access of the holder to %s = %v, %v; want granted", inRef, holder, err)
	}
	// The console of a desktop outside the namespaces is not counted.
	e.svc.ConsoleOpened(otherRef)
	e.svc.ConsoleOpened(simRef)
	if updated, _, _ := ct.calls(); len(updated) != 0 {
		t.Errorf("session marks on %v, want none", updated)
	}
	if c, err := vdi.NewSQLClaims(e.st).Get(ctx, simID); err != nil || !c.Connected.IsZero() {
		t.Errorf("sim claim after a console opened = %+v, %v; want no session mark", c, err)
	}

	// Two hours on: past the maximum session and the claim TTL. The pass
	// reclaims the listed CT claim and leaves the others alone.
	e.passAt(t, e.svc, 2*time.Hour)
	updated, released, _ := ct.calls()
	if !slices.Equal(released, []string{"ct/desktops/web-1"}) || slices.Contains(updated, "ct/other/web-1") {
		t.Errorf("CT pass: released %v, renewed %v; want ct/desktops/web-1 released and ct/other/web-1 untouched", released, updated)
	}
	all := e.restart(vdi.Options{MaxSession: time.Hour}) // every namespace, as the CLI sees it
	d, err := all.Desktop(ctx, boss, simDesk.ID)
	if err != nil || d.Owner != alice.Login || !d.Expired || e.state(t, simRef.Name) != backends.StateRunning {
		t.Fatalf("sim claim after the filtered pass = %+v, %v (state %s); want alice's, not renewed, running", d, err, e.state(t, simRef.Name))
	}

	// A broker serving "-" applies the policy to it: reclaimed.
	served := e.restart(vdi.Options{MaxSession: time.Hour, Namespaces: []string{"-"}})
	e.passAt(t, served, 2*time.Hour+time.Minute)
	if _, err := all.Desktop(ctx, boss, simDesk.ID); !errors.Is(err, backends.ErrNotFound) {
		t.Fatalf("sim claim after a pass serving \"-\": %v, want reclaimed", err)
	}

	// The broker's resize route (REST) does not reach it; the admin's
	// resize (CLI, pools page) does.
	if _, _, err := e.svc.StartResizePool(ctx, boss, "rest", "vm/-/desk", 3); !errors.Is(err, backends.ErrNotFound) {
		t.Errorf("REST resize outside the namespaces = %v, want 404", err)
	}
	if r, err := e.svc.ResizePool(ctx, boss, "cli", "vm/-/desk", 3); err != nil || r.To != 3 {
		t.Errorf("CLI resize outside the namespaces = %+v, %v", r, err)
	}

	// Unassign reaches a pool outside the namespaces.
	bobs, err := e.svc.Assign(ctx, admin, "vm/-/desk", bob.Login)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.svc.Unassign(ctx, admin, bobs.ID); err != nil {
		t.Fatalf("unassign outside the namespaces: %v", err)
	}
}
