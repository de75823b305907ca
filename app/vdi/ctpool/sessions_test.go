package ctpool_test

import (
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corral-dev/corral/app/auth"
	"github.com/corral-dev/corral/app/fleet"
	"github.com/corral-dev/corral/app/tasks"
	"github.com/corral-dev/corral/app/vdi"
	"github.com/corral-dev/corral/app/vdi/ctpool"
	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/store"
)

// The reclaim policy of spec/vdi.md (Sessions and reclaim) on CT
// desktops, against the real API server with an injected clock: the
// broker counts the consoles of a CT member, keeps its marks on the
// member's Lease, renews the Lease, and reclaims (destroys and makes the
// member again) past the disconnect grace or the maximum duration.

var (
	ct0      = time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)
	ctAlice  = auth.Identity{Login: "alice@example.com"}
	ctBob    = auth.Identity{Login: "bob@example.com"}
	ctPolicy = vdi.Options{Grace: 15 * time.Minute, MaxSession: 8 * time.Hour}
)

type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) Now() time.Time     { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *testClock) Set(t time.Time)    { c.mu.Lock(); c.t = t; c.mu.Unlock() }
func (c *testClock) At(d time.Duration) { c.Set(ct0.Add(d)) }

// sessEnv is a CT pool desk of one member served by a broker.
type sessEnv struct {
	*env
	clock *testClock
	st    *store.Store
	tm    *tasks.Manager
	seam  *ctpool.Seam
	desk  string // ct/NS/desk-1
	ref   backends.InstanceRef
}

func newSessEnv(t *testing.T) *sessEnv {
	e := newEnv(t)
	e.apply("desk", ctpool.Spec{Image: "img:1", Size: 1})
	e.reconcile("desk")
	st, err := store.Open(e.ctx, filepath.Join(t.TempDir(), "c.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	tm := tasks.New(st, tasks.Options{})
	t.Cleanup(tm.Close)
	clock := &testClock{t: ct0}
	se := &sessEnv{env: e, clock: clock, st: st, tm: tm,
		seam: &ctpool.Seam{Clusters: func() []ctpool.Cluster { return []ctpool.Cluster{{Context: "test", Kube: e.kube}} }, Now: clock.Now},
		desk: "ct/" + e.ns + "/desk-1",
		ref:  backends.InstanceRef{Backend: backends.KindKubeVirt, Context: "test", Namespace: e.ns, Name: "desk-1"}}
	return se
}

// broker returns a new broker process over the same cluster and store.
func (e *sessEnv) broker(opts vdi.Options) *vdi.Service {
	opts.Fleet, opts.Tasks, opts.Store, opts.Log = fleet.New(fleet.Options{Timeout: time.Minute}), e.tm, e.st, slog.New(slog.DiscardHandler)
	opts.Now, opts.CT = e.clock.Now, e.seam
	return vdi.New(opts)
}

func (e *sessEnv) claim(t *testing.T, svc *vdi.Service) {
	t.Helper()
	d, err := svc.Claim(e.ctx, ctAlice, "rest", "ct/"+e.ns+"/desk")
	if err != nil || d.ID != e.desk {
		t.Fatalf("claim: %+v %v", d, err)
	}
}

func (e *sessEnv) passAt(t *testing.T, svc *vdi.Service, d time.Duration) {
	t.Helper()
	e.clock.At(d)
	if err := svc.Pass(e.ctx); err != nil {
		t.Fatalf("pass at +%v: %v", d, err)
	}
}

// held reports whether alice still holds the desktop.
func (e *sessEnv) held(t *testing.T, svc *vdi.Service) bool {
	t.Helper()
	_, err := svc.Desktop(e.ctx, ctAlice, e.desk)
	if err != nil && !errors.Is(err, backends.ErrNotFound) {
		t.Fatalf("desktop: %v", err)
	}
	return err == nil
}

func (e *sessEnv) view(t *testing.T, svc *vdi.Service) vdi.Desktop {
	t.Helper()
	d, err := svc.Desktop(e.ctx, ctAlice, e.desk)
	if err != nil {
		t.Fatalf("desktop: %v", err)
	}
	return d
}

func (e *sessEnv) audited(t *testing.T, action string) bool {
	t.Helper()
	rows, err := e.st.ListAudit(e.ctx, store.AuditFilter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if r.Actor == vdi.BrokerIdentity && r.Action == action && strings.Contains(r.Target, "ct/"+e.ns+"/desk-1 (held by alice@example.com)") {
			return true
		}
	}
	var got []string
	for _, r := range rows {
		got = append(got, r.Actor+" "+r.Action+" "+r.Target)
	}
	t.Logf("audit:\n%s", strings.Join(got, "\n"))
	return false
}

// TestCTReclaimAfterDisconnectGrace: the passes renew the Lease past its
// hour (another user cannot take the member); one open console keeps the
// desktop; the last close starts the grace, and past it the member is
// destroyed and made again, audited as a broker reclaim.
func TestCTReclaimAfterDisconnectGrace(t *testing.T) {
	e := newSessEnv(t)
	svc := e.broker(vdi.Options{Grace: 15 * time.Minute})
	e.claim(t, svc)
	uid := e.pod("desk-1").UID
	// No console (a native client): never reclaimed; renewed past the
	// Lease's hour.
	for _, d := range []time.Duration{30 * time.Minute, time.Hour, 90 * time.Minute, 2 * time.Hour, 3 * time.Hour} {
		e.passAt(t, svc, d)
	}
	l, err := vdi.NewLeaseClaims(e.kube, "test").Get(e.ctx, vdi.DesktopID{Kind: "ct", Namespace: e.ns, Member: "desk-1"})
	if err != nil || l.Expired(e.clock.Now()) || !l.Renewed.Equal(ct0.Add(3*time.Hour)) {
		t.Fatalf("Lease at +3h: %+v %v, want renewed at +3h", l, err)
	}
	if _, err := svc.Claim(e.ctx, ctBob, "rest", "ct/"+e.ns+"/desk"); !errors.Is(err, backends.ErrConflict) {
		t.Fatalf("bob claims at +3h: %v, want no free member (the Lease is renewed)", err)
	}
	if d := e.view(t, svc); d.Expired || d.ReclaimAt != nil || d.Connected {
		t.Fatalf("desktop at +3h %+v: want renewed, no reclaim planned", d)
	}
	// Two consoles; only the last close starts the grace.
	svc.ConsoleOpened(e.ref)
	svc.ConsoleOpened(e.ref)
	if d := e.view(t, svc); !d.Connected || d.ReclaimAt != nil {
		t.Fatalf("console open: %+v", d)
	}
	e.clock.At(4 * time.Hour)
	svc.ConsoleClosed(e.ref)
	e.passAt(t, svc, 5*time.Hour)
	if !e.held(t, svc) || !e.view(t, svc).Connected {
		t.Fatal("one open console did not keep the desktop")
	}
	e.clock.At(5 * time.Hour)
	svc.ConsoleClosed(e.ref)
	d := e.view(t, svc)
	if d.Connected || d.ReclaimAt == nil || !d.ReclaimAt.Equal(ct0.Add(5*time.Hour+15*time.Minute)) || d.ReclaimReason != vdi.ReasonDisconnectGrace {
		t.Fatalf("after the last close: %+v", d)
	}
	l, _ = vdi.NewLeaseClaims(e.kube, "test").Get(e.ctx, vdi.DesktopID{Kind: "ct", Namespace: e.ns, Member: "desk-1"})
	if !l.Disconnected.Equal(ct0.Add(5*time.Hour)) || !l.Connected.Equal(ct0.Add(3*time.Hour)) {
		t.Fatalf("Lease marks %v / %v, want connected +3h, disconnected +5h", l.Connected, l.Disconnected)
	}
	e.passAt(t, svc, 5*time.Hour+15*time.Minute-time.Second)
	if !e.held(t, svc) {
		t.Fatal("reclaimed before the grace ended")
	}
	e.passAt(t, svc, 5*time.Hour+15*time.Minute)
	if e.held(t, svc) {
		t.Fatal("not reclaimed after the grace")
	}
	if e.pod("desk-1").UID == uid {
		t.Error("the reclaimed member was not made again")
	}
	if !e.audited(t, "vdi reclaim (disconnect-grace)") {
		t.Error("no audited reclaim (disconnect-grace)")
	}
	// The member is free again: bob gets it.
	if d, err := svc.Claim(e.ctx, ctBob, "rest", "ct/"+e.ns+"/desk"); err != nil || d.ID != e.desk {
		t.Errorf("bob after the reclaim: %+v %v", d, err)
	}
}

// TestCTReclaimAfterMaxSession: the maximum duration reclaims a CT
// desktop even with a console open.
func TestCTReclaimAfterMaxSession(t *testing.T) {
	e := newSessEnv(t)
	svc := e.broker(ctPolicy)
	e.claim(t, svc)
	e.clock.At(time.Hour)
	svc.ConsoleOpened(e.ref)
	d := e.view(t, svc)
	if !d.Connected || d.ReclaimAt == nil || !d.ReclaimAt.Equal(ct0.Add(8*time.Hour)) || d.ReclaimReason != vdi.ReasonMaxDuration {
		t.Fatalf("desktop %+v", d)
	}
	e.passAt(t, svc, 4*time.Hour)
	e.passAt(t, svc, 8*time.Hour-time.Second)
	if !e.held(t, svc) {
		t.Fatal("reclaimed before the maximum duration")
	}
	e.passAt(t, svc, 8*time.Hour)
	if e.held(t, svc) {
		t.Fatal("not reclaimed at the maximum duration")
	}
	if !e.audited(t, "vdi reclaim (max-duration)") {
		t.Error("no audited reclaim (max-duration)")
	}
	// The console of the reclaimed member closes afterwards: a new claim
	// of the same member starts with no console counted.
	svc.ConsoleClosed(e.ref)
	if d, err := svc.Claim(e.ctx, ctAlice, "rest", "ct/"+e.ns+"/desk"); err != nil || d.Connected {
		t.Fatalf("claim again: %+v %v", d, err)
	}
}

// TestCTRestartRule: a new broker process does not reclaim a connected
// CT desktop only because it restarted: its grace starts at the restart,
// in full.
func TestCTRestartRule(t *testing.T) {
	e := newSessEnv(t)
	old := e.broker(ctPolicy)
	e.claim(t, old)
	e.clock.At(time.Hour)
	old.ConsoleOpened(e.ref) // connected at +1h; the process then ends
	// The new process starts at +3h, long past a grace from +1h.
	e.clock.At(3 * time.Hour)
	svc := e.broker(ctPolicy)
	if err := svc.Recover(e.ctx); err != nil {
		t.Fatal(err)
	}
	e.passAt(t, svc, 3*time.Hour)
	if !e.held(t, svc) {
		t.Fatal("reclaimed because the broker restarted")
	}
	d := e.view(t, svc)
	if d.ReclaimAt == nil || !d.ReclaimAt.Equal(ct0.Add(3*time.Hour+15*time.Minute)) || d.ReclaimReason != vdi.ReasonDisconnectGrace {
		t.Fatalf("after the restart: %+v, want the grace from +3h", d)
	}
	e.passAt(t, svc, 3*time.Hour+14*time.Minute)
	if !e.held(t, svc) {
		t.Fatal("reclaimed within the grace after the restart")
	}
	e.passAt(t, svc, 3*time.Hour+15*time.Minute)
	if e.held(t, svc) {
		t.Fatal("not reclaimed after the grace following the restart")
	}
}

// TestCTConsoleOfOtherInstance: a console of an instance that is no CT
// member (another context, or no member PVC) counts for no desktop.
func TestCTConsoleOfOtherInstance(t *testing.T) {
	e := newSessEnv(t)
	svc := e.broker(ctPolicy)
	e.claim(t, svc)
	for _, ref := range []backends.InstanceRef{
		{Backend: backends.KindKubeVirt, Context: "other", Namespace: e.ns, Name: "desk-1"},
		{Backend: backends.KindKubeVirt, Context: "test", Namespace: e.ns, Name: "vm-1"},
	} {
		svc.ConsoleOpened(ref)
	}
	if d := e.view(t, svc); d.Connected {
		t.Fatalf("a console of another instance counted: %+v", d)
	}
	if d, ok := e.seam.Desktop(e.ctx, e.ref); !ok || d.String() != e.desk {
		t.Fatalf("seam desktop of %s: %v %v", e.ref, d, ok)
	}
}

// TestCTConsoleAccess: the holder of a CT desktop may open its consoles;
// another signed-in person may not, and neither may anyone for an
// instance that is no desktop.
func TestCTConsoleAccess(t *testing.T) {
	e := newSessEnv(t)
	svc := e.broker(ctPolicy)
	e.claim(t, svc)
	if holder, err := svc.ConsoleAccess(e.ctx, ctAlice, e.ref); err != nil || !holder {
		t.Fatalf("the holder's console access to %s: holder %v, %v", e.ref, holder, err)
	}
	if _, err := svc.ConsoleAccess(e.ctx, ctBob, e.ref); !errors.Is(err, backends.ErrForbidden) {
		t.Fatalf("another user's console access to %s: %v, want Forbidden", e.ref, err)
	}
	other := backends.InstanceRef{Backend: backends.KindKubeVirt, Context: "test", Namespace: e.ns, Name: "vm-1"}
	if _, err := svc.ConsoleAccess(e.ctx, ctAlice, other); !errors.Is(err, backends.ErrForbidden) {
		t.Fatalf("console access to %s, no desktop: %v, want Forbidden", other, err)
	}
}
