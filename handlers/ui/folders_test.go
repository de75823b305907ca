package ui_test

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"

	"github.com/corral-dev/corral/backends"
)

// form posts fields as an htmx request aimed at #folders, or as a plain
// form when htmx is "".
func (e *env) form(target, htmx string, fields url.Values) *httptest.ResponseRecorder {
	e.t.Helper()
	return e.do(http.MethodPost, target, htmx, strings.NewReader(fields.Encode()))
}

func TestFolderForms(t *testing.T) {
	e := labEnv(t)
	const tree = "nav#folders"
	web0, web1 := "sim/lab/-/web-lab-0000", "sim/lab/-/db-lab-0001"

	// Create a nested folder: the answer is the new tree, and the events
	// that refresh the inventory and the activity panel.
	rec := e.form("/folders", tree, url.Values{"path": {"team/web"}})
	d := doc(t, rec, http.StatusOK)
	if got := rec.Header().Get("HX-Trigger"); got != "corral:folders, corral:tasks" {
		t.Errorf("HX-Trigger = %q", got)
	}
	var paths []string
	d.Find(testid("folder")).Each(func(_ int, s *goquery.Selection) { paths = append(paths, s.AttrOr("data-folder", "")) })
	if !slices.Equal(paths, []string{"team", "team/web"}) {
		t.Fatalf("folders after create = %q", paths)
	}

	// Drop two instances on it (what drag-and-drop submits), one by name.
	for _, ref := range []string{web0, "db-lab-0001"} {
		if rec := e.form("/folders/members", tree, url.Values{"path": {"team/web"}, "ref": {ref}}); rec.Code != http.StatusOK {
			t.Fatalf("drop %s: %d %s", ref, rec.Code, rec.Body)
		}
	}
	d = doc(t, e.get("/?folder=team", ""), http.StatusOK)
	rows := tableRows(d)
	if len(rows) != 2 || rows[0]["ref"] != web1 || rows[1]["ref"] != web0 {
		t.Fatalf("inventory of folder team = %v", rows)
	}
	if got := d.Find(`[data-folder="team/web"] > ` + testid("folder-count")).Text(); got != "2" {
		t.Errorf("count of team/web = %q", got)
	}
	if v, ok := d.Find(`#filters input[name="folder"]`).Attr("value"); !ok || v != "team" {
		t.Errorf("the filter form does not keep the folder: %q", v)
	}

	// Bulk stop on the parent folder: each member a result; stopping
	// again skips them.
	if err := e.sims["lab"].Power(t.Context(), mustRef(t, web1), backends.ActionStop); err != nil {
		t.Fatal(err)
	}
	e.fleet.Refresh(t.Context())
	d = doc(t, e.form("/folders/action", tree, url.Values{"path": {"team"}, "action": {"stop"}}), http.StatusOK)
	got := map[string]string{}
	d.Find(testid("bulk-result")).Each(func(_ int, s *goquery.Selection) { got[s.AttrOr("data-ref", "")] = s.AttrOr("data-outcome", "") })
	if got[web0] != "ok" || got[web1] != "skipped" || len(got) != 2 {
		t.Errorf("bulk stop results = %v, want %s ok and %s skipped", got, web0, web1)
	}
	if s := d.Find(testid("bulk-summary")).Text(); !strings.Contains(s, "1 ok, 1 skipped, 0 failed") {
		t.Errorf("summary = %q", s)
	}
	if in, _ := e.fleet.Snapshot().Find(mustRef(t, web0)); in.State != backends.StateStopped {
		t.Errorf("%s is %s after the bulk stop", web0, in.State)
	}

	// Drag team/web to the top level, then rename it: members follow.
	if rec := e.form("/folders/move", tree, url.Values{"from": {"team/web"}, "parent": {""}}); rec.Code != http.StatusOK {
		t.Fatalf("drop folder to top: %d %s", rec.Code, rec.Body)
	}
	if rec := e.form("/folders/move", tree, url.Values{"from": {"web"}, "to": {"apps/web"}}); rec.Code != http.StatusOK {
		t.Fatalf("rename: %d %s", rec.Code, rec.Body)
	}
	if rows := tableRows(doc(t, e.get("/?folder=apps/web", ""), http.StatusOK)); len(rows) != 2 {
		t.Errorf("members after rename = %v", rows)
	}

	// Refusals reach #flash with their status; nothing changes.
	for _, tc := range []struct {
		target string
		fields url.Values
		status int
		msg    string
	}{
		{"/folders", url.Values{"path": {"a/b/c/d/e/f/g/h/i"}}, http.StatusBadRequest, "8"},
		{"/folders", url.Values{"path": {"apps"}}, http.StatusConflict, ""},
		{"/folders/move", url.Values{"from": {"apps"}, "to": {"apps/web/x"}}, http.StatusBadRequest, ""},
		{"/folders/action", url.Values{"path": {"apps"}, "action": {"explode"}}, http.StatusBadRequest, "start"},
		{"/folders/members", url.Values{"path": {"nope"}, "ref": {web0}}, http.StatusNotFound, ""},
	} {
		rec := e.form(tc.target, tree, tc.fields)
		if rec.Code != tc.status || rec.Header().Get("HX-Retarget") != "#flash" || !strings.Contains(rec.Body.String(), tc.msg) {
			t.Errorf("POST %s %v: %d (retarget %q), want %d into #flash mentioning %q; body %.300s",
				tc.target, tc.fields, rec.Code, rec.Header().Get("HX-Retarget"), tc.status, tc.msg, rec.Body)
		}
	}
	if rows := tableRows(doc(t, e.get("/?folder=apps", ""), http.StatusOK)); len(rows) != 2 {
		t.Errorf("a refusal changed the folder: %v", rows)
	}
	if rec := e.get("/?folder=nope", ""); rec.Code != http.StatusNotFound {
		t.Errorf("GET /?folder=nope: %d, want 404", rec.Code)
	}

	// Without JavaScript: a change redirects to the folder's inventory;
	// deleting unfolders the members and keeps the instances.
	rec = e.form("/folders/delete", "", url.Values{"path": {"apps"}})
	if rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != "/" {
		t.Errorf("plain delete: %d to %q", rec.Code, rec.Header().Get("Location"))
	}
	d = doc(t, e.get("/", ""), http.StatusOK)
	if n := d.Find(testid("folder")).Length(); n != 1 { // team is left
		t.Errorf("%d folders after delete, want 1", n)
	}
	if _, ok := e.fleet.Snapshot().Find(mustRef(t, web0)); !ok {
		t.Errorf("deleting the folder deleted %s", web0)
	}
	// A plain bulk action renders the page with its results.
	d = doc(t, e.form("/folders/action", "", url.Values{"path": {"team"}, "action": {"start"}}), http.StatusOK)
	if d.Find(testid("bulk-summary")).Length() != 1 || d.Find(testid("inventory")).Length() != 1 {
		t.Errorf("plain bulk action did not render the page with results")
	}
}

func mustRef(t *testing.T, s string) backends.InstanceRef {
	t.Helper()
	r, err := backends.ParseRef(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
