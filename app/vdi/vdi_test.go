package vdi_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corral-dev/corral/app/auth"
	"github.com/corral-dev/corral/app/fleet"
	"github.com/corral-dev/corral/app/tasks"
	"github.com/corral-dev/corral/app/vdi"
	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/backends/sim"
	"github.com/corral-dev/corral/store"
)

// clock is an injected clock the test moves by hand.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Set(t time.Time) { c.mu.Lock(); c.t = t; c.mu.Unlock() }

var t0 = time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)

type env struct {
	st    *store.Store
	fleet *fleet.Fleet
	lab   *sim.Backend
	tasks *tasks.Manager
	clock *clock
	svc   *vdi.Service
	fail  *failer
}

// failer makes the simulated backend fail the operations it names.
type failer struct {
	mu    sync.Mutex
	ops   map[string]int    // op -> calls left that succeed before failing; -1 fails always
	hooks map[string]func() // op -> run (outside the lock) before the op
}

// Hook runs fn before every call of op.
func (f *failer) Hook(op string, fn func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.hooks == nil {
		f.hooks = map[string]func(){}
	}
	f.hooks[op] = fn
}

func (f *failer) Set(op string, after int) { f.mu.Lock(); f.ops[op] = after; f.mu.Unlock() }
func (f *failer) Clear(op string)          { f.mu.Lock(); delete(f.ops, op); f.mu.Unlock() }
func (f *failer) check(op string) error {
	f.mu.Lock()
	hook := f.hooks[op]
	f.mu.Unlock()
	if hook != nil {
		hook()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	n, ok := f.ops[op]
	switch {
	case !ok:
		return nil
	case n > 0:
		f.ops[op] = n - 1
		return nil
	}
	return backends.Failed("simulated "+op+" failure", errors.New("injected"))
}

const golden = "sim/lab/-/gold"

func newEnv(t testing.TB, opts vdi.Options) *env {
	t.Helper()
	e := &env{st: openStore(t), clock: &clock{t: t0}, fail: &failer{ops: map[string]int{}}}
	e.lab = sim.New(sim.Options{Context: "lab", Fail: e.fail.check, Now: e.clock.Now})
	if _, err := e.lab.Create(context.Background(), backends.Spec{Name: "gold", Type: backends.TypeVM, CPUs: 1, MemoryMiB: 512}); err != nil {
		t.Fatal(err)
	}
	e.fleet = fleet.New(fleet.Options{Timeout: time.Minute})
	if err := e.fleet.Add(e.lab); err != nil {
		t.Fatal(err)
	}
	e.fleet.Refresh(context.Background())
	e.tasks = tasks.New(e.st, tasks.Options{Now: e.clock.Now})
	t.Cleanup(e.tasks.Close)
	opts.Fleet, opts.Tasks, opts.Store, opts.Now = e.fleet, e.tasks, e.st, e.clock.Now
	e.svc = vdi.New(opts)
	return e
}

// restart returns a second service over the same store and backends, as
// a new process would build it.
func (e *env) restart(opts vdi.Options) *vdi.Service {
	opts.Fleet, opts.Tasks, opts.Store, opts.Now = e.fleet, e.tasks, e.st, e.clock.Now
	return vdi.New(opts)
}

var (
	admin = tasks.Origin{Actor: "root@example.com", Surface: "cli"}
	alice = auth.Identity{Login: "alice@example.com", Via: auth.ViaTailscale}
	bob   = auth.Identity{Login: "bob@example.com", Via: auth.ViaTailscale}
	boss  = auth.Identity{Login: "boss@example.com", Via: auth.ViaTailscale, Admin: true}
)

func (e *env) pool(t *testing.T, size int, ephemeral bool) vdi.Pool {
	t.Helper()
	p, err := e.svc.CreatePool(context.Background(), admin, vdi.PoolRequest{Name: "desk", Golden: golden, Size: size, Ephemeral: ephemeral})
	if err != nil {
		t.Fatalf("create pool: %v", err)
	}
	return p
}

func (e *env) state(t *testing.T, name string) backends.State {
	t.Helper()
	in, err := e.lab.Get(context.Background(), backends.InstanceRef{Backend: backends.KindSim, Context: "lab", Name: name})
	if err != nil {
		t.Fatalf("get %s: %v", name, err)
	}
	return in.State
}

// audit returns the audit rows' "actor action target outcome", oldest first.
func (e *env) audit(t *testing.T) []string {
	t.Helper()
	rows, err := e.st.ListAudit(context.Background(), store.AuditFilter{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for i := len(rows) - 1; i >= 0; i-- {
		r := rows[i]
		out = append(out, r.Actor+" "+r.Action+" "+r.Target+" "+r.Outcome)
	}
	return out
}

func hasAudit(rows []string, want string) bool {
	for _, r := range rows {
		if r == want {
			return true
		}
	}
	return false
}

// waitTask waits for a release task to end and returns its status.
func (e *env) waitTask(t *testing.T, id string) store.Task {
	t.Helper()
	for range 500 {
		tk, _, err := e.tasks.Get(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if tk.Status != store.TaskRunning {
			return tk
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("task %s did not end", id)
	return store.Task{}
}

func TestPoolCreateListDelete(t *testing.T) {
	e := newEnv(t, vdi.Options{})
	ctx := context.Background()
	p := e.pool(t, 3, false)
	if p.ID != "vm/-/desk" || len(p.Members) != 3 || p.Golden != golden {
		t.Fatalf("pool = %+v", p)
	}
	for i, m := range p.Members {
		want := "vm/-/desk-" + string(rune('1'+i))
		if m.Desktop != want || m.State != "stopped" || m.Holder != "" {
			t.Errorf("member %d = %+v, want %s stopped and free", i, m, want)
		}
	}
	for _, tc := range []struct {
		name string
		req  vdi.PoolRequest
		kind error
	}{
		{"taken name", vdi.PoolRequest{Name: "desk", Golden: golden, Size: 1}, backends.ErrConflict},
		{"size zero", vdi.PoolRequest{Name: "d2", Golden: golden, Size: 0}, backends.ErrInvalid},
		{"no golden", vdi.PoolRequest{Name: "d2", Golden: "sim/lab/-/nope", Size: 1}, backends.ErrNotFound},
		{"bad name", vdi.PoolRequest{Name: "Bad Name", Golden: golden, Size: 1}, backends.ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := e.svc.CreatePool(ctx, admin, tc.req); !errors.Is(err, tc.kind) {
				t.Fatalf("err = %v, want kind %v", err, tc.kind)
			}
		})
	}
	pools, err := e.svc.Pools(ctx)
	if err != nil || len(pools) != 1 {
		t.Fatalf("pools = %+v, %v", pools, err)
	}
	if _, err := e.svc.Claim(ctx, alice, "rest", "vm/-/desk"); err != nil {
		t.Fatal(err)
	}
	if err := e.svc.DeletePool(ctx, admin, "vm/-/desk"); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if pools, _ := e.svc.Pools(ctx); len(pools) != 0 {
		t.Fatalf("pools after delete = %+v", pools)
	}
	for _, n := range []string{"desk-1", "desk-2", "desk-3"} {
		if _, err := e.lab.Get(ctx, backends.InstanceRef{Backend: backends.KindSim, Context: "lab", Name: n}); !errors.Is(err, backends.ErrNotFound) {
			t.Errorf("%s after pool delete: %v", n, err)
		}
	}
	if cs, _ := e.st.VDIClaims(ctx, ""); len(cs) != 0 {
		t.Errorf("claims after pool delete: %+v", cs)
	}
	if e.state(t, "gold") != backends.StateStopped {
		t.Error("the golden VM was touched")
	}
}

func TestPoolCreateFailureLeavesNothing(t *testing.T) {
	e := newEnv(t, vdi.Options{})
	e.fail.Set("clone", 2) // the third clone fails
	_, err := e.svc.CreatePool(context.Background(), admin, vdi.PoolRequest{Name: "desk", Golden: golden, Size: 3})
	if !errors.Is(err, backends.ErrFailed) {
		t.Fatalf("err = %v, want a backend failure", err)
	}
	if pools, _ := e.svc.Pools(context.Background()); len(pools) != 0 {
		t.Fatalf("a half pool is left: %+v", pools)
	}
	list, _ := e.lab.List(context.Background())
	if len(list) != 1 {
		t.Fatalf("clones left behind: %d instances", len(list))
	}
}

func TestClaimStartRelease(t *testing.T) {
	e := newEnv(t, vdi.Options{})
	ctx := context.Background()
	e.pool(t, 2, false)
	d, err := e.svc.Claim(ctx, alice, "rest", "vm/-/desk")
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	if d.Owner != alice.Login || !d.Running || d.Phase != "Running" || d.PoolID != "vm/-/desk" || d.SessionID == "" || d.StartError != "" {
		t.Fatalf("desktop = %+v", d)
	}
	again, err := e.svc.Claim(ctx, alice, "rest", "vm/-/desk")
	if err != nil || again.ID != d.ID || again.SessionID != d.SessionID {
		t.Fatalf("retry = %+v, %v; want the same desktop", again, err)
	}
	db, err := e.svc.Claim(ctx, bob, "rest", "vm/-/desk")
	if err != nil || db.ID == d.ID {
		t.Fatalf("bob = %+v, %v", db, err)
	}
	carol := auth.Identity{Login: "carol@example.com", Via: auth.ViaOIDC}
	if _, err := e.svc.Claim(ctx, carol, "rest", "vm/-/desk"); !errors.Is(err, backends.ErrConflict) {
		t.Fatalf("claim of a full pool: %v, want Conflict", err)
	}
	// Holder or admin.
	if _, err := e.svc.Desktop(ctx, bob, d.ID); !errors.Is(err, backends.ErrForbidden) {
		t.Fatalf("bob reading alice's desktop: %v, want Forbidden", err)
	}
	if _, err := e.svc.Release(ctx, bob, "rest", d.ID); !errors.Is(err, backends.ErrForbidden) {
		t.Fatalf("bob releasing alice's desktop: %v, want Forbidden", err)
	}
	if got, err := e.svc.Desktop(ctx, boss, d.ID); err != nil || got.Owner != alice.Login {
		t.Fatalf("admin read = %+v, %v", got, err)
	}
	if mine, _ := e.svc.Desktops(ctx, alice, false); len(mine) != 1 || mine[0].ID != d.ID {
		t.Fatalf("alice's desktops = %+v", mine)
	}
	if _, err := e.svc.Desktops(ctx, alice, true); !errors.Is(err, backends.ErrForbidden) {
		t.Fatalf("all desktops for a user: %v", err)
	}
	if all, _ := e.svc.Desktops(ctx, boss, true); len(all) != 2 {
		t.Fatalf("all desktops = %+v", all)
	}
	ps, _ := e.svc.BrokerPools(ctx)
	if len(ps) != 1 || ps[0].Members != 2 || ps[0].Claimed != 2 || ps[0].Free != 0 {
		t.Fatalf("pools = %+v", ps)
	}
	// alice releases: the member stops, the claim ends, carol gets it.
	tk, err := e.svc.Release(ctx, alice, "rest", d.ID)
	if err != nil {
		t.Fatal(err)
	}
	if done := e.waitTask(t, tk.ID); done.Status != store.TaskDone {
		t.Fatalf("release task = %+v", done)
	}
	member := strings.TrimPrefix(d.ID, "vm/-/")
	if st := e.state(t, member); st != backends.StateStopped {
		t.Fatalf("released member is %s", st)
	}
	if _, err := e.svc.Desktop(ctx, alice, d.ID); !errors.Is(err, backends.ErrNotFound) {
		t.Fatalf("released desktop: %v, want NotFound", err)
	}
	dc, err := e.svc.Claim(ctx, carol, "rest", "vm/-/desk")
	if err != nil || dc.ID != d.ID || dc.SessionID == d.SessionID {
		t.Fatalf("carol = %+v, %v; want alice's old desktop in a new session", dc, err)
	}
	// An admin releases bob's desktop: a force-release naming bob.
	tk, err = e.svc.Release(ctx, boss, "rest", db.ID)
	if err != nil {
		t.Fatal(err)
	}
	e.waitTask(t, tk.ID)
	rows := e.audit(t)
	for _, want := range []string{
		"alice@example.com vdi claim vm/-/desk ok",
		"carol@example.com vdi claim vm/-/desk refused",
		"alice@example.com vdi release " + d.ID + " ok",
		"boss@example.com vdi force-release " + db.ID + " (held by bob@example.com) ok",
	} {
		if !hasAudit(rows, want) {
			t.Errorf("audit lacks %q:\n%s", want, strings.Join(rows, "\n"))
		}
	}
}

func TestClaimKeepsDesktopWhenStartFails(t *testing.T) {
	e := newEnv(t, vdi.Options{})
	ctx := context.Background()
	e.pool(t, 2, false)
	e.fail.Set("power", 0)
	d, err := e.svc.Claim(ctx, alice, "rest", "vm/-/desk")
	if err != nil {
		t.Fatalf("a claim whose start fails still succeeds: %v", err)
	}
	if d.StartError == "" || d.Running {
		t.Fatalf("desktop = %+v, want a startError", d)
	}
	if strings.Contains(d.StartError, "injected") {
		t.Errorf("startError carries the backend's text: %q", d.StartError)
	}
	if db, err := e.svc.Claim(ctx, bob, "rest", "vm/-/desk"); err != nil || db.ID == d.ID {
		t.Fatalf("bob got %+v, %v; alice keeps hers", db, err)
	}
	if _, err := e.svc.Start(ctx, alice, "rest", d.ID); err == nil {
		t.Fatal("start succeeded while the backend fails")
	}
	e.fail.Clear("power")
	got, err := e.svc.Start(ctx, alice, "rest", d.ID)
	if err != nil || !got.Running {
		t.Fatalf("retried start = %+v, %v", got, err)
	}
	if !hasAudit(e.audit(t), "alice@example.com vdi start "+d.ID+" ok") {
		t.Error("no audit row for the start")
	}
}

func TestReleaseFailureKeepsClaim(t *testing.T) {
	e := newEnv(t, vdi.Options{})
	ctx := context.Background()
	e.pool(t, 1, false)
	d, _ := e.svc.Claim(ctx, alice, "rest", "vm/-/desk")
	e.fail.Set("power", 0)
	tk, _ := e.svc.Release(ctx, alice, "rest", d.ID)
	if done := e.waitTask(t, tk.ID); done.Status != store.TaskError {
		t.Fatalf("release with a failing stop = %+v", done)
	}
	if got, err := e.svc.Desktop(ctx, alice, d.ID); err != nil || got.Owner != alice.Login {
		t.Fatalf("after a failed release: %+v, %v; alice keeps it", got, err)
	}
	e.fail.Clear("power")
	tk, _ = e.svc.Release(ctx, alice, "rest", d.ID)
	if done := e.waitTask(t, tk.ID); done.Status != store.TaskDone {
		t.Fatalf("retried release = %+v", done)
	}
}

func TestEphemeralReleaseRecreates(t *testing.T) {
	e := newEnv(t, vdi.Options{})
	ctx := context.Background()
	e.pool(t, 1, true)
	d, _ := e.svc.Claim(ctx, alice, "rest", "vm/-/desk")
	ref := backends.InstanceRef{Backend: backends.KindSim, Context: "lab", Name: "desk-1"}
	if err := e.lab.SetTag(ctx, ref, "dirty", true); err != nil {
		t.Fatal(err)
	}
	e.clock.Set(t0.Add(time.Hour))
	tk, _ := e.svc.Release(ctx, alice, "rest", d.ID)
	if done := e.waitTask(t, tk.ID); done.Status != store.TaskDone {
		t.Fatalf("release = %+v", done)
	}
	in, err := e.lab.Get(ctx, ref)
	if err != nil {
		t.Fatalf("the member was not recreated: %v", err)
	}
	if len(in.Tags) != 0 || in.State != backends.StateStopped || !in.Created.Equal(t0.Add(time.Hour)) {
		t.Fatalf("member after release = %+v; want a fresh clone of the golden VM", in)
	}
	if db, err := e.svc.Claim(ctx, bob, "rest", "vm/-/desk"); err != nil || db.ID != d.ID {
		t.Fatalf("bob = %+v, %v", db, err)
	}
}

func TestAssignUnassign(t *testing.T) {
	e := newEnv(t, vdi.Options{})
	ctx := context.Background()
	e.pool(t, 1, false)
	d, err := e.svc.Assign(ctx, admin, "vm/-/desk", "alice@example.com")
	if err != nil || d.Owner != "alice@example.com" || !d.Running {
		t.Fatalf("assign = %+v, %v", d, err)
	}
	if _, err := e.svc.Assign(ctx, admin, "vm/-/desk", vdi.ReconcilerIdentity); !errors.Is(err, backends.ErrInvalid) {
		t.Fatalf("assign to the reserved identity: %v", err)
	}
	if err := e.svc.Unassign(ctx, admin, d.ID); err != nil {
		t.Fatalf("unassign: %v", err)
	}
	if e.state(t, "desk-1") != backends.StateStopped {
		t.Fatal("unassigned member still runs")
	}
	if err := e.svc.Unassign(ctx, admin, d.ID); !errors.Is(err, backends.ErrConflict) {
		t.Fatalf("second unassign: %v, want Conflict", err)
	}
	if !hasAudit(e.audit(t), "root@example.com vdi force-release "+d.ID+" (held by alice@example.com) ok") {
		t.Errorf("audit:\n%s", strings.Join(e.audit(t), "\n"))
	}
}
