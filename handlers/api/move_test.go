package api_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/corral-dev/corral/app/auth"
	"github.com/corral-dev/corral/app/fleet"
	"github.com/corral-dev/corral/app/instances"
	"github.com/corral-dev/corral/app/move"
	"github.com/corral-dev/corral/app/tasks"
	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/backends/qemu"
	"github.com/corral-dev/corral/backends/qemu/qemutest"
	"github.com/corral-dev/corral/backends/sim"
	"github.com/corral-dev/corral/handlers/api"
	"github.com/corral-dev/corral/handlers/middleware"
	"github.com/corral-dev/corral/store"
)

// newMoveEnv serves the REST API with the move routes over the given
// backends.
func newMoveEnv(t *testing.T, bs ...backends.Backend) *env {
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
	r := chi.NewRouter()
	r.Use(middleware.RequestID, middleware.Identify(auth.NewResolver(auth.Config{}, auth.NewPolicy(nil, false), auth.ResolverOptions{})))
	r.Route("/api", func(r chi.Router) {
		api.Mount(r, api.Deps{Instances: instances.New(f, tm, st, nil), Fleet: f, Tasks: tm, Audit: auth.NewAuditor(st, nil),
			Move: move.New(f, tm, move.Options{Registry: st})})
	})
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	return &env{srv: srv, fleet: f, st: st}
}

type preflightJSON struct {
	Refusals []struct{ Code, Reason string }  `json:"refusals"`
	Warnings []struct{ Code, Message string } `json:"warnings"`
	Plan     struct {
		Source, Destination, Read string
		Steps                     []string
	} `json:"plan"`
	Error string `json:"error"`
}

func (p preflightJSON) codes() []string {
	var out []string
	for _, r := range p.Refusals {
		out = append(out, r.Code)
	}
	slices.Sort(out)
	return out
}

// TestMoveREST: the destinations and the preflight answer 200 with every
// reason; a refused commit is a 409 with the same list; malformed bodies
// are 400s and an unknown ref a 404.
func TestMoveREST(t *testing.T) {
	lab := sim.New(sim.Options{Context: "lab"})
	prod := sim.New(sim.Options{Context: "prod"})
	if _, err := lab.Create(context.Background(), backends.Spec{Name: "web"}); err != nil {
		t.Fatal(err)
	}
	e := newMoveEnv(t, lab, prod)

	var ds struct {
		Destinations []struct {
			Context string
			OK      bool
			Reasons []string
		}
	}
	if resp := e.call(t, "GET", "/api/move/destinations?ref=sim/lab/-/web", "", &ds); resp.StatusCode != 200 || len(ds.Destinations) != 2 {
		t.Fatalf("destinations = %d %+v, want 200 with both contexts", resp.StatusCode, ds)
	}
	for _, d := range ds.Destinations {
		if d.OK || len(d.Reasons) == 0 {
			t.Fatalf("destination %+v: sim can neither hand over nor import a disk, want reasons", d)
		}
	}
	body := `{"ref":"sim/lab/-/web","toBackend":"sim","toContext":"prod"}`
	var pf preflightJSON
	if resp := e.call(t, "POST", "/api/move/preflight", body, &pf); resp.StatusCode != 200 ||
		!slices.Equal(pf.codes(), []string{"dest-import", "source-export"}) || pf.Plan.Destination != "sim/prod/-/web" {
		t.Fatalf("preflight = %d %+v, want 200 with two refusals", resp.StatusCode, pf)
	}
	var refused preflightJSON
	if resp := e.call(t, "POST", "/api/move", body, &refused); resp.StatusCode != http.StatusConflict ||
		!slices.Equal(refused.codes(), pf.codes()) || !strings.Contains(refused.Error, "cannot import") {
		t.Fatalf("commit = %d %+v, want 409 with the preflight's refusals", resp.StatusCode, refused)
	}
	if _, err := prod.Get(context.Background(), backends.InstanceRef{Backend: backends.KindSim, Context: "prod", Name: "web"}); err == nil {
		t.Fatal("a refused move created the copy")
	}
	var apiErr apiError
	for _, tt := range []struct {
		method, path, body string
		status             int
		want               string
	}{
		{"POST", "/api/move/preflight", `{"ref":`, 400, "truncated"},
		{"POST", "/api/move/preflight", `{"ref":"web","to":"x"}`, 400, "unknown field"},
		{"POST", "/api/move/preflight", `{"toBackend":"sim"}`, 400, "ref is required"},
		{"POST", "/api/move", `[]`, 400, "must be"},
		{"POST", "/api/move/preflight", `{"ref":"sim/lab/-/nope","toBackend":"sim"}`, 404, "nope"},
		{"GET", "/api/move/destinations", "", 400, "ref is required"},
	} {
		if resp := e.call(t, tt.method, tt.path, tt.body, &apiErr); resp.StatusCode != tt.status || !strings.Contains(apiErr.Error, tt.want) {
			t.Fatalf("%s %s %s = %d %q, want %d with %q", tt.method, tt.path, tt.body, resp.StatusCode, apiErr.Error, tt.status, tt.want)
		}
	}
}

// TestMoveRESTCommit moves a stopped VM between two local-QEMU contexts
// over REST: 202 with a task that ends done, the disk copied by qemu-img,
// the source kept and stopped.
func TestMoveRESTCommit(t *testing.T) {
	qemutest.Tools(t)
	a, err := qemu.New(qemu.Options{Context: "local", Dir: t.TempDir(), Accel: "tcg"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := qemu.New(qemu.Options{Context: "other", Dir: t.TempDir(), Accel: "tcg"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Create(context.Background(), backends.Spec{Name: "db", CPUs: 2, MemoryMiB: 300, DiskMiB: 40}); err != nil {
		t.Fatal(err)
	}
	e := newMoveEnv(t, a, b)
	var accepted struct{ Task, Source, Destination string }
	resp := e.call(t, "POST", "/api/move", `{"ref":"db","toBackend":"qemu","toContext":"other","name":"db2"}`, &accepted)
	if resp.StatusCode != http.StatusAccepted || accepted.Task == "" || accepted.Destination != "qemu/other/-/db2" {
		t.Fatalf("commit = %d %+v, want 202 with a task", resp.StatusCode, accepted)
	}
	var task struct {
		Status string
		Error  string
	}
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(50 * time.Millisecond) {
		e.call(t, "GET", "/api/tasks/"+accepted.Task, "", &task)
		if task.Status != "running" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the move task never ended")
		}
	}
	if task.Status != "done" {
		t.Fatalf("task = %+v, want done", task)
	}
	cp, err := b.Get(context.Background(), backends.InstanceRef{Backend: backends.KindQEMU, Context: "other", Name: "db2"})
	if err != nil || cp.CPUs != 2 || cp.MemoryMiB != 300 || cp.DiskMiB != 40 {
		t.Fatalf("copy = %+v, %v; want 2 CPUs, 300 MiB, a 40 MiB disk", cp, err)
	}
	if src, err := a.Get(context.Background(), backends.InstanceRef{Backend: backends.KindQEMU, Context: "local", Name: "db"}); err != nil || src.State != backends.StateStopped {
		t.Fatalf("source = %+v, %v; want it kept, stopped", src, err)
	}
	// The same commit again: the name is now taken.
	var refused preflightJSON
	if resp := e.call(t, "POST", "/api/move", `{"ref":"db","toBackend":"qemu","toContext":"other","name":"db2"}`, &refused); resp.StatusCode != 409 || !slices.Equal(refused.codes(), []string{"name-taken"}) {
		t.Fatalf("second commit = %d %+v, want 409 name-taken", resp.StatusCode, refused)
	}
}
