package ui_test

import (
	"context"
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
	"github.com/corral-dev/corral/app/instances"
	"github.com/corral-dev/corral/app/tasks"
	"github.com/corral-dev/corral/backends/sim"
	"github.com/corral-dev/corral/handlers/middleware"
	"github.com/corral-dev/corral/handlers/ui"
	"github.com/corral-dev/corral/static"
	"github.com/corral-dev/corral/store"
)

// authEnv is the dashboard with the allowlist {alice}; callers are named
// by Tailscale identity headers from httptest's trusted remote address.
type authEnv struct {
	h    http.Handler
	st   *store.Store
	ref  string
	open bool
}

func newAuthEnv(t *testing.T, admins ...string) *authEnv {
	t.Helper()
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	f := fleet.New(fleet.Options{Logger: log})
	if err := f.Add(sim.New(sim.Options{Context: "lab", Size: 5})); err != nil {
		t.Fatal(err)
	}
	f.Refresh(ctx)
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "c.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	tm := tasks.New(st, tasks.Options{Logger: log})
	t.Cleanup(tm.Close)
	assets, err := static.New()
	if err != nil {
		t.Fatal(err)
	}
	policy := auth.NewPolicy(admins, false)
	proxies, _ := auth.ParsePrefixes("192.0.2.0/24") // httptest.NewRequest's RemoteAddr
	r := chi.NewRouter()
	r.Use(middleware.RequestID, middleware.Identify(auth.NewResolver(auth.Config{TrustedProxies: proxies}, policy, auth.ResolverOptions{Log: log})))
	ui.Mount(r, ui.Deps{Instances: instances.New(f, tm, st, log), Fleet: f, Tasks: tm, Assets: assets, Log: log,
		Policy: policy, Audit: auth.NewAuditor(st, log)})
	pg, _ := f.Snapshot().Query(fleet.Query{State: "stopped"})
	return &authEnv{h: r, st: st, ref: pg.Instances[0].Ref.String(), open: len(admins) == 0}
}

func (e *authEnv) as(login, method, target string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, target, strings.NewReader(""))
	if method == http.MethodPost {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if login != "" {
		req.Header.Set("Tailscale-User-Login", login)
	}
	rec := httptest.NewRecorder()
	e.h.ServeHTTP(rec, req)
	return rec
}

func TestNonAdminSeesNoControls(t *testing.T) {
	e := newAuthEnv(t, "alice@example.com")
	d := doc(t, e.as("bob@example.com", "GET", "/vm/"+e.ref), http.StatusOK)
	if d.Find(testid("action-start")).Length() != 0 || d.Find(testid("action-delete")).Length() != 0 {
		t.Fatal("a non-admin is shown power or delete controls")
	}
	if d.Find(testid("actions-read-only")).Length() != 1 || d.Find(testid("read-only")).Length() != 1 {
		t.Fatal("the page does not say it is read only")
	}
	if got := texts(d, testid("user-login")); len(got) != 1 || got[0] != "bob@example.com" {
		t.Fatalf("user shown = %q", got)
	}
	if d.Find(testid("open-mode")).Length() != 0 {
		t.Fatal("the open-mode banner shows although an allowlist is set")
	}
	d = doc(t, e.as("alice@example.com", "GET", "/vm/"+e.ref), http.StatusOK)
	if d.Find(testid("action-start")).Length() != 1 || d.Find(testid("action-delete")).Length() != 1 {
		t.Fatal("the admin is not shown the controls")
	}
	// The server refuses what the page hides: the POST, and the delete
	// confirmation page.
	rec := e.as("bob@example.com", "POST", "/vm/"+e.ref+"/start")
	if rec.Code != http.StatusForbidden || !strings.Contains(rec.Body.String(), "bob@example.com is not an admin") {
		t.Fatalf("non-admin POST start = %d %.300s", rec.Code, rec.Body.String())
	}
	if rec := e.as("bob@example.com", "GET", "/vm/"+e.ref+"/delete"); rec.Code != http.StatusForbidden {
		t.Fatalf("non-admin delete confirmation = %d, want 403", rec.Code)
	}
	if rec := e.as("", "POST", "/vm/"+e.ref+"/start"); rec.Code != http.StatusUnauthorized {
		t.Fatalf("anonymous POST start = %d, want 401", rec.Code)
	}
}

func TestOpenModeBanner(t *testing.T) {
	e := newAuthEnv(t)
	d := doc(t, e.as("", "GET", "/"), http.StatusOK)
	if d.Find(testid("open-mode")).Length() != 1 {
		t.Fatal("no open-mode warning without an allowlist")
	}
	if d.Find(testid("read-only")).Length() != 0 {
		t.Fatal("an anonymous caller in open mode is marked read only")
	}
}

func TestAuditPage(t *testing.T) {
	e := newAuthEnv(t, "alice@example.com")
	if rec := e.as("alice@example.com", "POST", "/vm/"+e.ref+"/start"); rec.Code != http.StatusSeeOther {
		t.Fatalf("admin start = %d", rec.Code)
	}
	e.as("bob@example.com", "POST", "/vm/"+e.ref+"/stop")

	d := doc(t, e.as("bob@example.com", "GET", "/audit"), http.StatusOK)
	if n := d.Find(testid("audit-row")).Length(); n != 2 {
		t.Fatalf("audit rows = %d, want 2 (alice's start, bob's refused stop)", n)
	}
	d = doc(t, e.as("bob@example.com", "GET", "/audit?outcome=refused"), http.StatusOK)
	rows := d.Find(testid("audit-row"))
	if rows.Length() != 1 || rows.AttrOr("data-actor", "") != "bob@example.com" {
		t.Fatalf("refused rows = %d (%s)", rows.Length(), rows.AttrOr("data-actor", ""))
	}
	if v, _ := d.Find(`select[name="outcome"] option[selected]`).Attr("value"); v != "refused" {
		t.Fatalf("the outcome filter does not keep its value: %q", v)
	}
	// htmx: only the #audit region.
	req := httptest.NewRequest("GET", "/audit?actor=alice@example.com", nil)
	req.Header.Set("HX-Request", "true")
	req.Header.Set("HX-Target", "section#audit")
	rec := httptest.NewRecorder()
	e.h.ServeHTTP(rec, req)
	body := rec.Body.String()
	if rec.Code != 200 || strings.Contains(body, "<html") || !strings.Contains(body, `id="audit"`) || strings.Count(body, `data-testid="audit-row"`) != 1 {
		t.Fatalf("htmx audit = %d %.500s", rec.Code, body)
	}
}
