package schedule_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corral-dev/corral/app/fleet"
	"github.com/corral-dev/corral/app/folders"
	"github.com/corral-dev/corral/app/instances"
	"github.com/corral-dev/corral/app/schedule"
	"github.com/corral-dev/corral/app/tasks"
	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/backends/sim"
	"github.com/corral-dev/corral/store"
)

// clock is an injected clock tests move by hand.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Set(t time.Time) { c.mu.Lock(); c.t = t; c.mu.Unlock() }

var berlin, _ = time.LoadLocation("Europe/Berlin")

// env is the schedule use case over real parts: simulated contexts in a
// fleet, SQLite in t.TempDir(), the task manager, the instances and
// folders use cases.
type env struct {
	ctx   context.Context
	clock *clock
	store *store.Store
	fleet *fleet.Fleet
	tasks *tasks.Manager
	inst  *instances.Service
	fo    *folders.Service
	sims  map[string]*sim.Backend
	svc   *schedule.Service
	opts  schedule.Options
}

func newEnv(t testing.TB, opts schedule.Options, sims ...*sim.Backend) *env {
	t.Helper()
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	c := &clock{t: time.Date(2026, 6, 1, 8, 0, 0, 0, berlin)}
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "c.db"), store.Options{Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	f := fleet.New(fleet.Options{Logger: log})
	e := &env{ctx: ctx, clock: c, store: st, fleet: f, sims: map[string]*sim.Backend{}}
	for _, b := range sims {
		if err := f.Add(b); err != nil {
			t.Fatal(err)
		}
		e.sims[b.Context()] = b
	}
	f.Refresh(ctx)
	e.tasks = tasks.New(st, tasks.Options{Logger: log, Now: c.Now})
	t.Cleanup(e.tasks.Close)
	e.inst = instances.New(f, e.tasks, st, log)
	e.fo = folders.New(st, f, e.tasks, e.inst, folders.Options{Now: c.Now})
	opts.Now, opts.Logger = c.Now, log
	e.opts = opts
	e.svc = schedule.New(st, f, e.tasks, e.fo, e.inst, opts)
	return e
}

// restart builds a new service over the same store, as a restarted
// server would.
func (e *env) restart() {
	e.svc = schedule.New(e.store, e.fleet, e.tasks, e.fo, e.inst, e.opts)
}

var admin = tasks.Origin{Actor: "alice", Surface: "cli"}

func (e *env) create(t *testing.T, req schedule.Request) store.Schedule {
	t.Helper()
	_, sc, err := e.svc.Create(e.ctx, admin, req)
	if err != nil {
		t.Fatalf("create %+v: %v", req, err)
	}
	return sc
}

func (e *env) tick(t *testing.T, at time.Time) []schedule.Fired {
	t.Helper()
	e.clock.Set(at)
	fired, err := e.svc.Tick(e.ctx, at)
	if err != nil {
		t.Fatal(err)
	}
	return fired
}

func (e *env) state(t *testing.T, ref string) backends.State {
	t.Helper()
	r, err := backends.ParseRef(ref)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := e.fleet.Backend(r)
	in, err := b.Get(e.ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	return in.State
}

func at(h, m int) time.Time { return time.Date(2026, 6, 1, h, m, 0, 0, berlin) }

// Names of the simulated instances of context lab: index 0 runs, index
// 2 is stopped (see backends/sim).
const (
	labRunning = "sim/lab/-/web-lab-0000"
	labStopped = "sim/lab/-/cache-lab-0002"
)

// TestTickFiresOnce: a power schedule fires at its boundary through the
// instances use case (the instance stops, the run is a task of surface
// "schedule", audited), once: a later tick and a restarted service do
// not fire it again.
func TestTickFiresOnce(t *testing.T) {
	e := newEnv(t, schedule.Options{}, sim.New(sim.Options{Context: "lab", Size: 5}))
	sc := e.create(t, schedule.Request{Ref: labRunning, Kind: "power", Action: "stop", Cron: "0 9 * * 1-5", TZ: "Europe/Berlin"})

	if fired := e.tick(t, at(8, 59)); len(fired) != 0 {
		t.Fatalf("before the boundary: %+v", fired)
	}
	if st := e.state(t, labRunning); st != backends.StateRunning {
		t.Fatalf("state before = %s", st)
	}
	fired := e.tick(t, at(9, 0).Add(30*time.Second))
	if len(fired) != 1 || fired[0].ID != sc.ID || fired[0].Result != schedule.ResultOK || !fired[0].Due.Equal(at(9, 0)) {
		t.Fatalf("at the boundary: %+v", fired)
	}
	if st := e.state(t, labRunning); st != backends.StateStopped {
		t.Fatalf("state after = %s", st)
	}
	task, _, err := e.tasks.Get(e.ctx, fired[0].Task)
	if err != nil || task.Surface != "schedule" || task.Action != "schedule stop" || task.Status != store.TaskDone {
		t.Fatalf("run task = %+v, %v", task, err)
	}
	got, _ := e.svc.Get(e.ctx, sc.ID)
	if got.LastResult != schedule.ResultOK || got.LastTask != task.ID || !got.LastRun.Equal(at(9, 0).Add(30*time.Second)) {
		t.Fatalf("recorded run = %+v", got.Schedule)
	}
	if want := time.Date(2026, 6, 2, 9, 0, 0, 0, berlin); !got.Next.Equal(want) {
		t.Errorf("next = %v, want %v", got.Next, want)
	}
	audit, _ := e.tasks.Audit(e.ctx, store.AuditFilter{})
	if !slices.ContainsFunc(audit, func(a store.AuditEntry) bool {
		return a.Surface == "schedule" && a.Action == "schedule stop" && a.Target == labRunning && a.Outcome == "ok"
	}) {
		t.Errorf("no audit row of the run in %+v", audit)
	}

	// Started by hand again: neither a later tick nor a restart fires the
	// 09:00 boundary a second time.
	if _, err := e.inst.Power(e.ctx, admin, labRunning, "start"); err != nil {
		t.Fatal(err)
	}
	if fired := e.tick(t, at(9, 1)); len(fired) != 0 {
		t.Fatalf("second tick fired %+v", fired)
	}
	e.restart()
	if fired := e.tick(t, at(9, 3)); len(fired) != 0 {
		t.Fatalf("tick after a restart fired %+v", fired)
	}
	if st := e.state(t, labRunning); st != backends.StateRunning {
		t.Fatalf("the boundary was replayed: state %s", st)
	}
}

// TestTickMissedAndSkipped: a boundary older than the grace window is
// recorded as missed and not run late; a stopped instance asked to stop
// is skipped, not failed.
func TestTickMissedAndSkipped(t *testing.T) {
	e := newEnv(t, schedule.Options{Grace: 10 * time.Minute}, sim.New(sim.Options{Context: "lab", Size: 5}))
	late := e.create(t, schedule.Request{Ref: labRunning, Kind: "power", Action: "stop", Cron: "0 9 * * *", TZ: "Europe/Berlin"})
	skip := e.create(t, schedule.Request{Ref: labStopped, Kind: "power", Action: "shutdown", Cron: "30 9 * * *", TZ: "Europe/Berlin"})

	// The host slept through 09:00 and wakes at 09:35.
	fired := e.tick(t, at(9, 35))
	if len(fired) != 2 {
		t.Fatalf("fired %+v", fired)
	}
	if f := fired[0]; f.ID != late.ID || f.Result != schedule.ResultMissed || f.Task != "" || !strings.Contains(f.Message, "not run late") {
		t.Errorf("late boundary: %+v", f)
	}
	if st := e.state(t, labRunning); st != backends.StateRunning {
		t.Errorf("a missed boundary ran: state %s", st)
	}
	if f := fired[1]; f.ID != skip.ID || f.Result != schedule.ResultSkipped || !strings.Contains(f.Message, "already stopped") {
		t.Errorf("stop of a stopped instance: %+v", f)
	}
	got, _ := e.svc.Get(e.ctx, late.ID)
	if got.LastResult != schedule.ResultMissed {
		t.Errorf("missed not recorded: %+v", got.Schedule)
	}
}

// TestTickFolderFansOut: a folder schedule runs the folder bulk action on
// every member of the folder and its subfolders.
func TestTickFolderFansOut(t *testing.T) {
	e := newEnv(t, schedule.Options{}, sim.New(sim.Options{Context: "lab", Size: 10}), sim.New(sim.Options{Context: "edge", Size: 5}))
	for _, m := range []struct{ path, ref string }{
		{"prod", "sim/lab/-/cache-lab-0002"},      // stopped
		{"prod/db", "sim/lab/-/db-lab-0001"},      // running
		{"prod/db", "sim/edge/-/cache-edge-0002"}, // stopped, another context
		{"dev", "sim/lab/-/build-lab-0003"},       // not in prod
	} {
		if err := e.store.CreateFolder(e.ctx, m.path); err != nil && !errors.Is(err, store.ErrExists) {
			t.Fatal(err)
		}
		if err := e.store.SetFolderMember(e.ctx, m.path, m.ref); err != nil {
			t.Fatal(err)
		}
	}
	sc := e.create(t, schedule.Request{Folder: "prod", Kind: "power", Action: "start", Cron: "0 7 * * *", TZ: "UTC"})
	fired := e.tick(t, time.Date(2026, 6, 1, 7, 0, 5, 0, time.UTC))
	if len(fired) != 1 || fired[0].ID != sc.ID || fired[0].Result != schedule.ResultOK || fired[0].Message != "2 ok, 1 skipped" {
		t.Fatalf("fired %+v", fired)
	}
	for _, ref := range []string{"sim/lab/-/cache-lab-0002", "sim/lab/-/db-lab-0001", "sim/edge/-/cache-edge-0002"} {
		if st := e.state(t, ref); st != backends.StateRunning {
			t.Errorf("%s = %s after the folder's start", ref, st)
		}
	}
	if st := e.state(t, "sim/lab/-/build-lab-0003"); st != backends.StateRunning {
		t.Errorf("a member of another folder changed: %s", st)
	}
}

// TestTickUnreachableRetried: a context that does not answer records
// "unreachable", keeps the schedule, does not hold the other schedules
// of the tick, and is run again on the next tick once it answers.
func TestTickUnreachableRetried(t *testing.T) {
	flaky := sim.New(sim.Options{Context: "flaky", Size: 3})
	slow := sim.New(sim.Options{Context: "slow", Size: 3})
	e := newEnv(t, schedule.Options{DispatchTimeout: 300 * time.Millisecond, Grace: 10 * time.Minute},
		sim.New(sim.Options{Context: "lab", Size: 5}), flaky, slow)
	down := e.create(t, schedule.Request{Ref: "sim/flaky/-/web-flaky-0000", Kind: "power", Action: "stop", Cron: "0 9 * * *", TZ: "Europe/Berlin"})
	hung := e.create(t, schedule.Request{Ref: "sim/slow/-/web-slow-0000", Kind: "power", Action: "stop", Cron: "0 9 * * *", TZ: "Europe/Berlin"})
	ok := e.create(t, schedule.Request{Ref: labRunning, Kind: "power", Action: "stop", Cron: "0 9 * * *", TZ: "Europe/Berlin"})

	var failing atomic.Bool
	failing.Store(true)
	flaky.SetFail(func(op string) error {
		if op == "power" && failing.Load() {
			return backends.Unavailable("sim/flaky", errors.New("connection refused"))
		}
		return nil
	})
	slow.SetLatency(2 * time.Second) // longer than the dispatch timeout

	fired := e.tick(t, at(9, 0))
	results := map[int64]schedule.Fired{}
	for _, f := range fired {
		results[f.ID] = f
	}
	if f := results[down.ID]; f.Result != schedule.ResultUnreachable || !strings.Contains(f.Message, "sim/flaky") {
		t.Errorf("unreachable context: %+v", f)
	}
	if f := results[hung.ID]; f.Result != schedule.ResultUnreachable {
		t.Errorf("context slower than the dispatch timeout: %+v", f)
	}
	if f := results[ok.ID]; f.Result != schedule.ResultOK {
		t.Errorf("the healthy context's schedule: %+v", f)
	}
	if st := e.state(t, labRunning); st != backends.StateStopped {
		t.Errorf("the healthy context's instance = %s", st)
	}
	list, _ := e.svc.List(e.ctx)
	if len(list) != 3 {
		t.Fatalf("schedules after an unreachable run: %d", len(list))
	}
	got, _ := e.svc.Get(e.ctx, down.ID)
	if got.LastResult != schedule.ResultUnreachable || got.LastTask == "" {
		t.Errorf("recorded: %+v", got.Schedule)
	}

	// Next tick, the context answers: the same boundary runs now.
	failing.Store(false)
	slow.SetLatency(0)
	e.fleet.Refresh(e.ctx)
	fired = e.tick(t, at(9, 1))
	results = map[int64]schedule.Fired{}
	for _, f := range fired {
		results[f.ID] = f
	}
	if f := results[down.ID]; f.Result != schedule.ResultOK || !f.Due.Equal(at(9, 0)) {
		t.Errorf("retry: %+v", f)
	}
	if f := results[hung.ID]; f.Result != schedule.ResultOK {
		t.Errorf("retry of the slow context: %+v", f)
	}
	if _, again := results[ok.ID]; again {
		t.Errorf("the schedule that succeeded fired again")
	}
	if st := e.state(t, "sim/flaky/-/web-flaky-0000"); st != backends.StateStopped {
		t.Errorf("after the retry: %s", st)
	}
}

// TestSnapshotRetention: a snapshot schedule takes auto-<boundary> and
// prunes the oldest auto- snapshots of that ref beyond keep; hand-named
// snapshots and a same-named instance in another context are untouched.
func TestSnapshotRetention(t *testing.T) {
	var n atomic.Int64
	tick := func() time.Time {
		return time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(n.Add(1)) * time.Minute)
	}
	lab := sim.New(sim.Options{Context: "lab", Now: tick})
	lab2 := sim.New(sim.Options{Context: "lab2", Now: tick})
	e := newEnv(t, schedule.Options{}, lab, lab2)
	ctx := e.ctx
	for _, b := range []*sim.Backend{lab, lab2} {
		if _, err := b.Create(ctx, backends.Spec{Name: "twin"}); err != nil {
			t.Fatal(err)
		}
	}
	e.fleet.Refresh(ctx)
	ref := backends.InstanceRef{Backend: backends.KindSim, Context: "lab", Name: "twin"}
	other := backends.InstanceRef{Backend: backends.KindSim, Context: "lab2", Name: "twin"}
	for _, name := range []string{"auto-old1", "manual", "auto-old2", "auto-old3"} {
		if _, err := lab.CreateSnapshot(ctx, ref, name); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"auto-old1", "auto-old2"} {
		if _, err := lab2.CreateSnapshot(ctx, other, name); err != nil {
			t.Fatal(err)
		}
	}
	sc := e.create(t, schedule.Request{Ref: "sim/lab/-/twin", Kind: "snapshot", Cron: "0 3 * * *", TZ: "UTC", Keep: 2})
	fired := e.tick(t, time.Date(2026, 6, 2, 3, 0, 10, 0, time.UTC))
	if len(fired) != 1 || fired[0].ID != sc.ID || fired[0].Result != schedule.ResultOK {
		t.Fatalf("fired %+v", fired)
	}
	names := func(b *sim.Backend, r backends.InstanceRef) string {
		list, err := b.Snapshots(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, s := range list {
			out = append(out, s.Name)
		}
		slices.Sort(out)
		return strings.Join(out, " ")
	}
	if got, want := names(lab, ref), "auto-20260602-0300 auto-old3 manual"; got != want {
		t.Errorf("lab twin snapshots = %q, want %q", got, want)
	}
	if got, want := names(lab2, other), "auto-old1 auto-old2"; got != want {
		t.Errorf("the other context's twin = %q, want %q (untouched)", got, want)
	}
	if !strings.Contains(fired[0].Message, "pruned auto-old1, auto-old2") {
		t.Errorf("message %q", fired[0].Message)
	}
}

// TestCreateRefusals: bad input is an Invalid error (400) that says what
// is accepted, and is audited as refused; nothing is stored.
func TestCreateRefusals(t *testing.T) {
	e := newEnv(t, schedule.Options{}, sim.New(sim.Options{Context: "lab", Size: 5}))
	for _, tc := range []struct {
		name string
		req  schedule.Request
		want string
	}{
		{"bad cron", schedule.Request{Ref: labRunning, Kind: "power", Action: "stop", Cron: "@daily"}, "descriptors"},
		{"bad zone", schedule.Request{Ref: labRunning, Kind: "power", Action: "stop", Cron: "0 9 * * *", TZ: "Berlin"}, "IANA"},
		{"unknown instance", schedule.Request{Ref: "sim/lab/-/nope", Kind: "power", Action: "stop", Cron: "0 9 * * *"}, "does not exist in context sim/lab"},
		{"unknown context", schedule.Request{Ref: "sim/mars/-/web", Kind: "power", Action: "stop", Cron: "0 9 * * *"}, "not configured"},
		{"unknown bare name", schedule.Request{Ref: "nope", Kind: "power", Action: "stop", Cron: "0 9 * * *"}, "canonical ref"},
		{"unknown folder", schedule.Request{Folder: "prod", Kind: "power", Action: "stop", Cron: "0 9 * * *"}, "folder prod does not exist"},
		{"no target", schedule.Request{Kind: "power", Action: "stop", Cron: "0 9 * * *"}, "a target is required"},
		{"both targets", schedule.Request{Ref: labRunning, Folder: "prod", Kind: "power", Action: "stop", Cron: "0 9 * * *"}, "not both"},
		{"bad action", schedule.Request{Ref: labRunning, Kind: "power", Action: "restart", Cron: "0 9 * * *"}, "start, stop, shutdown"},
		{"bad kind", schedule.Request{Ref: labRunning, Kind: "backup", Cron: "0 9 * * *"}, "power and snapshot"},
		{"no keep", schedule.Request{Ref: labRunning, Kind: "snapshot", Cron: "0 9 * * *"}, "keeps 1 to 100"},
		{"in-cluster on sim", schedule.Request{Ref: labRunning, Kind: "power", Action: "stop", Cron: "0 9 * * *", InCluster: true}, "CronJob controller"},
		{"in-cluster folder", schedule.Request{Folder: "x", Kind: "power", Action: "stop", Cron: "0 9 * * *", InCluster: true}, "folder x does not exist"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := e.svc.Create(e.ctx, admin, tc.req)
			if !errors.Is(err, backends.ErrInvalid) && !errors.Is(err, backends.ErrUnsupported) {
				t.Fatalf("err = %v, want Invalid or a refusal", err)
			}
			if msg := backends.SafeMessage(err); !strings.Contains(msg, tc.want) {
				t.Errorf("message %q lacks %q", msg, tc.want)
			}
		})
	}
	if list, _ := e.svc.List(e.ctx); len(list) != 0 {
		t.Fatalf("refused requests stored %d schedules", len(list))
	}
	audit, _ := e.tasks.Audit(e.ctx, store.AuditFilter{})
	if len(audit) == 0 || audit[0].Action != "schedule create" || audit[0].Outcome != "refused" {
		t.Errorf("refusals not audited: %+v", audit)
	}
}
