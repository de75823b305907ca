package folders_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corral-dev/corral/app/fleet"
	"github.com/corral-dev/corral/app/folders"
	"github.com/corral-dev/corral/app/instances"
	"github.com/corral-dev/corral/app/tasks"
	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/backends/sim"
	"github.com/corral-dev/corral/store"
)

var origin = tasks.Origin{Actor: "alice", Surface: "rest"}

type env struct {
	svc   *folders.Service
	st    *store.Store
	fleet *fleet.Fleet
}

func newEnv(t *testing.T, opts folders.Options, bs ...backends.Backend) *env {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "c.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	f := fleet.New(fleet.Options{Timeout: time.Minute})
	for _, b := range bs {
		if err := f.Add(b); err != nil {
			t.Fatal(err)
		}
	}
	f.Refresh(ctx)
	tm := tasks.New(st, tasks.Options{})
	t.Cleanup(tm.Close)
	in := instances.New(f, tm, st, nil)
	return &env{svc: folders.New(st, f, tm, in, opts), st: st, fleet: f}
}

// byState returns the refs of the fleet's instances in state st.
func (e *env) byState(st backends.State) []string {
	var out []string
	for _, in := range e.fleet.Snapshot().Instances {
		if in.State == st {
			out = append(out, in.Ref.String())
		}
	}
	return out
}

func (e *env) folder(t *testing.T, path string, refs ...string) {
	t.Helper()
	ctx := context.Background()
	if _, err := e.svc.Create(ctx, origin, path); err != nil && !errors.Is(err, backends.ErrConflict) {
		t.Fatal(err)
	}
	for _, r := range refs {
		if _, err := e.svc.AddMember(ctx, origin, path, r); err != nil {
			t.Fatal(err)
		}
	}
}

func TestValidation(t *testing.T) {
	e := newEnv(t, folders.Options{}, sim.New(sim.Options{Context: "lab", Size: 2}))
	ctx := context.Background()
	e.folder(t, "prod/web")
	tests := []struct {
		name string
		do   func() error
		want error
		msg  string
	}{
		{"upper case", func() error { _, err := e.svc.Create(ctx, origin, "Prod"); return err }, backends.ErrInvalid, "[a-z0-9][a-z0-9-._]*"},
		{"empty segment", func() error { _, err := e.svc.Create(ctx, origin, "a//b"); return err }, backends.ErrInvalid, "invalid segment"},
		{"too deep", func() error { _, err := e.svc.Create(ctx, origin, "1/2/3/4/5/6/7/8/9"); return err }, backends.ErrInvalid, "9 levels"},
		{"exists", func() error { _, err := e.svc.Create(ctx, origin, "prod"); return err }, backends.ErrConflict, "already exists"},
		{"move under itself", func() error { _, err := e.svc.Move(ctx, origin, "prod", "prod/web/x"); return err }, backends.ErrInvalid, "under itself"},
		{"move onto existing", func() error { _, err := e.svc.Move(ctx, origin, "prod/web", "prod"); return err }, backends.ErrConflict, "prod already exists"},
		{"delete unknown", func() error { _, err := e.svc.Delete(ctx, origin, "nope"); return err }, backends.ErrNotFound, "does not exist"},
		{"member of unknown folder", func() error { _, err := e.svc.AddMember(ctx, origin, "nope", "sim/lab/-/x"); return err }, backends.ErrNotFound, "does not exist"},
		{"unknown bare name", func() error { _, err := e.svc.AddMember(ctx, origin, "prod", "ghost"); return err }, backends.ErrNotFound, "ghost"},
		{"unknown action", func() error {
			_, _, err := e.svc.Action(ctx, origin, folders.Selection{Path: "prod"}, "explode")
			return err
		}, backends.ErrInvalid, "accepted are start, stop, shutdown, restart, pause, resume, snapshot"},
		{"action on unknown folder", func() error {
			_, _, err := e.svc.Action(ctx, origin, folders.Selection{Path: "nope"}, "stop")
			return err
		}, backends.ErrNotFound, "does not exist"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.do()
			if !errors.Is(err, tc.want) || !strings.Contains(backends.SafeMessage(err), tc.msg) {
				t.Fatalf("err = %v (safe %q), want %v containing %q", err, backends.SafeMessage(err), tc.want, tc.msg)
			}
		})
	}
}

func TestTreeAndAudit(t *testing.T) {
	lab := sim.New(sim.Options{Context: "lab", Size: 5})
	e := newEnv(t, folders.Options{}, lab)
	ctx := context.Background()
	running := e.byState(backends.StateRunning)
	e.folder(t, "prod/web", running[0], "sim/lab/-/gone")
	e.folder(t, "prod", running[1])
	tree, err := e.svc.Tree(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(tree.Folders) != 1 || tree.Folders[0].Path != "prod" || len(tree.Folders[0].Children) != 1 {
		t.Fatalf("tree = %+v", tree.Folders)
	}
	web := tree.Folders[0].Children[0]
	if web.Name != "web" || len(web.Members) != 2 {
		t.Fatalf("web = %+v", web)
	}
	states := map[string]string{}
	for _, m := range web.Members {
		states[m.Ref] = m.State
	}
	if states[running[0]] != "running" || states["sim/lab/-/gone"] != folders.StateMissing {
		t.Fatalf("member states = %v", states)
	}
	if tree.UnfolderedCount != 3 || len(tree.Unfoldered) != 3 || tree.UnfolderedTruncated {
		t.Fatalf("unfoldered = %d %v", tree.UnfolderedCount, tree.Unfoldered)
	}
	audit, _ := e.st.ListAudit(ctx, store.AuditFilter{})
	var ok, refused int
	for _, a := range audit {
		switch {
		case a.Action == "folder create" && a.Actor == "alice" && a.Outcome == tasks.OutcomeOK:
			ok++
		case a.Action == "folder create" && a.Target == "prod" && a.Outcome == tasks.OutcomeRefused:
			refused++
		}
	}
	if ok != 1 || refused != 1 { // prod/web created; prod existed already (409), audited as refused
		t.Fatalf("audit has %d ok and %d refused folder creates, want 1 and 1: %+v", ok, refused, audit)
	}
}

func TestBulkStop(t *testing.T) {
	boom := backends.Failed("simulated power failure", errors.New("secret host detail"))
	lab := sim.New(sim.Options{Context: "lab", Size: 5})
	bad := sim.New(sim.Options{Context: "bad", Size: 1, Fail: func(op string) error {
		if op == "power" {
			return boom
		}
		return nil
	}})
	e := newEnv(t, folders.Options{}, lab, bad)
	running, stopped := e.byState(backends.StateRunning), e.byState(backends.StateStopped)
	var labRunning []string
	for _, r := range running {
		if strings.HasPrefix(r, "sim/lab/") {
			labRunning = append(labRunning, r)
		}
	}
	e.folder(t, "prod", labRunning[0], "sim/bad/-/web-bad-0000")
	e.folder(t, "prod/db", stopped[0])
	task, results, err := e.svc.Action(context.Background(), origin, folders.Selection{Path: "prod"}, "stop")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]folders.Result{}
	for _, r := range results {
		got[r.Ref] = r
	}
	if len(results) != 3 {
		t.Fatalf("results = %+v, want 3", results)
	}
	if r := got[labRunning[0]]; r.Outcome != folders.OutcomeOK || r.Task == "" {
		t.Errorf("running member: %+v, want ok with a task", r)
	}
	if r := got[stopped[0]]; r.Outcome != folders.OutcomeSkipped || r.Message != "already stopped" || r.Task != "" {
		t.Errorf("stopped member: %+v, want skipped, already stopped, no task", r)
	}
	if r := got["sim/bad/-/web-bad-0000"]; r.Outcome != folders.OutcomeFailed || r.Message != "simulated power failure" || r.Task == "" {
		t.Errorf("failing member: %+v, want failed with the safe message", r)
	}
	if in, _ := lab.Get(context.Background(), mustRef(t, labRunning[0])); in.State != backends.StateStopped {
		t.Errorf("%s is %s after a bulk stop", labRunning[0], in.State)
	}
	if task.Action != "folder stop" || task.Target != "prod" || task.Status != store.TaskError {
		t.Errorf("bulk task = %+v, want folder stop on prod, error (one member failed)", task)
	}
	// Selection by refs, bare names included: the just-stopped one is skipped now.
	_, results, err = e.svc.Action(context.Background(), origin, folders.Selection{Refs: []string{labRunning[0], "nobody"}}, "stop")
	if err != nil || len(results) != 2 {
		t.Fatalf("selection: %+v %v", results, err)
	}
	for _, r := range results {
		want := map[string]string{labRunning[0]: folders.OutcomeSkipped, "nobody": folders.OutcomeFailed}[r.Ref]
		if r.Outcome != want {
			t.Errorf("selection result %+v, want %s", r, want)
		}
	}
}

func mustRef(t *testing.T, s string) backends.InstanceRef {
	r, err := backends.ParseRef(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestBulkConcurrencyBound(t *testing.T) {
	var mu sync.Mutex
	cur, peak, calls := 0, 0, 0
	lab := sim.New(sim.Options{Context: "lab", Size: 30, Fail: func(op string) error {
		if op != "power" {
			return nil
		}
		mu.Lock()
		cur++
		calls++
		peak = max(peak, cur)
		mu.Unlock()
		time.Sleep(30 * time.Millisecond)
		mu.Lock()
		cur--
		mu.Unlock()
		return nil
	}})
	e := newEnv(t, folders.Options{Concurrency: 3}, lab)
	running := e.byState(backends.StateRunning)
	e.folder(t, "fleet/a", running[:len(running)/2]...)
	e.folder(t, "fleet/b", running[len(running)/2:]...)
	_, results, err := e.svc.Action(context.Background(), origin, folders.Selection{Path: "fleet"}, "restart")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range results {
		if r.Outcome != folders.OutcomeOK {
			t.Fatalf("result %+v", r)
		}
	}
	if calls != len(running) || peak > 3 || peak < 2 {
		t.Fatalf("%d power calls for %d members, peak %d at once: want all, at most 3 at once (and some overlap)", calls, len(running), peak)
	}
}

func TestBulkSnapshot(t *testing.T) {
	now := time.Date(2026, 11, 30, 4, 5, 6, 0, time.UTC)
	lab := sim.New(sim.Options{Context: "lab", Size: 3})
	e := newEnv(t, folders.Options{Now: func() time.Time { return now }}, lab)
	ref := e.byState(backends.StateStopped)[0]
	e.folder(t, "x", ref)
	_, results, err := e.svc.Action(context.Background(), origin, folders.Selection{Path: "x"}, "snapshot")
	if err != nil || len(results) != 1 || results[0].Outcome != folders.OutcomeOK {
		t.Fatalf("snapshot: %+v %v", results, err)
	}
	snaps, err := lab.Snapshots(context.Background(), mustRef(t, ref))
	if err != nil || len(snaps) != 1 || snaps[0].Name != "bulk-20261130-040506" {
		t.Fatalf("snapshots = %+v %v", snaps, err)
	}
}
