package api

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/corral-dev/corral/app/auth"
	"github.com/corral-dev/corral/app/fleet"
	"github.com/corral-dev/corral/app/instances"
	"github.com/corral-dev/corral/app/tasks"
	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/store"
)

// fakeCTs is a backend with one VM and the CTs it is asked for; it checks
// the handler and use-case logic only (the KubeVirt backend's CTs are
// tested against a real API server in backends/kubevirt).
type fakeCTs struct {
	mu  sync.Mutex
	ins map[string]backends.Instance
	img map[string]string
}

func newFakeCTs() *fakeCTs {
	f := &fakeCTs{ins: map[string]backends.Instance{}, img: map[string]string{}}
	vm := backends.Instance{Ref: f.ref("ns", "vm1"), Type: backends.TypeVM, State: backends.StateRunning, CPUs: 1, MemoryMiB: 1024}
	f.ins["vm1"] = vm
	return f
}

func (f *fakeCTs) ref(ns, name string) backends.InstanceRef {
	return backends.InstanceRef{Backend: backends.KindKubeVirt, Context: "k", Namespace: ns, Name: name}
}
func (f *fakeCTs) Kind() backends.Kind { return backends.KindKubeVirt }
func (f *fakeCTs) Context() string     { return "k" }
func (f *fakeCTs) List(context.Context) ([]backends.Instance, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []backends.Instance
	for _, in := range f.ins {
		out = append(out, in)
	}
	return out, nil
}
func (f *fakeCTs) Get(_ context.Context, ref backends.InstanceRef) (backends.Instance, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	in, ok := f.ins[ref.Name]
	if !ok {
		return in, backends.NotFoundf("no %s", ref)
	}
	return in, nil
}
func (f *fakeCTs) Create(context.Context, backends.Spec) (backends.Instance, error) {
	return backends.Instance{}, backends.Invalidf("VMs are not the point here")
}
func (f *fakeCTs) CreateContainer(_ context.Context, spec backends.Spec, image string, privileged bool) (backends.Instance, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if image == "" {
		return backends.Instance{}, backends.Invalidf("image is required for a CT: give an OCI image, e.g. docker.io/library/debian:bookworm")
	}
	if _, ok := f.ins[spec.Name]; ok {
		return backends.Instance{}, backends.Conflictf("%s exists", spec.Name)
	}
	in := backends.Instance{Ref: f.ref(spec.Namespace, spec.Name), Type: backends.TypeCT, State: backends.StateRunning, CPUs: spec.CPUs, MemoryMiB: spec.MemoryMiB, DiskMiB: spec.DiskMiB, Node: "n1",
		Facts: []backends.Fact{{Label: "Image", Value: image}, {Label: "Privileged", Value: map[bool]string{true: "true", false: "false"}[privileged]}, {Label: "Phase", Value: "Running"}, {Label: "Ready", Value: "true"}}}
	f.ins[spec.Name] = in
	return in, nil
}
func (f *fakeCTs) Power(_ context.Context, ref backends.InstanceRef, a backends.Action) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	in, ok := f.ins[ref.Name]
	if !ok {
		return backends.NotFoundf("no %s", ref)
	}
	switch {
	case a == backends.ActionStop && in.State == backends.StateRunning:
		in.State, in.Node = backends.StateStopped, ""
		in.Facts[2].Value, in.Facts[3].Value = "Stopped", "false"
	case a == backends.ActionStart && in.State == backends.StateStopped:
		in.State, in.Node = backends.StateRunning, "n1"
		in.Facts[2].Value, in.Facts[3].Value = "Running", "true"
	default:
		return backends.Conflictf("%s is %s", ref, in.State)
	}
	f.ins[ref.Name] = in
	return nil
}
func (f *fakeCTs) Delete(_ context.Context, ref backends.InstanceRef) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.ins[ref.Name]; !ok {
		return backends.NotFoundf("no %s", ref)
	}
	delete(f.ins, ref.Name)
	return nil
}

// ctServer serves the CT routes as routes.go should list them.
func ctServer(t *testing.T, b backends.Backend) (*httptest.Server, *fleet.Fleet, *tasks.Manager) {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "c.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	f := fleet.New(fleet.Options{Timeout: time.Minute})
	if err := f.Add(b); err != nil {
		t.Fatal(err)
	}
	f.Refresh(ctx)
	tm := tasks.New(st, tasks.Options{})
	t.Cleanup(tm.Close)
	svc := instances.New(f, tm, st, nil)
	r := chi.NewRouter()
	h := &handler{Deps: Deps{Instances: svc, Fleet: f, Tasks: tm, Policy: auth.NewPolicy(nil, false)}}
	h.Log = slog.New(slog.DiscardHandler)
	r.Get("/api/cts", h.wrap(h.ctList))
	r.Post("/api/cts", h.wrap(h.ctCreate))
	r.Post("/api/cts/*", h.wrap(h.ctAction))
	r.Delete("/api/cts/*", h.wrap(h.ctDelete))
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	return srv, f, tm
}

func doJSON(t *testing.T, method, url, body string, out any) int {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if out != nil {
		if err := json.NewDecoder(res.Body).Decode(out); err != nil {
			t.Fatalf("%s %s: decode: %v", method, url, err)
		}
	}
	return res.StatusCode
}

func TestCTRoutes(t *testing.T) {
	fb := newFakeCTs()
	srv, f, tm := ctServer(t, fb)
	var list []ctJSON
	if code := doJSON(t, "GET", srv.URL+"/api/cts", "", &list); code != 200 || len(list) != 0 {
		t.Fatalf("empty list = %d %+v", code, list)
	}
	// Bad input is a 400 before any task.
	var e map[string]any
	if code := doJSON(t, "POST", srv.URL+"/api/cts", `{"name":"box","namespace":"ns"}`, &e); code != 400 || !strings.Contains(e["error"].(string), "image is required for a CT") {
		t.Fatalf("no image = %d %v", code, e)
	}
	if code := doJSON(t, "POST", srv.URL+"/api/cts", `{"name":"box","namespace":"ns","image":"docker.io/library/debian:bookworm","mem":"lots"}`, &e); code != 400 {
		t.Fatalf("bad mem = %d %v", code, e)
	}
	if code := doJSON(t, "POST", srv.URL+"/api/cts", `{"name":"box","image":"x","bogus":1}`, &e); code != 400 {
		t.Fatalf("unknown field = %d %v", code, e)
	}
	var created map[string]string
	code := doJSON(t, "POST", srv.URL+"/api/cts", `{"name":"box","namespace":"ns","image":"docker.io/library/debian:bookworm","cpu":2,"mem":"2Gi","disk":"10Gi","privileged":true}`, &created)
	if code != 202 || created["ref"] != "kubevirt/k/ns/box" || created["task"] == "" || created["name"] != "box" || created["namespace"] != "ns" {
		t.Fatalf("create = %d %v", code, created)
	}
	waitTask(t, tm, created["task"])
	if code := doJSON(t, "GET", srv.URL+"/api/cts", "", &list); code != 200 || len(list) != 1 {
		t.Fatalf("list = %d %+v", code, list)
	}
	want := ctJSON{Name: "box", Namespace: "ns", Node: "n1", Phase: "Running", Ready: true, Image: "docker.io/library/debian:bookworm", CPU: 2, Mem: "2Gi", Privileged: true, Ref: "kubevirt/k/ns/box", State: "running", Context: "kubevirt/k"}
	if list[0] != want {
		t.Fatalf("list[0] = %+v\nwant     %+v", list[0], want)
	}
	// Stop and start, by bare name and by ref.
	var st map[string]string
	if code := doJSON(t, "POST", srv.URL+"/api/cts/box/stop", "", &st); code != 200 || st["status"] != "ok" {
		t.Fatalf("stop = %d %v", code, st)
	}
	f.Refresh(context.Background())
	doJSON(t, "GET", srv.URL+"/api/cts", "", &list)
	if list[0].Phase != "Stopped" || list[0].Ready || list[0].Node != "" {
		t.Fatalf("after stop = %+v", list[0])
	}
	if code := doJSON(t, "POST", srv.URL+"/api/cts/box/stop", "", &e); code != 409 {
		t.Fatalf("stop twice = %d %v", code, e)
	}
	if code := doJSON(t, "POST", srv.URL+"/api/cts/kubevirt/k/ns/box/start", "", &st); code != 200 {
		t.Fatalf("start = %d %v", code, st)
	}
	if code := doJSON(t, "POST", srv.URL+"/api/cts/box/restart", "", &e); code != 400 {
		t.Fatalf("restart = %d %v", code, e)
	}
	// VMs are not acted on through /api/cts.
	if code := doJSON(t, "POST", srv.URL+"/api/cts/vm1/stop", "", &e); code != 404 {
		t.Fatalf("VM by name = %d %v", code, e)
	}
	if code := doJSON(t, "DELETE", srv.URL+"/api/cts/kubevirt/k/ns/vm1", "", &e); code != 404 {
		t.Fatalf("VM by ref = %d %v", code, e)
	}
	if code := doJSON(t, "DELETE", srv.URL+"/api/cts/box", "", &st); code != 200 || st["status"] != "deleted" {
		t.Fatalf("delete = %d %v", code, st)
	}
	if code := doJSON(t, "GET", srv.URL+"/api/cts", "", &list); code != 200 || len(list) != 0 {
		t.Fatalf("after delete = %d %+v", code, list)
	}
	if _, err := fb.Get(context.Background(), fb.ref("ns", "vm1")); err != nil {
		t.Fatalf("the VM went: %v", err)
	}
}

// A context that runs no containers refuses before any task.
func TestCTCreateUnsupported(t *testing.T) {
	srv, _, _ := ctServer(t, noCTs{newFakeCTs()})
	var e map[string]any
	if code := doJSON(t, "POST", srv.URL+"/api/cts", `{"name":"box","namespace":"ns","image":"docker.io/library/debian:bookworm"}`, &e); code != 400 {
		t.Fatalf("create on a backend without containers = %d %v", code, e)
	}
}

// noCTs hides CreateContainer.
type noCTs struct{ f *fakeCTs }

func (n noCTs) Kind() backends.Kind                                   { return n.f.Kind() }
func (n noCTs) Context() string                                       { return n.f.Context() }
func (n noCTs) List(ctx context.Context) ([]backends.Instance, error) { return n.f.List(ctx) }
func (n noCTs) Get(ctx context.Context, r backends.InstanceRef) (backends.Instance, error) {
	return n.f.Get(ctx, r)
}
func (n noCTs) Create(ctx context.Context, s backends.Spec) (backends.Instance, error) {
	return n.f.Create(ctx, s)
}
func (n noCTs) Power(ctx context.Context, r backends.InstanceRef, a backends.Action) error {
	return n.f.Power(ctx, r, a)
}
func (n noCTs) Delete(ctx context.Context, r backends.InstanceRef) error { return n.f.Delete(ctx, r) }

func waitTask(t *testing.T, tm *tasks.Manager, id string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		task, _, err := tm.Get(context.Background(), id)
		if err == nil && task.Status != store.TaskRunning {
			if task.Status != store.TaskDone {
				t.Fatalf("task %s = %+v", id, task)
			}
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("task %s did not end", id)
}
