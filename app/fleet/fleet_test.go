package fleet_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corral-dev/corral/app/fleet"
	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/backends/sim"
)

func TestSnapshotMergesContexts(t *testing.T) {
	f := fleet.New(fleet.Options{})
	f.Add(sim.New(sim.Options{Context: "b", Size: 3}))
	f.Add(sim.New(sim.Options{Context: "a", Size: 2}))
	if err := f.Add(sim.New(sim.Options{Context: "a"})); err == nil {
		t.Fatal("adding a context twice succeeded")
	}
	f.Refresh(context.Background())
	s := f.Snapshot()
	if len(s.Instances) != 5 || len(s.Contexts) != 2 || s.Contexts[0].Key != "sim/a" {
		t.Fatalf("snapshot: %d instances, contexts %+v", len(s.Instances), s.Contexts)
	}
	if s.Instances[0].Ref.Context != "a" || s.Instances[4].Ref.Context != "b" {
		t.Fatalf("instances not grouped by context in key order")
	}
	for _, in := range s.Instances {
		got, ok := s.Find(in.Ref)
		if !ok || got.Ref != in.Ref {
			t.Fatalf("Find(%v) = %v, %v", in.Ref, got.Ref, ok)
		}
	}
	if len(s.Partial()) != 0 {
		t.Fatalf("healthy fleet is partial: %v", s.Partial())
	}
}

func TestSlowContextDoesNotDelayOthers(t *testing.T) {
	slow := sim.New(sim.Options{Context: "slow", Size: 2, Latency: time.Hour})
	fast := sim.New(sim.Options{Context: "fast", Size: 2})
	f := fleet.New(fleet.Options{Timeout: 200 * time.Millisecond, Interval: time.Hour})
	f.Add(slow)
	f.Add(fast)
	ch, done := f.Subscribe()
	defer done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go f.Run(ctx)
	// The fast context shows up while the slow one is still being asked.
	for {
		<-ch
		s := f.Snapshot()
		st := s.Contexts[0] // sim/fast
		if st.Health == fleet.HealthOK {
			if s.Contexts[1].Health != fleet.HealthLoading && s.Contexts[1].Health != fleet.HealthDown {
				t.Fatalf("slow context is %s while still being asked", s.Contexts[1].Health)
			}
			break
		}
	}
	// Then the slow one times out and is reported down with a safe reason.
	for {
		<-ch
		s := f.Snapshot()
		if st := s.Contexts[1]; st.Health == fleet.HealthDown {
			if !strings.Contains(st.Error, "did not answer within 200ms") {
				t.Fatalf("slow context error %q", st.Error)
			}
			if p := s.Partial(); len(p) != 1 || p[0] != "sim/slow" {
				t.Fatalf("Partial() = %v", p)
			}
			return
		}
	}
}

func TestStaleKeepsLastKnownAndBreakerOpens(t *testing.T) {
	b := sim.New(sim.Options{Context: "flaky", Size: 4})
	f := fleet.New(fleet.Options{BreakerAfter: 2, BreakerOpen: time.Hour})
	f.Add(b)
	ctx := context.Background()
	f.Refresh(ctx)
	var calls atomic.Int32
	b.SetFail(func(op string) error {
		calls.Add(1)
		return backends.Failed("flaky failed", errors.New("cause with /secret/path"))
	})
	f.Refresh(ctx)
	s := f.Snapshot()
	st := s.Contexts[0]
	if st.Health != fleet.HealthStale || len(s.Instances) != 4 || st.Error != "flaky failed" {
		t.Fatalf("after one failure: %+v with %d instances", st, len(s.Instances))
	}
	f.Refresh(ctx) // second failure opens the circuit
	f.Refresh(ctx) // not asked
	if n := calls.Load(); n != 2 {
		t.Fatalf("backend asked %d times, want 2 (the circuit should be open)", n)
	}
	st = f.Snapshot().Contexts[0]
	if st.Health != fleet.HealthDown || !strings.Contains(st.Error, "in a row failed") {
		t.Fatalf("with the circuit open: %+v", st)
	}
}

func TestResolve(t *testing.T) {
	a := sim.New(sim.Options{Context: "a"})
	b := sim.New(sim.Options{Context: "b"})
	ctx := context.Background()
	for _, be := range []*sim.Backend{a, b} {
		be.Create(ctx, backends.Spec{Name: "web"})
	}
	a.Create(ctx, backends.Spec{Name: "db"})
	f := fleet.New(fleet.Options{})
	f.Add(a)
	f.Add(b)
	f.Refresh(ctx)
	s := f.Snapshot()
	ref, err := s.Resolve("db")
	if err != nil || ref.String() != "sim/a/-/db" {
		t.Fatalf("Resolve(db) = %v, %v", ref, err)
	}
	_, err = s.Resolve("web")
	var amb *fleet.Ambiguous
	if !errors.As(err, &amb) || !errors.Is(err, backends.ErrInvalid) || len(amb.Candidates) != 2 {
		t.Fatalf("Resolve(web) = %v, want *Ambiguous with 2 candidates", err)
	}
	if !strings.Contains(backends.SafeMessage(err), "sim/b/-/web") {
		t.Fatalf("ambiguity message %q does not list the candidates", backends.SafeMessage(err))
	}
	if _, err := s.Resolve("nope"); !errors.Is(err, backends.ErrNotFound) {
		t.Fatalf("Resolve(nope) = %v", err)
	}
	if ref, err := s.Resolve("sim/b/-/web"); err != nil || ref.Context != "b" {
		t.Fatalf("Resolve(canonical) = %v, %v", ref, err)
	}
	if _, err := f.Backend(backends.InstanceRef{Backend: "sim", Context: "zz", Name: "x"}); !errors.Is(err, backends.ErrNotFound) {
		t.Fatalf("Backend of an unknown context = %v", err)
	}
}

func TestQuery(t *testing.T) {
	f := fleet.New(fleet.Options{})
	f.Add(sim.New(sim.Options{Context: "lab", Size: 30}))
	f.Refresh(context.Background())
	s := f.Snapshot()
	p, err := s.Query(fleet.Query{State: "running", Sort: "memory", Desc: true, PerPage: 5, Page: 2})
	if err != nil {
		t.Fatal(err)
	}
	if p.Total != p.States[backends.StateRunning] || len(p.Instances) != 5 || p.Page != 2 {
		t.Fatalf("page = total %d, %d rows, page %d; states %v", p.Total, len(p.Instances), p.Page, p.States)
	}
	for i := 1; i < len(p.Instances); i++ {
		if p.Instances[i-1].MemoryMiB < p.Instances[i].MemoryMiB {
			t.Fatalf("not sorted by memory descending")
		}
	}
	for _, in := range p.Instances {
		if in.State != backends.StateRunning {
			t.Fatalf("state filter let %s through", in.State)
		}
	}
	p, _ = s.Query(fleet.Query{Search: "DB-", Tag: "prod"})
	for _, in := range p.Instances {
		if !strings.HasPrefix(in.Ref.Name, "db-") {
			t.Fatalf("search db- matched %s", in.Ref.Name)
		}
	}
	if p.Total == 0 {
		t.Fatal("search found nothing")
	}
	all, _ := s.Query(fleet.Query{All: true, PerPage: 5})
	if len(all.Instances) != 30 || all.Pages != 1 {
		t.Fatalf("All: %d rows on %d pages, want 30 on 1", len(all.Instances), all.Pages)
	}
	p, _ = s.Query(fleet.Query{Page: 99})
	if p.Page != p.Pages {
		t.Fatalf("page past the end = %d of %d", p.Page, p.Pages)
	}
	for _, q := range []fleet.Query{{Sort: "colour"}, {State: "exploded"}} {
		if _, err := s.Query(q); !errors.Is(err, backends.ErrInvalid) {
			t.Fatalf("Query(%+v) = %v, want ErrInvalid", q, err)
		}
	}
}

// gated lists its sim's instances, but the first List waits for release
// after reading them: a refresh that started before a change.
type gated struct {
	*sim.Backend
	calls   atomic.Int32
	started chan struct{}
	release chan struct{}
}

func (g *gated) List(ctx context.Context) ([]backends.Instance, error) {
	list, err := g.Backend.List(ctx)
	if g.calls.Add(1) == 1 {
		close(g.started)
		<-g.release
	}
	return list, err
}

// TestRefreshAfterChangeSeesIt: a refresh asked for while another runs
// (which listed before the change) must not return before a List that
// started after it, or the change would wait for the next timer.
func TestRefreshAfterChangeSeesIt(t *testing.T) {
	ctx := context.Background()
	g := &gated{Backend: sim.New(sim.Options{Context: "g", Size: 1}), started: make(chan struct{}), release: make(chan struct{})}
	f := fleet.New(fleet.Options{Timeout: time.Minute})
	f.Add(g)
	first := make(chan struct{})
	go func() { f.Refresh(ctx); close(first) }()
	<-g.started // the first List has read the state before the change
	list, err := g.Backend.List(ctx)
	if err != nil || len(list) != 1 {
		t.Fatalf("sim: %v %v", list, err)
	}
	ref, action, want := list[0].Ref, backends.ActionStop, backends.StateStopped
	if list[0].State != backends.StateRunning {
		action, want = backends.ActionStart, backends.StateRunning
	}
	if err := g.Backend.Power(ctx, ref, action); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { f.RefreshContext(ctx, "sim/g"); close(done) }()
	select {
	case <-done:
		t.Fatal("RefreshContext returned while the refresh that listed before the change was still running")
	case <-time.After(50 * time.Millisecond):
	}
	close(g.release)
	<-done
	<-first
	if in, _ := f.Snapshot().Find(ref); in.State != want {
		t.Fatalf("after RefreshContext the snapshot says %s, want %s", in.State, want)
	}
	if n := g.calls.Load(); n != 2 {
		t.Fatalf("%d Lists, want 2 (the running one, then one more)", n)
	}
}

// TestTemplateMarkReachesSnapshot: every field the pages show is part of
// what makes a refresh rebuild the snapshot (a template mark was not).
func TestTemplateMarkReachesSnapshot(t *testing.T) {
	ctx := context.Background()
	m := &marked{Backend: sim.New(sim.Options{Context: "m", Size: 1})}
	f := fleet.New(fleet.Options{})
	f.Add(m)
	f.Refresh(ctx)
	ref := f.Snapshot().Instances[0].Ref
	m.template.Store(true)
	f.RefreshContext(ctx, "sim/m")
	if in, _ := f.Snapshot().Find(ref); !in.Template {
		t.Fatal("the template mark did not reach the snapshot")
	}
}

type marked struct {
	*sim.Backend
	template atomic.Bool
}

func (m *marked) List(ctx context.Context) ([]backends.Instance, error) {
	list, err := m.Backend.List(ctx)
	for i := range list {
		list[i].Template = m.template.Load()
	}
	return list, err
}
