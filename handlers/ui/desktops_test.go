package ui_test

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/corral-dev/corral/app/auth"
	"github.com/corral-dev/corral/app/fleet"
	"github.com/corral-dev/corral/app/instances"
	"github.com/corral-dev/corral/app/tasks"
	"github.com/corral-dev/corral/app/vdi"
	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/backends/sim"
	"github.com/corral-dev/corral/handlers/middleware"
	"github.com/corral-dev/corral/handlers/ui"
	"github.com/corral-dev/corral/static"
	"github.com/corral-dev/corral/store"
)

// TestDesktopsPage: an end user sees the pools, gets a desktop, sees it
// as theirs, releases it, and a second user then gets it; an admin sees
// everyone's desktops; anonymous callers are sent to sign in (401).
func TestDesktopsPage(t *testing.T) {
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	lab := sim.New(sim.Options{Context: "lab"})
	if _, err := lab.Create(ctx, backends.Spec{Name: "gold", Type: backends.TypeVM, CPUs: 1, MemoryMiB: 512}); err != nil {
		t.Fatal(err)
	}
	f := fleet.New(fleet.Options{Logger: log})
	f.Add(lab)
	f.Refresh(ctx)
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "c.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	tm := tasks.New(st, tasks.Options{Logger: log})
	defer tm.Close()
	svc := vdi.New(vdi.Options{Fleet: f, Tasks: tm, Store: st, Log: log})
	if _, err := svc.CreatePool(ctx, tasks.Origin{Actor: "test", Surface: "cli"}, vdi.PoolRequest{Name: "desk", Golden: "sim/lab/-/gold", Size: 1}); err != nil {
		t.Fatal(err)
	}
	assets, err := static.New()
	if err != nil {
		t.Fatal(err)
	}
	ac := auth.Config{Admins: []string{"boss@example.com"}, TrustedProxies: []netip.Prefix{netip.MustParsePrefix("192.0.2.1/32")}}
	policy := auth.NewPolicy(ac.Admins, false)
	r := chi.NewRouter()
	r.Use(middleware.RequestID, middleware.Identify(auth.NewResolver(ac, policy, auth.ResolverOptions{})))
	ui.Mount(r, ui.Deps{Instances: instances.New(f, tm, st, log), Fleet: f, Tasks: tm, Assets: assets, Log: log,
		Policy: policy, Audit: auth.NewAuditor(st, log), VDI: svc})
	as := func(login, method, target string, form url.Values) *httptest.ResponseRecorder {
		var body io.Reader
		if form != nil {
			body = strings.NewReader(form.Encode())
		}
		req := httptest.NewRequest(method, target, body)
		if form != nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		if login != "" {
			req.Header.Set(auth.HeaderTailscaleLogin, login)
		}
		rec := httptest.NewRecorder()
		r.ServeHTTP(rec, req)
		return rec
	}

	if rec := as("", http.MethodGet, "/desktops", nil); rec.Code != http.StatusUnauthorized {
		t.Fatalf("anonymous GET /desktops = %d, want 401", rec.Code)
	}
	d := doc(t, as("alice@example.com", http.MethodGet, "/desktops", nil), http.StatusOK)
	if d.Find(`[data-testid="no-desktops"]`).Length() != 1 || d.Find(`[data-testid="pool-row"]`).Length() != 1 ||
		strings.TrimSpace(d.Find(`[data-testid="pool-free"]`).Text()) != "1 of 1" {
		t.Fatalf("alice's first view:\n%s", d.Find("main").Text())
	}
	if d.Find(`[data-testid="all-desktops"]`).Length() != 0 {
		t.Fatal("a user sees everyone's desktops")
	}
	rec := as("alice@example.com", http.MethodPost, "/desktops/claim", url.Values{"pool": {"vm/-/desk"}})
	if rec.Code != http.StatusSeeOther {
		t.Fatalf("claim = %d: %s", rec.Code, rec.Body.String())
	}
	d = doc(t, as("alice@example.com", http.MethodGet, rec.Header().Get("Location"), nil), http.StatusOK)
	row := d.Find(`[data-testid="my-desktops"] [data-testid="desktop-row"]`)
	if row.Length() != 1 || row.AttrOr("data-desktop", "") != "vm/-/desk-1" || strings.TrimSpace(row.Find(`[data-testid="desktop-phase"]`).Text()) != "Running" {
		t.Fatalf("alice's desktop rows:\n%s", d.Find("main").Text())
	}
	if !strings.Contains(d.Find(`[data-testid="desktops-notice"]`).Text(), "You hold vm/-/desk-1") {
		t.Fatalf("notice: %q", d.Find(`[data-testid="desktops-notice"]`).Text())
	}
	if _, ok := d.Find(`[data-testid="pool-claim"]`).Attr("disabled"); !ok {
		t.Fatal("Get a desktop is offered on a full pool")
	}
	// bob can neither release alice's desktop nor get one.
	if rec := as("bob@example.com", http.MethodPost, "/desktops/release", url.Values{"desktop": {"vm/-/desk-1"}}); rec.Code != http.StatusForbidden {
		t.Fatalf("bob's release of alice's desktop = %d, want 403", rec.Code)
	}
	if rec := as("bob@example.com", http.MethodPost, "/desktops/claim", url.Values{"pool": {"vm/-/desk"}}); rec.Code != http.StatusConflict {
		t.Fatalf("bob's claim of a full pool = %d, want 409", rec.Code)
	}
	// The admin sees everyone's.
	d = doc(t, as("boss@example.com", http.MethodGet, "/desktops", nil), http.StatusOK)
	if got := strings.TrimSpace(d.Find(`[data-testid="all-desktops"] [data-testid="desktop-owner"]`).Text()); got != "alice@example.com" {
		t.Fatalf("the admin's list of everyone's desktops: %q", got)
	}
	// alice releases; then bob gets it.
	if rec := as("alice@example.com", http.MethodPost, "/desktops/release", url.Values{"desktop": {"vm/-/desk-1"}}); rec.Code != http.StatusSeeOther {
		t.Fatalf("release = %d: %s", rec.Code, rec.Body.String())
	}
	for range 200 {
		if ds, _ := svc.Desktops(ctx, auth.Identity{Login: "boss@example.com", Admin: true}, true); len(ds) == 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if rec := as("bob@example.com", http.MethodPost, "/desktops/claim", url.Values{"pool": {"vm/-/desk"}}); rec.Code != http.StatusSeeOther {
		t.Fatalf("bob's claim after the release = %d: %s", rec.Code, rec.Body.String())
	}
	d = doc(t, as("bob@example.com", http.MethodGet, "/desktops", nil), http.StatusOK)
	if d.Find(`[data-testid="my-desktops"] [data-testid="desktop-row"]`).AttrOr("data-desktop", "") != "vm/-/desk-1" {
		t.Fatalf("bob's desktops:\n%s", d.Find("main").Text())
	}
	if d.Find(`[data-testid="nav-desktops"]`).Length() != 1 || d.Find(`[data-testid="desktop-pools-admin"]`).Length() != 0 {
		t.Fatal("bob's page: want the Desktops link in the navigation and no pools page link")
	}

	// htmx: the #desktops region alone, and a claim answered with it.
	hx := func(login, method, target, hxTarget string, form url.Values) *httptest.ResponseRecorder {
		var body io.Reader
		if form != nil {
			body = strings.NewReader(form.Encode())
		}
		req := httptest.NewRequest(method, target, body)
		if form != nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		req.Header.Set(auth.HeaderTailscaleLogin, login)
		req.Header.Set("HX-Request", "true")
		req.Header.Set("HX-Target", hxTarget)
		rec := httptest.NewRecorder()
		r.ServeHTTP(rec, req)
		return rec
	}
	rec = hx("bob@example.com", http.MethodGet, "/desktops", "div#desktops-live", nil)
	if rec.Code != 200 || strings.Contains(rec.Body.String(), "<html") || !strings.Contains(rec.Body.String(), `id="desktops"`) ||
		strings.Contains(rec.Body.String(), `id="desktop-console"`) {
		t.Fatalf("htmx #desktops = %d %.600s", rec.Code, rec.Body.String())
	}
	rec = hx("bob@example.com", http.MethodPost, "/desktops/claim", "div#desktops-live", url.Values{"pool": {"vm/-/desk"}})
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), "You hold vm/-/desk-1") || strings.Contains(rec.Body.String(), "<html") {
		t.Fatalf("htmx claim (a retry) = %d %.600s", rec.Code, rec.Body.String())
	}
	// Connect in the page: the region says why there is no console (the
	// simulated context has none), and refuses alice, who does not hold it.
	rec = hx("bob@example.com", http.MethodGet, "/desktops?connect=vm/-/desk-1", "section#desktop-console", nil)
	d = doc(t, rec, http.StatusOK)
	if d.Find(`[data-testid="desktop-console"] [data-testid="connect-error"]`).Length() != 1 || d.Find(`[data-testid="desktop-frame"]`).Length() != 0 {
		t.Fatalf("bob's connect region:\n%s", rec.Body.String())
	}
	d = doc(t, as("alice@example.com", http.MethodGet, "/desktops?connect=vm/-/desk-1", nil), http.StatusOK)
	if got := d.Find(`[data-testid="connect-error"]`).Text(); !strings.Contains(got, "not yours") {
		t.Fatalf("alice's connect to bob's desktop: %q", got)
	}

	// The pools page: admins only; create and delete with its forms.
	if rec := as("alice@example.com", http.MethodGet, "/desktops/pools", nil); rec.Code != http.StatusForbidden {
		t.Fatalf("a user's GET /desktops/pools = %d, want 403", rec.Code)
	}
	if rec := as("alice@example.com", http.MethodPost, "/desktops/pools", url.Values{"name": {"x"}, "from": {"sim/lab/-/gold"}, "size": {"1"}}); rec.Code != http.StatusForbidden {
		t.Fatalf("a user's pool create = %d, want 403", rec.Code)
	}
	d = doc(t, as("boss@example.com", http.MethodGet, "/desktops/pools", nil), http.StatusOK)
	if d.Find(`[data-testid="member-row"]`).Length() != 1 || strings.TrimSpace(d.Find(`[data-testid="member-holder"]`).Text()) != "bob@example.com" {
		t.Fatalf("the pools page:\n%s", d.Find("main").Text())
	}
	for _, bad := range []url.Values{
		{"name": {"two"}, "from": {"sim/lab/-/gold"}, "size": {"many"}},
		{"name": {"two"}, "from": {"sim/lab/-/gold"}, "size": {"0"}},
		{"name": {"two"}, "from": {"sim/lab/-/gold"}, "size": {"1"}, "ephemeral": {"maybe"}},
	} {
		if rec := as("boss@example.com", http.MethodPost, "/desktops/pools", bad); rec.Code != http.StatusBadRequest {
			t.Fatalf("pool create %v = %d, want 400", bad, rec.Code)
		}
	}
	rec = as("boss@example.com", http.MethodPost, "/desktops/pools", url.Values{"name": {"two"}, "from": {"sim/lab/-/gold"}, "size": {"2"}, "ephemeral": {"1"}})
	if rec.Code != http.StatusSeeOther {
		t.Fatalf("pool create = %d: %s", rec.Code, rec.Body.String())
	}
	d = doc(t, as("boss@example.com", http.MethodGet, rec.Header().Get("Location"), nil), http.StatusOK)
	if d.Find(`[data-testid="admin-pool"]`).Length() != 2 || d.Find(`[data-pool="vm/-/two"] [data-testid="member-row"]`).Length() != 2 ||
		!strings.Contains(d.Find(`[data-testid="pools-notice"]`).Text(), "vm/-/two created with 2 members") {
		t.Fatalf("the pools page after a create:\n%s", d.Find("main").Text())
	}
	if rec := as("boss@example.com", http.MethodPost, "/desktops/pools/delete", url.Values{"pool": {"vm/-/two"}}); rec.Code != http.StatusSeeOther {
		t.Fatalf("pool delete = %d: %s", rec.Code, rec.Body.String())
	}
	if ps, _ := svc.Pools(ctx); len(ps) != 1 {
		t.Fatalf("pools after the delete: %+v", ps)
	}

	// A release of the desktop whose console the page shows empties the
	// console region out of band; of another, it leaves it.
	rec = hx("bob@example.com", http.MethodPost, "/desktops/release", "div#desktops-live", url.Values{"desktop": {"vm/-/desk-1"}, "console": {"vm/-/other-1"}})
	if rec.Code != 200 || strings.Contains(rec.Body.String(), "hx-swap-oob") {
		t.Fatalf("release with another console shown = %d %.600s", rec.Code, rec.Body.String())
	}
	for range 200 { // the release is a task
		if ds, _ := svc.Desktops(ctx, auth.Identity{Login: "boss@example.com", Admin: true}, true); len(ds) == 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if rec := as("bob@example.com", http.MethodPost, "/desktops/claim", url.Values{"pool": {"vm/-/desk"}}); rec.Code != http.StatusSeeOther {
		t.Fatalf("bob's claim = %d", rec.Code)
	}
	rec = hx("bob@example.com", http.MethodPost, "/desktops/release", "div#desktops-live", url.Values{"desktop": {"vm/-/desk-1"}, "console": {"vm/-/desk-1"}})
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), `id="desktop-console"`) || !strings.Contains(rec.Body.String(), `hx-swap-oob="true"`) {
		t.Fatalf("release of the shown desktop = %d %.600s", rec.Code, rec.Body.String())
	}

	// The live stream: "desktops" once it starts (a change before the
	// subscription is not lost), then after each change of the claims.
	srv := httptest.NewServer(r)
	defer srv.Close()
	sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(sctx, http.MethodGet, srv.URL+"/ui/events", nil)
	req.Header.Set(auth.HeaderTailscaleLogin, "alice@example.com")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	next := func(want string) {
		t.Helper()
		for sc.Scan() {
			if sc.Text() == want {
				return
			}
		}
		t.Fatalf("the stream ended before %q: %v", want, sc.Err())
	}
	next("event: desktops")
	for range 200 { // bob's release (a task) ends
		if ds, _ := svc.Desktops(ctx, auth.Identity{Login: "boss@example.com", Admin: true}, true); len(ds) == 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	go func() {
		_, _ = svc.Claim(ctx, auth.Identity{Login: "alice@example.com", Via: auth.ViaTailscale}, "rest", "vm/-/desk")
	}()
	next("event: desktops")
}
