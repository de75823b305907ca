package ui_test

import (
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

// TestDesktopsPageNamespaces: the desktops page of a broker whose
// CORRAL_VDI_NAMESPACES leave out "-" shows neither the sim pool nor the
// desktop an admin assigned in it, and its claim form answers 404; with
// "-" listed, the same page shows both.
func TestDesktopsPageNamespaces(t *testing.T) {
	for _, tc := range []struct {
		namespaces []string
		served     bool
	}{{[]string{"desktops"}, false}, {[]string{"desktops", "-"}, true}} {
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
		t.Cleanup(func() { st.Close() })
		tm := tasks.New(st, tasks.Options{Logger: log})
		t.Cleanup(tm.Close)
		svc := vdi.New(vdi.Options{Fleet: f, Tasks: tm, Store: st, Log: log, Namespaces: tc.namespaces})
		admin := tasks.Origin{Actor: "test", Surface: "cli"}
		if _, err := svc.CreatePool(ctx, admin, vdi.PoolRequest{Name: "desk", Golden: "sim/lab/-/gold", Size: 2}); err != nil {
			t.Fatal(err)
		}
		held, err := svc.Assign(ctx, admin, "vm/-/desk", "alice@example.com")
		if err != nil {
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
			req.Header.Set(auth.HeaderTailscaleLogin, login)
			rec := httptest.NewRecorder()
			r.ServeHTTP(rec, req)
			return rec
		}
		want := 0
		if tc.served {
			want = 1
		}
		for _, login := range []string{"alice@example.com", "boss@example.com"} {
			d := doc(t, as(login, http.MethodGet, "/desktops", nil), http.StatusOK)
			if n := d.Find(`[data-testid="pool-row"]`).Length(); n != want {
				t.Errorf("namespaces %v: %s sees %d pool rows, want %d", tc.namespaces, login, n, want)
			}
			if n := d.Find(`[data-desktop="` + held.ID + `"]`).Length(); (n > 0) != tc.served {
				t.Errorf("namespaces %v: %s sees %s %d times", tc.namespaces, login, held.ID, n)
			}
		}
		rec := as("bob@example.com", http.MethodPost, "/desktops/claim", url.Values{"pool": {"vm/-/desk"}})
		if got := rec.Code == http.StatusNotFound; got == tc.served {
			t.Errorf("namespaces %v: claim = %d: %s", tc.namespaces, rec.Code, rec.Body.String())
		}
	}
}
