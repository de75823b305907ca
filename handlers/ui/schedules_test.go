package ui_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/corral-dev/corral/app/auth"
	"github.com/corral-dev/corral/app/fleet"
	"github.com/corral-dev/corral/app/folders"
	"github.com/corral-dev/corral/app/instances"
	"github.com/corral-dev/corral/app/schedule"
	"github.com/corral-dev/corral/app/tasks"
	"github.com/corral-dev/corral/backends/sim"
	"github.com/corral-dev/corral/handlers/middleware"
	"github.com/corral-dev/corral/handlers/ui"
	"github.com/corral-dev/corral/static"
	"github.com/corral-dev/corral/store"
)

// TestSchedulesPage: the page lists schedules with their last result; an
// admin creates one with the form (full page and htmx), a bad cron is a
// 400 naming what is accepted, disable and delete work; a tick's result
// shows in the row.
func TestSchedulesPage(t *testing.T) {
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	f := fleet.New(fleet.Options{Logger: log})
	f.Add(sim.New(sim.Options{Context: "lab", Size: 5}))
	f.Refresh(ctx)
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "c.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	tm := tasks.New(st, tasks.Options{Logger: log})
	defer tm.Close()
	in := instances.New(f, tm, st, log)
	sched := schedule.New(st, f, tm, folders.New(st, f, tm, in, folders.Options{}), in, schedule.Options{Logger: log})
	assets, err := static.New()
	if err != nil {
		t.Fatal(err)
	}
	r := chi.NewRouter()
	r.Use(middleware.RequestID, middleware.Identify(auth.NewResolver(auth.Config{}, auth.NewPolicy(nil, false), auth.ResolverOptions{})))
	ui.Mount(r, ui.Deps{Instances: in, Fleet: f, Tasks: tm, Assets: assets, Log: log, Audit: auth.NewAuditor(st, log), Schedules: sched})
	e := &env{t: t, fleet: f, tasks: tm, handler: r}

	d := doc(t, e.get("/schedules", ""), http.StatusOK)
	if d.Find(testid("no-schedules")).Length() != 1 || d.Find(testid("schedule-create")).Length() != 1 || d.Find(testid("nav-schedules")).Length() != 1 {
		t.Fatal("an empty page lacks its hint, form or nav link")
	}
	form := url.Values{"ref": {"web-lab-0000"}, "what": {"stop"}, "cron": {"0 18 * * 1-5"}, "tz": {"Europe/Berlin"}}
	rec := e.do(http.MethodPost, "/schedules", "", strings.NewReader(form.Encode()))
	if rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != "/schedules" {
		t.Fatalf("plain form post = %d %q", rec.Code, rec.Header().Get("Location"))
	}
	// htmx: the #schedules fragment only, with the event the activity
	// panel listens to.
	form = url.Values{"folder": {""}, "ref": {"sim/lab/-/db-lab-0001"}, "what": {"snapshot"}, "keep": {"3"}, "cron": {"0 3 * * *"}, "tz": {"UTC"}}
	rec = e.do(http.MethodPost, "/schedules", "form#x", strings.NewReader(form.Encode()))
	d = doc(t, rec, http.StatusOK)
	if rec.Header().Get("HX-Trigger") != "corral:tasks" || d.Find("header.top").Length() != 0 {
		t.Fatalf("htmx create: trigger %q, full page %v", rec.Header().Get("HX-Trigger"), d.Find("header.top").Length() != 0)
	}
	rows := texts(d, testid("schedule-row"))
	if len(rows) != 2 || !strings.Contains(rows[0], "sim/lab/-/web-lab-0000") || !strings.Contains(rows[0], "stop") ||
		!strings.Contains(rows[1], "snapshot (keep 3)") || !strings.Contains(rows[1], "never ran") {
		t.Fatalf("rows = %q", rows)
	}

	bad := url.Values{"ref": {"web-lab-0000"}, "what": {"stop"}, "cron": {"@daily"}}
	rec = e.do(http.MethodPost, "/schedules", "form#x", strings.NewReader(bad.Encode()))
	if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "descriptors such as @daily") || rec.Header().Get("HX-Retarget") != "#flash" {
		t.Fatalf("bad cron = %d %q", rec.Code, rec.Body.String())
	}

	// A tick at the boundary: the row shows the result and links the task.
	list, _ := sched.List(ctx)
	berlin, _ := time.LoadLocation("Europe/Berlin")
	due := list[0].Next.In(berlin)
	if _, err := sched.Tick(ctx, due.Add(10*time.Second)); err != nil {
		t.Fatal(err)
	}
	d = doc(t, e.get("/schedules", "section#schedules"), http.StatusOK)
	if got := texts(d, testid("schedule-result")); len(got) != 1 || got[0] != "ok" {
		t.Fatalf("results after a tick = %q", got)
	}
	if href, _ := d.Find(testid("schedule-last") + " a").Attr("href"); !strings.HasPrefix(href, "/ui/tasks/") {
		t.Errorf("no link to the run's task: %q", href)
	}

	id := list[0].ID
	rec = e.do(http.MethodPost, "/schedules/"+itoa(id)+"/disable", "form#x", strings.NewReader(""))
	d = doc(t, rec, http.StatusOK)
	if d.Find(testid("schedule-disabled")).Length() != 1 || d.Find(testid("schedule-enable")).Length() != 1 {
		t.Fatal("disable did not show")
	}
	rec = e.do(http.MethodPost, "/schedules/"+itoa(id)+"/delete", "", strings.NewReader(""))
	if rec.Code != http.StatusSeeOther {
		t.Fatalf("delete = %d", rec.Code)
	}
	if l, _ := sched.List(ctx); len(l) != 1 {
		t.Fatalf("after delete: %d schedules", len(l))
	}
	audit, _ := tm.Audit(ctx, store.AuditFilter{Action: "schedule create"})
	if len(audit) != 3 {
		t.Errorf("schedule create audit rows = %d, want 3 (two ok, one refused)", len(audit))
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
