package ui_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"

	"github.com/corral-dev/corral/backends"
)

const web0 = "/vm/sim/lab/-/web-lab-0000" // running in a fresh sim

func TestVMPageFullAndFragment(t *testing.T) {
	e := labEnv(t)
	for _, path := range []string{web0, "/vm/web-lab-0000"} { // canonical ref and bare name
		d := doc(t, e.get(path, ""), http.StatusOK)
		if got := d.Find(testid("vm-name")).Text(); got != "web-lab-0000" {
			t.Errorf("%s: name = %q", path, got)
		}
		for id, want := range map[string]string{"vm-state": "running", "fact-cpu": "1", "fact-memory": "512Mi",
			"fact-disk": "10Gi", "fact-ref": "sim/lab/-/web-lab-0000", "fact-context": "sim/lab", "fact-backend": "sim"} {
			if got := strings.TrimSpace(d.Find(testid(id)).Text()); got != want {
				t.Errorf("%s: %s = %q, want %q", path, id, got, want)
			}
		}
		if d.Find(testid("activity")).Length() != 1 {
			t.Errorf("%s: no activity panel", path)
		}
	}

	d := doc(t, e.get(web0, ""), http.StatusOK)
	var actions []string
	d.Find(testid("actions") + " form").Each(func(_ int, f *goquery.Selection) {
		method, _ := f.Attr("method")
		action, _ := f.Attr("action")
		if method != "post" || action != web0+"/"+strings.TrimPrefix(f.Find("button").AttrOr("data-testid", ""), "action-") {
			t.Errorf("power form %s %s is not a real POST form to its action", method, action)
		}
		actions = append(actions, strings.TrimPrefix(f.Find("button").AttrOr("data-testid", ""), "action-"))
	})
	if want := []string{"shutdown", "stop", "restart", "pause"}; !slices.Equal(actions, want) {
		t.Errorf("actions of a running VM = %q, want %q", actions, want)
	}

	rec := e.get(web0, "section#summary")
	fd := doc(t, rec, http.StatusOK)
	if strings.Contains(rec.Body.String(), "<html") || fd.Find("#summary").Length() != 1 {
		t.Fatalf("summary fragment: %.300s", rec.Body.String())
	}

	if rec := e.get("/vm/sim/lab/-/nope", ""); rec.Code != http.StatusNotFound {
		t.Errorf("unknown VM: status %d, want 404", rec.Code)
	}
}

func TestVMPowerAction(t *testing.T) {
	e := labEnv(t)
	ref, _ := backends.ParseRef("sim/lab/-/web-lab-0000")

	rec := e.post(web0+"/stop", "section#summary")
	d := doc(t, rec, http.StatusOK)
	if got := rec.Header().Get("HX-Trigger"); got != "corral:tasks" {
		t.Errorf("HX-Trigger = %q", got)
	}
	if got := d.Find(testid("vm-state")).Text(); got != "stopped" {
		t.Errorf("summary after stop shows %q", got)
	}
	if got := texts(d, testid("actions")+" button"); !slices.Equal(got, []string{"Start"}) {
		t.Errorf("actions of a stopped VM = %q", got)
	}
	if in, ok := e.fleet.Snapshot().Find(ref); !ok || in.State != backends.StateStopped {
		t.Errorf("snapshot state = %q, want stopped", in.State)
	}
	ts, err := e.tasks.Recent(context.Background(), 5)
	if err != nil || len(ts) != 1 || ts[0].Action != "stop" || ts[0].Target != ref.String() || ts[0].Status != "done" || ts[0].Surface != "dashboard" {
		t.Fatalf("tasks = %+v, %v; want one done stop of %s from the dashboard", ts, err, ref)
	}
	if rows := tableRows(doc(t, e.get("/?q=web-lab-0000", ""), http.StatusOK)); len(rows) != 1 || rows[0]["state"] != "stopped" {
		t.Errorf("table after stop = %v", rows)
	}
	act := doc(t, e.get("/ui/activity", "aside#activity"), http.StatusOK)
	if got := act.Find(testid("task")).AttrOr("data-action", ""); got != "stop" {
		t.Errorf("activity panel's first task = %q", got)
	}

	// Without JavaScript: a 303 back to the VM page.
	rec = e.post(web0+"/start", "")
	if rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != web0 {
		t.Errorf("plain POST: %d to %q, want 303 to %s", rec.Code, rec.Header().Get("Location"), web0)
	}
	if in, _ := e.fleet.Snapshot().Find(ref); in.State != backends.StateRunning {
		t.Errorf("after start the snapshot says %q", in.State)
	}

	for _, tc := range []struct {
		path   string
		status int
	}{
		{web0 + "/start", http.StatusConflict}, // already running
		{web0 + "/explode", http.StatusBadRequest},
		{"/vm/sim/lab/-/ghost/stop", http.StatusNotFound},
	} {
		rec := e.post(tc.path, "section#summary")
		if rec.Code != tc.status || rec.Header().Get("HX-Retarget") != "#flash" {
			t.Errorf("POST %s: %d (retarget %q), want %d into #flash", tc.path, rec.Code, rec.Header().Get("HX-Retarget"), tc.status)
		}
	}
}

func TestVMDelete(t *testing.T) {
	e := labEnv(t)
	ref, _ := backends.ParseRef("sim/lab/-/db-lab-0001")
	path := "/vm/" + ref.String()

	d := doc(t, e.get(path+"/delete", ""), http.StatusOK)
	form := d.Find(testid("delete-confirm") + " form")
	if form.AttrOr("method", "") != "post" || form.AttrOr("action", "") != path+"/delete" {
		t.Errorf("confirmation form: method %q action %q", form.AttrOr("method", ""), form.AttrOr("action", ""))
	}
	if _, ok := e.fleet.Snapshot().Find(ref); !ok {
		t.Fatal("showing the confirmation deleted the VM")
	}
	rec := e.get(path+"/delete", "section#summary")
	if fd := doc(t, rec, http.StatusOK); fd.Find(testid("confirm-delete")).Length() != 1 || strings.Contains(rec.Body.String(), "<html") {
		t.Errorf("confirmation fragment: %.300s", rec.Body.String())
	}

	rec = e.post(path+"/delete", "")
	if rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != "/" {
		t.Fatalf("delete: %d to %q, want 303 to /", rec.Code, rec.Header().Get("Location"))
	}
	if _, ok := e.fleet.Snapshot().Find(ref); ok {
		t.Error("the VM is still in the snapshot")
	}
	rec = e.post("/vm/sim/lab/-/db-lab-0009/delete", "form")
	if rec.Code != http.StatusOK || rec.Header().Get("HX-Redirect") != "/" {
		t.Errorf("htmx delete: %d, HX-Redirect %q", rec.Code, rec.Header().Get("HX-Redirect"))
	}
	if rec := e.get(path, ""); rec.Code != http.StatusNotFound {
		t.Errorf("deleted VM page: %d, want 404", rec.Code)
	}
}
