package api_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/corral-dev/corral/app/auth"
	"github.com/corral-dev/corral/app/fleet"
	"github.com/corral-dev/corral/app/folders"
	"github.com/corral-dev/corral/app/instances"
	"github.com/corral-dev/corral/app/schedule"
	"github.com/corral-dev/corral/app/tasks"
	"github.com/corral-dev/corral/backends/sim"
	"github.com/corral-dev/corral/handlers/api"
	"github.com/corral-dev/corral/handlers/middleware"
	"github.com/corral-dev/corral/store"
)

// scheduleServer is the REST API with schedules over a simulated lab, an
// admin allowlist of alice and identities from a trusted proxy header.
func scheduleServer(t testing.TB) (http.Handler, *store.Store) {
	t.Helper()
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "c.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	f := fleet.New(fleet.Options{Logger: log})
	f.Add(sim.New(sim.Options{Context: "lab", Size: 5}))
	f.Refresh(ctx)
	tm := tasks.New(st, tasks.Options{Logger: log})
	t.Cleanup(tm.Close)
	in := instances.New(f, tm, st, log)
	fo := folders.New(st, f, tm, in, folders.Options{})
	sched := schedule.New(st, f, tm, fo, in, schedule.Options{Logger: log})
	policy := auth.NewPolicy([]string{"alice@example"}, false)
	proxies, _ := auth.ParsePrefixes("192.0.2.0/24")
	r := chi.NewRouter()
	r.Use(middleware.RequestID, middleware.Identify(auth.NewResolver(auth.Config{TrustedProxies: proxies}, policy, auth.ResolverOptions{})))
	r.Route("/api", func(r chi.Router) {
		api.Mount(r, api.Deps{Instances: in, Fleet: f, Tasks: tm, Policy: policy, Audit: auth.NewAuditor(st, log), Folders: fo, Schedules: sched})
	})
	return r, st
}

func callAs(t testing.TB, h http.Handler, login, method, path, body string, out any) int {
	t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	req.RemoteAddr = "192.0.2.1:1"
	if login != "" {
		req.Header.Set("Tailscale-User-Login", login)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if out != nil {
		if err := json.Unmarshal(rec.Body.Bytes(), out); err != nil {
			t.Fatalf("%s %s: %d %q: %v", method, path, rec.Code, rec.Body, err)
		}
	}
	return rec.Code
}

type scheduleOut struct {
	ID                        int64
	Ref, Folder, Kind, Action string
	Cron, TZ, Next, CreatedBy string
	Enabled, InCluster        bool
	Task                      string
}

func TestScheduleRoutes(t *testing.T) {
	h, _ := scheduleServer(t)
	const alice, bob = "alice@example", "bob@example"
	var apiErr struct{ Error string }

	// Refusals: 400 naming what was wrong and what is accepted.
	for _, tc := range []struct{ body, want string }{
		{`{"ref":"web-lab-0000","kind":"power","action":"stop","cron":"@daily"}`, "descriptors such as @daily"},
		{`{"ref":"web-lab-0000","kind":"power","action":"stop","cron":"0 9 * * MON"}`, "day-of-week field \"MON\""},
		{`{"ref":"web-lab-0000","kind":"power","action":"stop","cron":"0 0 9 * * *"}`, "seconds field"},
		{`{"ref":"web-lab-0000","kind":"power","action":"stop","cron":"0 9 * * *","tz":"Moon/Base"}`, "IANA"},
		{`{"ref":"sim/lab/-/nope","kind":"power","action":"stop","cron":"0 9 * * *"}`, "does not exist"},
		{`{"folder":"nope","kind":"power","action":"stop","cron":"0 9 * * *"}`, "folder nope does not exist"},
		{`{"ref":"web-lab-0000","kind":"power","action":"stop","cron":"0 9 * * *","inCluster":true}`, "CronJob controller"},
		{`{"ref":"web-lab-0000","kind":"power","action":"stop","cron":"0 9 * * *","every":"day"}`, "unknown field"},
	} {
		if code := callAs(t, h, alice, "POST", "/api/schedules", tc.body, &apiErr); code != 400 || !strings.Contains(apiErr.Error, tc.want) {
			t.Errorf("POST %s = %d %q, want 400 with %q", tc.body, code, apiErr.Error, tc.want)
		}
	}

	// Changes are for admins; lists for every caller.
	body := `{"ref":"web-lab-0000","kind":"power","action":"stop","cron":"0 18 * * 1-5","tz":"Europe/Berlin"}`
	if code := callAs(t, h, bob, "POST", "/api/schedules", body, nil); code != http.StatusForbidden {
		t.Fatalf("a non-admin's create = %d, want 403", code)
	}
	var created scheduleOut
	if code := callAs(t, h, alice, "POST", "/api/schedules", body, &created); code != http.StatusCreated {
		t.Fatalf("create = %d", code)
	}
	if created.Ref != "sim/lab/-/web-lab-0000" || created.Cron != "0 18 * * 1-5" || created.TZ != "Europe/Berlin" || !created.Enabled ||
		created.CreatedBy != alice || created.Task == "" || !strings.HasSuffix(created.Next, "18:00:00+01:00") && !strings.HasSuffix(created.Next, "18:00:00+02:00") {
		t.Fatalf("created = %+v", created)
	}
	var list []scheduleOut
	if code := callAs(t, h, bob, "GET", "/api/schedules", "", &list); code != 200 || len(list) != 1 || list[0].ID != created.ID {
		t.Fatalf("list = %d %+v", code, list)
	}
	path := "/api/schedules/" + itoa(created.ID)
	var one scheduleOut
	if code := callAs(t, h, bob, "POST", path+"/disable", "", nil); code != http.StatusForbidden {
		t.Fatalf("a non-admin's disable = %d", code)
	}
	if code := callAs(t, h, alice, "POST", path+"/disable", "", &one); code != 200 || one.Enabled || one.Next != "" {
		t.Fatalf("disable = %d %+v", code, one)
	}
	if code := callAs(t, h, alice, "POST", path+"/enable", "", &one); code != 200 || !one.Enabled {
		t.Fatalf("enable = %d %+v", code, one)
	}
	if code := callAs(t, h, bob, "GET", path, "", &one); code != 200 || one.ID != created.ID {
		t.Fatalf("get = %d %+v", code, one)
	}
	if code := callAs(t, h, alice, "GET", "/api/schedules/x", "", &apiErr); code != 400 || !strings.Contains(apiErr.Error, "schedule id") {
		t.Fatalf("a bad id = %d %q", code, apiErr.Error)
	}
	if code := callAs(t, h, bob, "DELETE", path, "", nil); code != http.StatusForbidden {
		t.Fatalf("a non-admin's delete = %d", code)
	}
	if code := callAs(t, h, alice, "DELETE", path, "", nil); code != 200 {
		t.Fatalf("delete = %d", code)
	}
	if code := callAs(t, h, alice, "DELETE", path, "", &apiErr); code != 404 {
		t.Fatalf("second delete = %d", code)
	}
	if code := callAs(t, h, alice, "GET", "/api/schedules", "", &list); code != 200 || len(list) != 0 {
		t.Fatalf("list after delete = %d %+v", code, list)
	}
}

func itoa(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}
