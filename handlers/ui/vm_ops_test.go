package ui_test

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"

	"github.com/corral-dev/corral/app/fleet"
	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/backends/sim"
	"github.com/corral-dev/corral/store"
)

// coreOnly hides every capability of a backend: the page of one of its
// instances must offer none of the forms.
type coreOnly struct{ backends.Backend }

// migrateOnly migrates but cannot list its nodes, as KubeVirt's backend:
// the migrate form asks for a node name or the scheduler.
type migrateOnly struct {
	backends.Backend
	backends.Migrator
}

const (
	cache2 = "/vm/sim/lab/-/cache-lab-0002" // stopped in a fresh sim
	bare0  = "/vm/sim/bare/-/web-bare-0000" // running, on a backend without capabilities
	kv0    = "/vm/sim/kv/-/web-kv-0000"     // running, on a backend that migrates only
)

// opsEnv is labEnv plus a context "bare" whose backend has only the core
// and a context "kv" that migrates only.
func opsEnv(t *testing.T) *env {
	e := labEnv(t)
	kv := sim.New(sim.Options{Context: "kv", Size: 3})
	for _, b := range []backends.Backend{coreOnly{sim.New(sim.Options{Context: "bare", Size: 3})}, migrateOnly{kv, kv}} {
		if err := e.fleet.Add(b); err != nil {
			t.Fatal(err)
		}
	}
	e.fleet.Refresh(context.Background())
	return e
}

// lastTask waits for the most recent task with action to end and returns it.
func (e *env) lastTask(action string) store.Task {
	e.t.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		ts, err := e.tasks.Recent(context.Background(), 10)
		if err != nil {
			e.t.Fatal(err)
		}
		i := slices.IndexFunc(ts, func(t store.Task) bool { return t.Action == action })
		if i >= 0 && ts[i].Status != store.TaskRunning {
			return ts[i]
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("no %s task ended: %+v", action, ts)
		}
	}
}

func TestVMOpsShownWhereSupported(t *testing.T) {
	e := opsEnv(t)
	for _, tc := range []struct {
		name, path string
		want       []string
	}{
		{"running on sim", web0, []string{"scale-form", "migrate-form"}},
		{"stopped on sim", cache2, []string{"scale-form", "template-form", "clone-form"}},
		{"no capabilities", bare0, nil},
		{"migrate only", kv0, []string{"migrate-form"}},
	} {
		d := doc(t, e.get(tc.path, ""), http.StatusOK)
		var got []string
		for _, id := range []string{"scale-form", "migrate-form", "template-form", "clone-form"} {
			f := d.Find(testid(id))
			if f.Length() == 0 {
				continue
			}
			got = append(got, id)
			if f.AttrOr("method", "") != "post" || !strings.HasPrefix(f.AttrOr("action", ""), tc.path+"/") || f.AttrOr("hx-post", "") != f.AttrOr("action", "") {
				t.Errorf("%s: %s is not a real POST form with htmx on top: %s %s", tc.name, id, f.AttrOr("method", ""), f.AttrOr("action", ""))
			}
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: forms %q, want %q", tc.name, got, tc.want)
		}
	}

	d := doc(t, e.get(web0, ""), http.StatusOK)
	if cpu, mem := d.Find(testid("scale-cpu")).AttrOr("value", ""), d.Find(testid("scale-mem")).AttrOr("value", ""); cpu != "1" || mem != "512Mi" {
		t.Errorf("scale form prefilled with %q, %q; want the current 1, 512Mi", cpu, mem)
	}
	var opts []string
	d.Find(testid("migrate-node") + " option").Each(func(_ int, o *goquery.Selection) { opts = append(opts, o.AttrOr("value", "?")) })
	if want := []string{"", "node-1", "node-2"}; !slices.Equal(opts, want) { // web-lab-0000 runs on node-0
		t.Errorf("migrate targets %q, want %q (the scheduler, then the other nodes)", opts, want)
	}
	if d.Find(testid("template-form")).Length() != 0 {
		t.Error("a running VM is offered the template mark")
	}

	// A backend that cannot list its nodes: a typed name, or the scheduler.
	d = doc(t, e.get(kv0, ""), http.StatusOK)
	if d.Find("input"+testid("migrate-node")).AttrOr("type", "") != "text" || d.Find(testid("migrate-scheduler")).AttrOr("name", "") != "scheduler" {
		t.Errorf("migrate form without a node list: %s", d.Find(testid("migrate-form")).Text())
	}
	rec := e.do(http.MethodPost, kv0+"/migrate", "section#summary", form(url.Values{"targetNode": {""}, "scheduler": {"1"}}))
	if d := doc(t, rec, http.StatusOK); !strings.Contains(d.Find(testid("notice")).Text(), "a node the scheduler chooses") {
		t.Errorf("migrate by the scheduler: %q", d.Find(testid("notice")).Text())
	}
	if tk := e.lastTask("migrate"); tk.Status != store.TaskDone || tk.Target != "sim/kv/-/web-kv-0000" {
		t.Errorf("migrate task = %+v", tk)
	}
}

func TestVMOpsHiddenFromNonAdmins(t *testing.T) {
	e := newAuthEnv(t, "alice@example.com")
	if d := doc(t, e.as("bob@example.com", "GET", "/vm/"+e.ref), http.StatusOK); d.Find(testid("vm-ops")).Length() != 0 {
		t.Error("a non-admin is shown the scale, template or clone forms")
	}
	if d := doc(t, e.as("alice@example.com", "GET", "/vm/"+e.ref), http.StatusOK); d.Find(testid("template-form")).Length() != 1 {
		t.Error("the admin is not shown the template form of a stopped VM")
	}
	for _, op := range []string{"scale", "migrate", "template", "clone"} {
		if rec := e.as("bob@example.com", "POST", "/vm/"+e.ref+"/"+op); rec.Code != http.StatusForbidden {
			t.Errorf("non-admin POST %s = %d, want 403", op, rec.Code)
		}
	}
}

func TestVMScaleForm(t *testing.T) {
	e := opsEnv(t)
	ref, _ := backends.ParseRef("sim/lab/-/web-lab-0000")

	rec := e.do(http.MethodPost, web0+"/scale", "section#summary", form(url.Values{"cpu": {"4"}, "mem": {"8G"}}))
	d := doc(t, rec, http.StatusOK)
	if rec.Header().Get("HX-Trigger") != "corral:tasks" {
		t.Errorf("HX-Trigger = %q", rec.Header().Get("HX-Trigger"))
	}
	// 8G is 8e9 bytes: 7630 MiB rounded up.
	if cpu, mem := d.Find(testid("fact-cpu")).Text(), d.Find(testid("fact-memory")).Text(); cpu != "4" || mem != "7630Mi" {
		t.Errorf("summary after scale: %s CPU, %s", cpu, mem)
	}
	if got := d.Find(testid("scale-cpu")).AttrOr("value", ""); got != "4" {
		t.Errorf("the form is prefilled with %q after the scale, want 4", got)
	}
	if !strings.Contains(d.Find(testid("notice")).Text(), "Scaled to 4 CPU") {
		t.Errorf("notice = %q", d.Find(testid("notice")).Text())
	}
	if in, _ := e.fleet.Snapshot().Find(ref); in.CPUs != 4 || in.MemoryMiB != 7630 {
		t.Errorf("snapshot after scale: %d CPU, %d MiB", in.CPUs, in.MemoryMiB)
	}
	if tk := e.lastTask("scale"); tk.Status != store.TaskDone || tk.Target != ref.String() || tk.Surface != "dashboard" {
		t.Errorf("scale task = %+v", tk)
	}
	if rows := tableRows(doc(t, e.get("/?q=web-lab-0000", ""), http.StatusOK)); len(rows) != 1 || rows[0]["cpu"] != "4" {
		t.Errorf("inventory after scale = %v", rows)
	}

	// Only the memory; without JavaScript, a 303 back to the page.
	rec = e.do(http.MethodPost, web0+"/scale", "", form(url.Values{"cpu": {""}, "mem": {"2Gi"}}))
	if rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != web0 {
		t.Errorf("plain POST: %d to %q", rec.Code, rec.Header().Get("Location"))
	}
	if in, _ := e.fleet.Snapshot().Find(ref); in.CPUs != 4 || in.MemoryMiB != 2048 {
		t.Errorf("after mem=2Gi: %d CPU, %d MiB; want 4, 2048", in.CPUs, in.MemoryMiB)
	}

	for _, tc := range []struct {
		name     string
		path     string
		v        url.Values
		status   int
		mentions string
	}{
		{"cpu 0", web0, url.Values{"cpu": {"0"}, "mem": {"2Gi"}}, http.StatusBadRequest, "from 1 to 512"},
		{"cpu not a number", web0, url.Values{"cpu": {"four"}}, http.StatusBadRequest, "from 1 to 512"},
		{"mem lots", web0, url.Values{"cpu": {"2"}, "mem": {"lots"}}, http.StatusBadRequest, "accepted are a number with an optional unit"},
		{"nothing", web0, url.Values{"cpu": {""}, "mem": {""}}, http.StatusBadRequest, "nothing to change"},
		{"backend without scale", bare0, url.Values{"cpu": {"2"}}, http.StatusBadRequest, "stop the instance and change it"},
	} {
		rec := e.do(http.MethodPost, tc.path+"/scale", "section#summary", form(tc.v))
		d := doc(t, rec, tc.status)
		if rec.Header().Get("HX-Retarget") != "#flash" || !strings.Contains(d.Text(), tc.mentions) {
			t.Errorf("%s: retarget %q, body %q; want the error area naming %q", tc.name, rec.Header().Get("HX-Retarget"), strings.TrimSpace(d.Text()), tc.mentions)
		}
	}
	if in, _ := e.fleet.Snapshot().Find(ref); in.CPUs != 4 || in.MemoryMiB != 2048 {
		t.Errorf("refused scales changed the VM: %d CPU, %d MiB", in.CPUs, in.MemoryMiB)
	}
}

func TestVMMigrateForm(t *testing.T) {
	e := opsEnv(t)
	ref, _ := backends.ParseRef("sim/lab/-/web-lab-0000")

	rec := e.do(http.MethodPost, web0+"/migrate", "section#summary", form(url.Values{"targetNode": {"node-2"}}))
	d := doc(t, rec, http.StatusOK)
	if rec.Header().Get("HX-Trigger") != "corral:tasks" || !strings.Contains(d.Find(testid("notice")).Text(), "Migration to node-2 started") {
		t.Fatalf("migrate answer: %s", rec.Body.String())
	}
	tk := e.lastTask("migrate")
	if tk.Status != store.TaskDone || tk.Progress != 100 {
		t.Fatalf("migrate task = %+v", tk)
	}
	_, lines, err := e.tasks.Get(context.Background(), tk.ID)
	if err != nil {
		t.Fatal(err)
	}
	var log []string
	for _, l := range lines {
		log = append(log, l.Line)
	}
	for _, phase := range []string{"Scheduling", "Running", "Succeeded"} {
		if !slices.ContainsFunc(log, func(l string) bool { return strings.HasSuffix(l, ": "+phase) }) {
			t.Errorf("the task's log has no phase %s: %q", phase, log)
		}
	}
	if in, _ := e.fleet.Snapshot().Find(ref); in.Node != "node-2" {
		t.Errorf("node after the migration = %q, want node-2", in.Node)
	}
	act := doc(t, e.get("/ui/activity", "aside#activity"), http.StatusOK)
	if got := act.Find(testid("task")).First().AttrOr("data-action", ""); got != "migrate" {
		t.Errorf("activity panel's first task = %q, want migrate", got)
	}

	// The scheduler button ignores a typed node.
	e.do(http.MethodPost, web0+"/migrate", "section#summary", form(url.Values{"targetNode": {"node-9"}, "scheduler": {"1"}}))
	if tk := e.lastTask("migrate"); tk.Status != store.TaskDone {
		t.Errorf("migrate by the scheduler = %+v", tk)
	}
	if in, _ := e.fleet.Snapshot().Find(ref); in.Node == "node-2" {
		t.Error("the scheduler left the VM where it was")
	}

	for _, tc := range []struct {
		name     string
		path     string
		node     string
		status   int
		mentions string
	}{
		{"unknown node", web0, "node-9", http.StatusBadRequest, "node-0, node-1, node-2"},
		{"stopped VM", cache2, "", http.StatusConflict, "start it first"},
		{"backend without migrate", bare0, "", http.StatusBadRequest, "use a cold move"},
	} {
		rec := e.do(http.MethodPost, tc.path+"/migrate", "section#summary", form(url.Values{"targetNode": {tc.node}}))
		d := doc(t, rec, tc.status)
		if rec.Header().Get("HX-Retarget") != "#flash" || !strings.Contains(d.Text(), tc.mentions) {
			t.Errorf("%s: retarget %q, body %q; want the error area naming %q", tc.name, rec.Header().Get("HX-Retarget"), strings.TrimSpace(d.Text()), tc.mentions)
		}
	}
}

func TestVMTemplateForm(t *testing.T) {
	e := opsEnv(t)
	ref, _ := backends.ParseRef("sim/lab/-/cache-lab-0002")

	rec := e.do(http.MethodPost, cache2+"/template", "section#summary", form(url.Values{"on": {"1"}}))
	d := doc(t, rec, http.StatusOK)
	if d.Find(testid("template-note")).Length() != 1 || d.Find(testid("template-unmark")).Length() != 1 || d.Find(testid("clone-form")).Length() != 1 {
		t.Fatalf("a template's summary lacks the note, the unmark button or the clone form: %s", rec.Body.String())
	}
	if d.Find(testid("action-start")).Length() != 0 {
		t.Error("a template is offered Start")
	}
	if in, _ := e.fleet.Snapshot().Find(ref); !in.Template {
		t.Error("the snapshot does not mark the template")
	}
	if tk := e.lastTask("template"); tk.Status != store.TaskDone || tk.Target != ref.String() {
		t.Errorf("template task = %+v", tk)
	}
	rows := doc(t, e.get("/?q=cache-lab", ""), http.StatusOK)
	marked := map[string]bool{}
	rows.Find(testid("instance-row")).Each(func(_ int, s *goquery.Selection) {
		marked[s.AttrOr("data-ref", "")] = s.Find(testid("template-mark")).Length() == 1
	})
	n := 0
	for _, m := range marked {
		if m {
			n++
		}
	}
	if !marked[ref.String()] || n != 1 || len(marked) < 2 {
		t.Errorf("inventory template marks = %v, want only %s", marked, ref)
	}
	// The backend's refusal of a start shows its remedy.
	rec = e.post(cache2+"/start", "section#summary")
	if fd := doc(t, rec, http.StatusBadRequest); !strings.Contains(fd.Text(), "clone it and start the clone") {
		t.Errorf("start of a template: %s", fd.Text())
	}

	// Clone it: the copy is no template and can start.
	rec = e.do(http.MethodPost, cache2+"/clone", "section#summary", form(url.Values{"name": {"from-tpl"}}))
	if d := doc(t, rec, http.StatusOK); !strings.Contains(d.Find(testid("notice")).Text(), "sim/lab/-/from-tpl") {
		t.Errorf("clone notice = %q", d.Find(testid("notice")).Text())
	}
	if tk := e.lastTask("clone"); tk.Status != store.TaskDone {
		t.Fatalf("clone task = %+v", tk)
	}
	if rec := e.post("/vm/sim/lab/-/from-tpl/start", "section#summary"); rec.Code != http.StatusOK {
		t.Errorf("start the clone: %d %s", rec.Code, rec.Body.String())
	}

	rec = e.do(http.MethodPost, cache2+"/template", "section#summary", form(url.Values{"on": {"0"}}))
	if d := doc(t, rec, http.StatusOK); d.Find(testid("template-note")).Length() != 0 || d.Find(testid("action-start")).Length() != 1 {
		t.Errorf("after unmarking: %s", rec.Body.String())
	}

	for _, tc := range []struct {
		name     string
		path     string
		on       string
		status   int
		mentions string
	}{
		{"running VM", web0, "1", http.StatusConflict, "stop it before"},
		{"on maybe", cache2, "maybe", http.StatusBadRequest, "1 marks the VM as a template, 0 unmarks it"},
		{"backend without the mark", "/vm/sim/bare/-/cache-bare-0002", "1", http.StatusBadRequest, "clone the instance instead"},
	} {
		rec := e.do(http.MethodPost, tc.path+"/template", "section#summary", form(url.Values{"on": {tc.on}}))
		d := doc(t, rec, tc.status)
		if rec.Header().Get("HX-Retarget") != "#flash" || !strings.Contains(d.Text(), tc.mentions) {
			t.Errorf("%s: retarget %q, body %q; want the error area naming %q", tc.name, rec.Header().Get("HX-Retarget"), strings.TrimSpace(d.Text()), tc.mentions)
		}
	}
}

// TestMigratePhaseInActivityPanel: while a migration runs, the activity
// panel shows its latest phase. The sim's failure injector holds the
// migration after its first phase until the panel has been read.
func TestMigratePhaseInActivityPanel(t *testing.T) {
	held, release := make(chan struct{}), make(chan struct{})
	calls := 0
	b := sim.New(sim.Options{Context: "lab", Size: 30, Fail: func(op string) error {
		if op == "migrate" {
			calls++ // the trigger, then one per phase: the third waits
			if calls == 3 {
				close(held)
				<-release
			}
		}
		return nil
	}})
	e := newEnv(t, fleet.Options{}, b)
	rec := e.do(http.MethodPost, web0+"/migrate", "section#summary", form(url.Values{"targetNode": {"node-1"}}))
	if rec.Code != http.StatusOK {
		t.Fatalf("migrate: %d %s", rec.Code, rec.Body.String())
	}
	<-held
	act := doc(t, e.get("/ui/activity", "aside#activity"), http.StatusOK)
	task := act.Find(testid("task") + `[data-action="migrate"]`)
	if task.AttrOr("data-status", "") != "running" || !strings.HasSuffix(strings.TrimSpace(task.Find(testid("task-last")).Text()), ": Scheduling") {
		t.Errorf("the panel during the migration: status %q, last line %q; want running at Scheduling",
			task.AttrOr("data-status", ""), task.Find(testid("task-last")).Text())
	}
	close(release)
	if tk := e.lastTask("migrate"); tk.Status != store.TaskDone {
		t.Fatalf("migrate task = %+v", tk)
	}
	act = doc(t, e.get("/ui/activity", "aside#activity"), http.StatusOK)
	if act.Find(testid("task-last")).Length() != 0 {
		t.Error("a finished task still shows its last line in the panel")
	}
}
