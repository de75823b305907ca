package ui_test

import (
	"net/http"
	"strings"
	"testing"
)

func TestActivityAndTaskPage(t *testing.T) {
	e := labEnv(t)
	if d := doc(t, e.get("/", ""), http.StatusOK); d.Find(testid("activity-empty")).Length() != 1 {
		t.Error("an empty activity panel does not say so")
	}
	for range 20 {
		for _, a := range []string{"stop", "start"} {
			if rec := e.post(web0+"/"+a, ""); rec.Code != http.StatusSeeOther {
				t.Fatalf("%s: %d", a, rec.Code)
			}
		}
	}

	full := doc(t, e.get("/ui/activity", ""), http.StatusOK)
	if full.Find(testid("brand")).Length() != 1 {
		t.Error("GET /ui/activity without htmx is not a page")
	}
	rec := e.get("/ui/activity", "aside#activity")
	d := doc(t, rec, http.StatusOK)
	if strings.Contains(rec.Body.String(), "<html") {
		t.Error("the activity fragment carries the page")
	}
	tasks := d.Find(testid("task"))
	if tasks.Length() != 15 {
		t.Fatalf("%d tasks in the panel, want the 15 most recent", tasks.Length())
	}
	first := tasks.First()
	if first.AttrOr("data-action", "") != "start" || first.Find(testid("task-status")).Text() != "done" ||
		!strings.Contains(first.Text(), "anonymous") || !strings.Contains(first.Text(), "sim/lab/-/web-lab-0000") {
		t.Errorf("newest task reads %q", strings.Join(strings.Fields(first.Text()), " "))
	}

	link := first.Find(testid("task-link")).AttrOr("href", "")
	td := doc(t, e.get(link, ""), http.StatusOK)
	if got := td.Find(testid("task-log")).Text(); !strings.Contains(got, "start sim/lab/-/web-lab-0000") || !strings.Contains(got, "start: done") {
		t.Errorf("task log = %q", got)
	}
	if rec := e.get(link, "section#task"); strings.Contains(rec.Body.String(), "<html") || rec.Code != http.StatusOK {
		t.Errorf("task fragment: %d %.200s", rec.Code, rec.Body.String())
	}
	if rec := e.get("/ui/tasks/no-such-task", ""); rec.Code != http.StatusNotFound {
		t.Errorf("unknown task: %d, want 404", rec.Code)
	}
}
