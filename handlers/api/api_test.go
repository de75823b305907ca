package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/corral-dev/corral/app/auth"
	"github.com/corral-dev/corral/app/fleet"
	"github.com/corral-dev/corral/app/images"
	"github.com/corral-dev/corral/app/instances"
	apppve "github.com/corral-dev/corral/app/pve"
	"github.com/corral-dev/corral/app/tasks"
	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/backends/sim"
	"github.com/corral-dev/corral/handlers/api"
	"github.com/corral-dev/corral/handlers/middleware"
	"github.com/corral-dev/corral/store"
)

type env struct {
	srv   *httptest.Server
	fleet *fleet.Fleet
	lab   *sim.Backend
	prod  *sim.Backend
	st    *store.Store
}

func newEnv(t *testing.T) *env {
	t.Helper()
	lab := sim.New(sim.Options{Context: "lab", Size: 10})
	prod := sim.New(sim.Options{Context: "prod", Size: 5})
	e := newEnvWith(t, lab, prod)
	e.lab, e.prod = lab, prod
	return e
}

// newEnvWith serves the REST API over the given backends, a real store and
// an image resolver caching under the test's folder.
func newEnvWith(t *testing.T, bs ...backends.Backend) *env {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	st, err := store.Open(ctx, filepath.Join(dir, "c.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	f := fleet.New(fleet.Options{Timeout: 2 * time.Minute})
	for _, b := range bs {
		if err := f.Add(b); err != nil {
			t.Fatal(err)
		}
	}
	f.Refresh(ctx)
	tm := tasks.New(st, tasks.Options{})
	t.Cleanup(tm.Close)
	svc := instances.New(f, tm, st, nil, instances.WithImages(&images.Resolver{Dir: filepath.Join(dir, "images")}))
	pveSvc, err := apppve.New(ctx, apppve.Options{Fleet: f, Instances: svc, Tasks: tm, Store: st, Policy: auth.NewPolicy(nil, false)})
	if err != nil {
		t.Fatal(err)
	}
	r := chi.NewRouter()
	r.Use(middleware.RequestID, middleware.Identify(auth.NewResolver(auth.Config{}, auth.NewPolicy(nil, false), auth.ResolverOptions{})))
	api.MountHealth(r, api.HealthDeps{Store: st})
	r.Route("/api", func(r chi.Router) {
		api.Mount(r, api.Deps{Instances: svc, Fleet: f, Tasks: tm, PVE: pveSvc, Audit: auth.NewAuditor(st, nil)})
	})
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	return &env{srv: srv, fleet: f, st: st}
}

// call sends a request and decodes a JSON answer into out (when non-nil).
func (e *env) call(t *testing.T, method, path, body string, out any) *http.Response {
	t.Helper()
	req, err := http.NewRequest(method, e.srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			t.Fatalf("%s %s: %d %q does not decode: %v", method, path, resp.StatusCode, data, err)
		}
	}
	return resp
}

func refOf(name string) backends.InstanceRef {
	return backends.InstanceRef{Backend: backends.KindQEMU, Context: "local", Name: name}
}

type vm struct {
	Name, Ref, State, Status, Backend, Context, Mem string
	CPU                                             int
}

type apiError struct {
	Error      string   `json:"error"`
	Candidates []string `json:"candidates"`
}

func TestListAndPaging(t *testing.T) {
	e := newEnv(t)
	var all []vm
	resp := e.call(t, "GET", "/api/vms", "", &all)
	if resp.StatusCode != 200 || len(all) != 15 {
		t.Fatalf("GET /api/vms = %d with %d vms, want 200 with 15", resp.StatusCode, len(all))
	}
	if resp.Header.Get("X-Corral-Partial") != "" {
		t.Fatalf("a healthy fleet is reported partial: %q", resp.Header.Get("X-Corral-Partial"))
	}
	first := all[0]
	if first.Ref != "sim/lab/-/"+first.Name || first.Backend != "sim" || first.Context != "lab" || first.Mem == "" {
		t.Fatalf("first vm = %+v", first)
	}
	var page []vm
	resp = e.call(t, "GET", "/api/vms?context=sim/prod&sort=name&desc=true&per_page=2&page=1", "", &page)
	if len(page) != 2 || page[0].Context != "prod" || page[0].Name < page[1].Name {
		t.Fatalf("page = %+v", page)
	}
	if resp.Header.Get("X-Corral-Total") != "5" {
		t.Fatalf("X-Corral-Total = %q, want 5", resp.Header.Get("X-Corral-Total"))
	}
	var apiErr apiError
	resp = e.call(t, "GET", "/api/vms?sort=colour", "", &apiErr)
	if resp.StatusCode != 400 || !strings.Contains(apiErr.Error, "accepted are name") {
		t.Fatalf("bad sort key: %d %q", resp.StatusCode, apiErr.Error)
	}
	resp = e.call(t, "GET", "/api/vms?page=zero", "", &apiErr)
	if resp.StatusCode != 400 {
		t.Fatalf("bad page: %d", resp.StatusCode)
	}
}

func TestListAllWithoutPaging(t *testing.T) {
	e := newEnvWith(t, sim.New(sim.Options{Context: "big", Size: 1200}))
	var all []vm
	resp := e.call(t, "GET", "/api/vms", "", &all)
	if len(all) != 1200 || resp.Header.Get("X-Corral-Total") != "1200" {
		t.Fatalf("GET /api/vms over 1200 instances gave %d (total %s)", len(all), resp.Header.Get("X-Corral-Total"))
	}
	var page []vm
	e.call(t, "GET", "/api/vms?per_page=1000", "", &page)
	if len(page) != 500 {
		t.Fatalf("per_page=1000 gave %d rows, want the cap of 500", len(page))
	}
}

func TestPartialFleet(t *testing.T) {
	e := newEnv(t)
	e.prod.SetFail(func(op string) error {
		return backends.Unavailable("sim/prod", errors.New("dial tcp secret-host:16509: connection refused"))
	})
	e.fleet.Refresh(context.Background())
	var all []vm
	resp := e.call(t, "GET", "/api/vms", "", &all)
	if got := resp.Header.Get("X-Corral-Partial"); got != "sim/prod" {
		t.Fatalf("X-Corral-Partial = %q, want sim/prod", got)
	}
	// The failing context's last-known instances stay, marked stale.
	if len(all) != 15 {
		t.Fatalf("partial list has %d vms, want 15 (last known kept)", len(all))
	}
	var ctxs []struct{ Key, Health, Error string }
	e.call(t, "GET", "/api/contexts", "", &ctxs)
	if len(ctxs) != 2 || ctxs[1].Key != "sim/prod" || ctxs[1].Health != "stale" || !strings.Contains(ctxs[1].Error, "sim/prod") {
		t.Fatalf("contexts = %+v", ctxs)
	}
	if strings.Contains(ctxs[1].Error, "secret-host") {
		t.Fatalf("context error leaks the cause: %q", ctxs[1].Error)
	}
	// An action on the failing context is a 503 naming it, without the cause.
	var prod []vm
	e.call(t, "GET", "/api/vms?context=sim/prod&state=running", "", &prod)
	var apiErr apiError
	resp = e.call(t, "POST", "/api/vms/"+prod[0].Ref+"/stop", "", &apiErr)
	if resp.StatusCode != 503 || !strings.Contains(apiErr.Error, "sim/prod") || strings.Contains(apiErr.Error, "secret-host") {
		t.Fatalf("action on an unreachable context: %d %q", resp.StatusCode, apiErr.Error)
	}
}

func TestCreateValidation(t *testing.T) {
	e := newEnv(t)
	tests := []struct {
		name, body, want string
	}{
		{"malformed JSON", `{"name": "x",`, "truncated JSON"},
		{"not JSON", `name=x`, "not valid JSON"},
		{"empty", ``, "empty"},
		{"unknown field", `{"name":"x","context":"sim/lab","colour":"red"}`, `unknown field "colour"`},
		{"wrong type", `{"name":"x","context":"sim/lab","cpu":"two"}`, `field "cpu" must be int`},
		{"bad size", `{"name":"x","context":"sim/lab","mem":"4 gigs"}`, "accepted are a number"},
		{"zero disk", `{"name":"x","context":"sim/lab","disk":"0"}`, "greater than zero"},
		{"no context", `{"name":"x"}`, "context is required: accepted are sim/lab, sim/prod"},
		{"unknown context", `{"name":"x","context":"sim/moon"}`, `context "sim/moon" is not configured`},
		{"no name", `{"context":"sim/lab"}`, "name is required"},
		{"trailing data", `{"name":"x","context":"sim/lab"} {}`, "after the JSON object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var apiErr apiError
			resp := e.call(t, "POST", "/api/vms", tt.body, &apiErr)
			if resp.StatusCode != 400 || !strings.Contains(apiErr.Error, tt.want) {
				t.Fatalf("POST /api/vms %s = %d %q, want 400 containing %q", tt.body, resp.StatusCode, apiErr.Error, tt.want)
			}
		})
	}
	var all []vm
	e.call(t, "GET", "/api/vms", "", &all)
	if len(all) != 15 {
		t.Fatalf("refused creates changed the fleet: %d vms", len(all))
	}
	// A name the backend refuses fails the task with the backend's safe
	// reason; nothing is created.
	var created struct{ Task string }
	resp := e.call(t, "POST", "/api/vms", `{"name":"Bad Name","context":"sim/lab"}`, &created)
	if resp.StatusCode != 202 {
		t.Fatalf("create: %d", resp.StatusCode)
	}
	task := waitTask(t, e, created.Task)
	if task.Status != "error" || !strings.Contains(task.Error, "lowercase") {
		t.Fatalf("task of a refused name = %+v", task)
	}
}

type taskBody struct {
	ID, Status, Error, Log, Action, Target string
	Progress                               int
}

func waitTask(t *testing.T, e *env, id string) taskBody {
	t.Helper()
	return waitTaskFor(t, e, id, 10*time.Second)
}

func waitTaskFor(t *testing.T, e *env, id string, limit time.Duration) taskBody {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		var tb taskBody
		resp := e.call(t, "GET", "/api/tasks/"+id, "", &tb)
		if resp.StatusCode != 200 {
			t.Fatalf("GET /api/tasks/%s = %d", id, resp.StatusCode)
		}
		if tb.Status != "running" {
			return tb
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s still running", id)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestLifecycle(t *testing.T) {
	e := newEnv(t)
	var created struct{ Task, Ref string }
	resp := e.call(t, "POST", "/api/vms", `{"name":"web","context":"sim/lab","cpu":2,"mem":"2Gi","disk":"20G","tags":["prod"]}`, &created)
	if resp.StatusCode != 202 || created.Ref != "sim/lab/-/web" || resp.Header.Get("Location") != "/api/tasks/"+created.Task {
		t.Fatalf("create = %d %+v", resp.StatusCode, created)
	}
	task := waitTask(t, e, created.Task)
	if task.Status != "done" || task.Progress != 100 || !strings.Contains(task.Log, "created sim/lab/-/web") {
		t.Fatalf("create task = %+v", task)
	}
	var got vm
	if resp := e.call(t, "GET", "/api/vms/sim/lab/-/web", "", &got); resp.StatusCode != 200 {
		t.Fatalf("GET created vm = %d", resp.StatusCode)
	}
	// 20G is 20e9 bytes: 19074 MiB rounded up.
	if got.CPU != 2 || got.Mem != "2Gi" || got.State != "stopped" || got.Status != "Stopped" {
		t.Fatalf("created vm = %+v", got)
	}
	// The bare name resolves while it is unique...
	if resp := e.call(t, "POST", "/api/vms/web/start", "", nil); resp.StatusCode != 200 {
		t.Fatalf("start by bare name = %d", resp.StatusCode)
	}
	e.call(t, "GET", "/api/vms/web", "", &got)
	if got.State != "running" {
		t.Fatalf("after start: %s", got.State)
	}
	// ...and the snapshot was refreshed, so the list shows it running.
	var list []vm
	e.call(t, "GET", "/api/vms?q=web&context=sim/lab", "", &list)
	found := false
	for _, v := range list {
		found = found || v.Ref == "sim/lab/-/web" && v.State == "running"
	}
	if !found {
		t.Fatalf("list after start does not show web running: %+v", list)
	}
	var apiErr apiError
	if resp := e.call(t, "POST", "/api/vms/web/start", "", &apiErr); resp.StatusCode != 409 || !strings.Contains(apiErr.Error, "running") {
		t.Fatalf("start of a running vm = %d %q, want 409", resp.StatusCode, apiErr.Error)
	}
	if resp := e.call(t, "POST", "/api/vms/web/explode", "", &apiErr); resp.StatusCode != 400 || !strings.Contains(apiErr.Error, "accepted are start") {
		t.Fatalf("unknown action = %d %q", resp.StatusCode, apiErr.Error)
	}
	// A second "web" in another context makes the bare name ambiguous.
	e.call(t, "POST", "/api/vms", `{"name":"web","context":"sim/prod"}`, &created)
	waitTask(t, e, created.Task)
	if resp := e.call(t, "GET", "/api/vms/web", "", &apiErr); resp.StatusCode != 400 || len(apiErr.Candidates) != 2 {
		t.Fatalf("ambiguous name = %d %+v", resp.StatusCode, apiErr)
	}
	if resp := e.call(t, "DELETE", "/api/vms/sim/lab/-/web", "", nil); resp.StatusCode != 200 {
		t.Fatalf("delete = %d", resp.StatusCode)
	}
	if resp := e.call(t, "GET", "/api/vms/sim/lab/-/web", "", &apiErr); resp.StatusCode != 404 {
		t.Fatalf("GET after delete = %d", resp.StatusCode)
	}
	if resp := e.call(t, "GET", "/api/vms/sim/lab/web", "", &apiErr); resp.StatusCode != 400 || !strings.Contains(apiErr.Error, "NAMESPACE") {
		t.Fatalf("malformed ref = %d %q", resp.StatusCode, apiErr.Error)
	}
	// Every mutation, refused ones included, is in the audit log.
	var audit []struct{ Actor, Surface, Action, Target, Outcome string }
	e.call(t, "GET", "/api/tasklog?limit=50", "", &audit)
	outcomes := map[string]string{}
	for _, a := range audit {
		outcomes[a.Action+" "+a.Target] = a.Outcome
		if a.Surface != "rest" || a.Actor == "" {
			t.Fatalf("audit row without surface or actor: %+v", a)
		}
	}
	for k, want := range map[string]string{"create sim/lab/-/web": "ok", "start sim/lab/-/web": "ok", "delete sim/lab/-/web": "ok", "explode web": "refused"} {
		if outcomes[k] != want {
			t.Errorf("audit %q = %q, want %q (all: %v)", k, outcomes[k], want, outcomes)
		}
	}
	n, err := e.st.VerifyAudit(context.Background())
	if err != nil || n != len(audit) {
		t.Fatalf("audit chain: %d rows, %v", n, err)
	}
}

func TestBackendFailureIs502(t *testing.T) {
	e := newEnv(t)
	e.lab.SetFail(func(op string) error {
		if op == "power" {
			return backends.Failed("simulated hypervisor failed to stop sim-vm", errors.New("/var/lib/secret/disk.img: I/O error"))
		}
		return nil
	})
	var all []vm
	e.call(t, "GET", "/api/vms?context=sim/lab&state=running", "", &all)
	var apiErr apiError
	resp := e.call(t, "POST", "/api/vms/"+all[0].Ref+"/stop", "", &apiErr)
	if resp.StatusCode != 502 || strings.Contains(apiErr.Error, "secret") || !strings.Contains(apiErr.Error, "request") {
		t.Fatalf("backend failure = %d %q, want 502 with a request id and no cause", resp.StatusCode, apiErr.Error)
	}
}

func TestSnapshotPrune(t *testing.T) {
	e := newEnv(t)
	for _, n := range []string{"auto-a", "keepme", "auto-b", "auto-c"} {
		if resp := e.call(t, "POST", "/api/vms/sim/lab/-/web-lab-0000/snapshots", `{"name":"`+n+`"}`, nil); resp.StatusCode != 201 {
			t.Fatalf("snapshot %s = %d", n, resp.StatusCode)
		}
	}
	var apiErr apiError
	if resp := e.call(t, "POST", "/api/vms/web-lab-0000/snapshots/prune", `{}`, &apiErr); resp.StatusCode != 400 || !strings.Contains(apiErr.Error, "keep") {
		t.Fatalf("prune without keep = %d %q", resp.StatusCode, apiErr.Error)
	}
	var pruned struct{ Deleted []string }
	if resp := e.call(t, "POST", "/api/vms/web-lab-0000/snapshots/prune", `{"keep":1}`, &pruned); resp.StatusCode != 200 || strings.Join(pruned.Deleted, ",") != "auto-a,auto-b" {
		t.Fatalf("prune = %d %+v", resp.StatusCode, pruned)
	}
	var snaps []struct{ Name string }
	e.call(t, "GET", "/api/vms/web-lab-0000/snapshots", "", &snaps)
	if len(snaps) != 2 || snaps[0].Name != "keepme" || snaps[1].Name != "auto-c" {
		t.Fatalf("left: %+v", snaps)
	}
}

func TestPVETokens(t *testing.T) {
	e := newEnv(t)
	var created struct{ Value string }
	resp := e.call(t, "POST", "/api/pve/tokens", `{"user":"alice@pve","tokenId":"tf","comment":"terraform"}`, &created)
	if resp.StatusCode != 201 || !strings.HasPrefix(created.Value, "alice@pve!tf=") || len(created.Value) < len("alice@pve!tf=")+36 {
		t.Fatalf("create = %d %q", resp.StatusCode, created.Value)
	}
	var apiErr apiError
	if resp := e.call(t, "POST", "/api/pve/tokens", `{"user":"alice@pve","tokenId":"tf"}`, &apiErr); resp.StatusCode != 409 {
		t.Fatalf("second create = %d %q", resp.StatusCode, apiErr.Error)
	}
	if resp := e.call(t, "POST", "/api/pve/tokens", `{"user":"alice","tokenId":"tf"}`, &apiErr); resp.StatusCode != 400 || !strings.Contains(apiErr.Error, "NAME@REALM") {
		t.Fatalf("bad user = %d %q", resp.StatusCode, apiErr.Error)
	}
	var list []struct{ User, TokenID, Comment string }
	e.call(t, "GET", "/api/pve/tokens", "", &list)
	if len(list) != 1 || list[0].User != "alice@pve" || list[0].Comment != "terraform" {
		t.Fatalf("list = %+v", list)
	}
	secret := strings.SplitN(created.Value, "=", 2)[1]
	data, _ := json.Marshal(list)
	if strings.Contains(string(data), secret) {
		t.Fatal("the token list shows the secret")
	}
	if resp := e.call(t, "DELETE", "/api/pve/tokens/alice@pve/tf", "", nil); resp.StatusCode != 200 {
		t.Fatalf("revoke = %d", resp.StatusCode)
	}
	if resp := e.call(t, "DELETE", "/api/pve/tokens/alice@pve/tf", "", &apiErr); resp.StatusCode != 404 {
		t.Fatalf("second revoke = %d", resp.StatusCode)
	}
	var audit []struct{ Action, Outcome string }
	e.call(t, "GET", "/api/tasklog?action=pve+token+create", "", &audit)
	if len(audit) != 3 || audit[2].Outcome != "ok" {
		t.Fatalf("audit of token creation = %+v", audit)
	}
}

func TestDoctor(t *testing.T) {
	e := newEnv(t)
	var reports []struct {
		Context string
		OK      bool
		Checks  []struct{ Name, Status, Message string }
	}
	if resp := e.call(t, "GET", "/api/doctor", "", &reports); resp.StatusCode != 200 || len(reports) != 2 || !reports[0].OK || reports[0].Checks[0].Status != "ok" {
		t.Fatalf("doctor = %d %+v", resp.StatusCode, reports)
	}
}

func TestRoutesAndProbes(t *testing.T) {
	e := newEnv(t)
	var apiErr apiError
	if resp := e.call(t, "GET", "/api/tasks/nope", "", &apiErr); resp.StatusCode != 404 || !strings.Contains(apiErr.Error, "nope") {
		t.Fatalf("missing task = %d %q", resp.StatusCode, apiErr.Error)
	}
	if resp := e.call(t, "GET", "/api/nope", "", &apiErr); resp.StatusCode != 404 {
		t.Fatalf("unknown route = %d", resp.StatusCode)
	}
	if resp := e.call(t, "PUT", "/api/vms", "", &apiErr); resp.StatusCode != 405 {
		t.Fatalf("wrong method = %d", resp.StatusCode)
	}
	resp := e.call(t, "GET", "/healthz", "", nil)
	if resp.StatusCode != 200 {
		t.Fatalf("healthz = %d", resp.StatusCode)
	}
	var ready struct{ Status string }
	if resp := e.call(t, "GET", "/readyz", "", &ready); resp.StatusCode != 200 || ready.Status != "ready" {
		t.Fatalf("readyz = %d %+v", resp.StatusCode, ready)
	}
	e.st.Close()
	if resp := e.call(t, "GET", "/readyz", "", &ready); resp.StatusCode != 503 {
		t.Fatalf("readyz with a closed store = %d", resp.StatusCode)
	}
}
