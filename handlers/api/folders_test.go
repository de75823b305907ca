package api_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/corral-dev/corral/app/auth"
	"github.com/corral-dev/corral/app/fleet"
	"github.com/corral-dev/corral/app/folders"
	"github.com/corral-dev/corral/app/instances"
	"github.com/corral-dev/corral/app/tasks"
	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/backends/sim"
	"github.com/corral-dev/corral/handlers/api"
	"github.com/corral-dev/corral/handlers/middleware"
	"github.com/corral-dev/corral/store"
)

// newFolderEnv serves only the folder routes over a lab of 5 sims and a
// one-instance context whose power calls fail.
func newFolderEnv(t *testing.T) *env {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "c.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	lab := sim.New(sim.Options{Context: "lab", Size: 5})
	bad := sim.New(sim.Options{Context: "bad", Size: 1, Fail: func(op string) error {
		if op == "power" {
			return backends.Failed("simulated power failure", errors.New("secret"))
		}
		return nil
	}})
	f := fleet.New(fleet.Options{Timeout: time.Minute})
	for _, b := range []backends.Backend{lab, bad} {
		if err := f.Add(b); err != nil {
			t.Fatal(err)
		}
	}
	f.Refresh(ctx)
	tm := tasks.New(st, tasks.Options{})
	t.Cleanup(tm.Close)
	svc := instances.New(f, tm, st, nil)
	r := chi.NewRouter()
	r.Use(middleware.RequestID, middleware.Identify(auth.NewResolver(auth.Config{}, auth.NewPolicy(nil, false), auth.ResolverOptions{})))
	r.Route("/api", func(r chi.Router) {
		api.MountFolders(r, api.Deps{Instances: svc, Fleet: f, Tasks: tm, Audit: auth.NewAuditor(st, nil)}, folders.New(st, f, tm, svc, folders.Options{}))
	})
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	return &env{srv: srv, fleet: f, st: st, lab: lab}
}

type folderTree struct {
	Folders []struct {
		Path, Name string
		Members    []struct{ Ref, Name, State string }
		Children   []struct {
			Path    string
			Members []struct{ Ref, State string }
		}
	}
	Unfoldered          []string
	UnfolderedCount     int
	UnfolderedTruncated bool
}

func TestFolderRoutes(t *testing.T) {
	e := newFolderEnv(t)
	var running, stopped string
	for _, in := range e.fleet.Snapshot().Instances {
		switch {
		case in.Ref.Context == "lab" && in.State == backends.StateRunning && running == "":
			running = in.Ref.String()
		case in.Ref.Context == "lab" && in.State == backends.StateStopped && stopped == "":
			stopped = in.Ref.String()
		}
	}
	bareStopped := stopped[strings.LastIndex(stopped, "/")+1:]
	steps := []struct {
		name, method, path, body string
		status                   int
		errHas                   string
	}{
		{"create nested", "POST", "/api/folders", `{"path":"prod/web"}`, 201, ""},
		{"create existing", "POST", "/api/folders", `{"path":"prod"}`, 409, "already exists"},
		{"bad path", "POST", "/api/folders", `{"path":"Prod/Web"}`, 400, "[a-z0-9][a-z0-9-._]*"},
		{"too deep", "POST", "/api/folders", `{"path":"a/b/c/d/e/f/g/h/i"}`, 400, "9 levels"},
		{"unknown field", "POST", "/api/folders", `{"name":"x"}`, 400, "unknown field"},
		{"add running by ref", "POST", "/api/folders/members", `{"path":"prod/web","ref":"` + running + `"}`, 200, ""},
		{"add stopped by bare name", "POST", "/api/folders/members", `{"path":"prod","ref":"` + bareStopped + `"}`, 200, ""},
		{"add the failing one", "POST", "/api/folders/members", `{"path":"prod","ref":"sim/bad/-/web-bad-0000"}`, 200, ""},
		{"add a gone one", "POST", "/api/folders/members", `{"path":"prod/web","ref":"sim/lab/-/gone"}`, 200, ""},
		{"add to unknown folder", "POST", "/api/folders/members", `{"path":"nope","ref":"` + running + `"}`, 404, "does not exist"},
		{"move under itself", "POST", "/api/folders/move", `{"from":"prod","to":"prod/web/x"}`, 400, "under itself"},
		{"move onto existing", "POST", "/api/folders/move", `{"from":"prod/web","to":"prod"}`, 409, "already exists"},
		{"move unknown", "POST", "/api/folders/move", `{"from":"nope","to":"x"}`, 404, "does not exist"},
		{"unknown action", "POST", "/api/folders/action", `{"path":"prod","action":"explode"}`, 400, "accepted are start, stop, shutdown, restart, pause, resume, snapshot"},
		{"action on unknown folder", "POST", "/api/folders/action", `{"path":"nope","action":"stop"}`, 404, "does not exist"},
		{"remove unfoldered", "DELETE", "/api/folders/members?ref=sim/lab/-/never", "", 404, "in no folder"},
		{"delete unknown", "DELETE", "/api/folders?path=nope", "", 404, "does not exist"},
		{"delete without path", "DELETE", "/api/folders", "", 400, "required"},
	}
	for _, s := range steps {
		var body apiError
		resp := e.call(t, s.method, s.path, s.body, &body)
		if resp.StatusCode != s.status || !strings.Contains(body.Error, s.errHas) {
			t.Fatalf("%s: %s %s = %d %q, want %d containing %q", s.name, s.method, s.path, resp.StatusCode, body.Error, s.status, s.errHas)
		}
	}

	var tree folderTree
	if resp := e.call(t, "GET", "/api/folders", "", &tree); resp.StatusCode != 200 {
		t.Fatalf("GET /api/folders = %d", resp.StatusCode)
	}
	if len(tree.Folders) != 1 || tree.Folders[0].Path != "prod" || len(tree.Folders[0].Members) != 2 || len(tree.Folders[0].Children) != 1 {
		t.Fatalf("tree = %+v", tree)
	}
	web := tree.Folders[0].Children[0]
	states := map[string]string{}
	for _, m := range web.Members {
		states[m.Ref] = m.State
	}
	if web.Path != "prod/web" || states[running] != "running" || states["sim/lab/-/gone"] != "missing" {
		t.Fatalf("prod/web = %+v", web)
	}
	if tree.UnfolderedCount != 3 || len(tree.Unfoldered) != 3 || tree.UnfolderedTruncated {
		t.Fatalf("unfoldered = %d %v", tree.UnfolderedCount, tree.Unfoldered)
	}

	var bulk struct {
		Results []struct{ Ref, Outcome, Message, Task string }
		Task    string
	}
	if resp := e.call(t, "POST", "/api/folders/action", `{"path":"prod","action":"stop"}`, &bulk); resp.StatusCode != 200 {
		t.Fatalf("bulk stop = %d", resp.StatusCode)
	}
	got := map[string]string{}
	for _, r := range bulk.Results {
		got[r.Ref] = r.Outcome + ": " + r.Message
	}
	want := map[string]string{
		running:                  "ok: ",
		stopped:                  "skipped: already stopped",
		"sim/bad/-/web-bad-0000": "failed: simulated power failure",
		"sim/lab/-/gone":         "failed: instance sim/lab/-/gone does not exist",
	}
	for ref, w := range want {
		if got[ref] != w {
			t.Errorf("bulk result for %s = %q, want %q (all: %v)", ref, got[ref], w, got)
		}
	}
	if bulk.Task == "" {
		t.Error("bulk answer names no task")
	}

	var sel struct {
		Results []struct{ Ref, Outcome string }
	}
	if resp := e.call(t, "POST", "/api/folders/action", `{"refs":["`+running+`"],"action":"start"}`, &sel); resp.StatusCode != 200 || len(sel.Results) != 1 || sel.Results[0].Outcome != "ok" {
		t.Fatalf("selection start = %d %+v", resp.StatusCode, sel)
	}

	if resp := e.call(t, "POST", "/api/folders/move", `{"from":"prod","to":"archive/prod"}`, nil); resp.StatusCode != 200 {
		t.Fatalf("move = %d", resp.StatusCode)
	}
	if resp := e.call(t, "DELETE", "/api/folders/members?ref="+bareStopped, "", nil); resp.StatusCode != 200 {
		t.Fatalf("remove member = %d", resp.StatusCode)
	}
	if resp := e.call(t, "DELETE", "/api/folders?path=archive", "", nil); resp.StatusCode != 200 {
		t.Fatalf("delete = %d", resp.StatusCode)
	}
	tree = folderTree{}
	e.call(t, "GET", "/api/folders", "", &tree)
	if len(tree.Folders) != 0 || tree.UnfolderedCount != 6 {
		t.Fatalf("after delete: %+v, want no folders and every instance unfoldered", tree)
	}
	if len(e.fleet.Snapshot().Instances) != 6 {
		t.Fatal("deleting a folder deleted instances")
	}
}
