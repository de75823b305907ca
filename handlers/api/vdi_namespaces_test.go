package api_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/corral-dev/corral/app/auth"
	"github.com/corral-dev/corral/app/fleet"
	"github.com/corral-dev/corral/app/tasks"
	"github.com/corral-dev/corral/app/vdi"
	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/backends/sim"
	"github.com/corral-dev/corral/handlers/api"
	"github.com/corral-dev/corral/handlers/middleware"
	"github.com/corral-dev/corral/store"
)

// vdiServerNS is vdiServer with the broker serving namespaces only
// (CORRAL_VDI_NAMESPACES) over the sim pool vm/-/desk, assigned to alice
// by an admin.
func vdiServerNS(t *testing.T, namespaces ...string) *httptest.Server {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "c.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	lab := sim.New(sim.Options{Context: "lab"})
	if _, err := lab.Create(ctx, backends.Spec{Name: "gold", Type: backends.TypeVM, CPUs: 1, MemoryMiB: 512}); err != nil {
		t.Fatal(err)
	}
	f := fleet.New(fleet.Options{Timeout: time.Minute})
	if err := f.Add(lab); err != nil {
		t.Fatal(err)
	}
	f.Refresh(ctx)
	tm := tasks.New(st, tasks.Options{})
	t.Cleanup(tm.Close)
	svc := vdi.New(vdi.Options{Fleet: f, Tasks: tm, Store: st, Namespaces: namespaces})
	admin := tasks.Origin{Actor: "test", Surface: "cli"}
	if _, err := svc.CreatePool(ctx, admin, vdi.PoolRequest{Name: "desk", Golden: "sim/lab/-/gold", Size: 2}); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Assign(ctx, admin, "vm/-/desk", "alice@example.com"); err != nil {
		t.Fatal(err)
	}
	ac := auth.Config{Admins: []string{"boss@example.com"}, PeerToken: peerToken,
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32"), netip.MustParsePrefix("::1/128")}}
	policy := auth.NewPolicy(ac.Admins, false)
	deps := api.Deps{Fleet: f, Tasks: tm, Audit: auth.NewAuditor(st, nil), VDI: svc, Policy: policy}
	r := chi.NewRouter()
	r.Use(middleware.RequestID, middleware.Identify(auth.NewResolver(ac, policy, auth.ResolverOptions{})))
	r.Route("/api", func(r chi.Router) { api.Mount(r, deps) })
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	return srv
}

// TestVDIBrokerNamespaces: a pool outside CORRAL_VDI_NAMESPACES is to
// every /api/vdi/ route as if absent (404, even for an admin, and missing
// from the lists); the same pool in a broker serving "-" answers.
func TestVDIBrokerNamespaces(t *testing.T) {
	resize := func(srv *httptest.Server) int {
		req, _ := http.NewRequest(http.MethodPatch, srv.URL+"/api/vdi/pools/vm/-/desk", strings.NewReader(`{"size":3}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(auth.HeaderTailscaleLogin, "boss@example.com")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	routes := []struct{ method, path, login string }{
		{http.MethodPost, "/api/vdi/pools/vm/-/desk/claim", "bob@example.com"},
		{http.MethodGet, "/api/vdi/desktops/vm/-/desk-1", "boss@example.com"},
		{http.MethodPost, "/api/vdi/desktops/vm/-/desk-1/start", "boss@example.com"},
		{http.MethodGet, "/api/vdi/desktops/vm/-/desk-1/connect", "boss@example.com"},
		{http.MethodPost, "/api/vdi/desktops/vm/-/desk-1/release", "boss@example.com"},
	}

	out := vdiServerNS(t, "desktops")
	var pools []map[string]any
	if code := call(t, out, http.MethodGet, "/api/vdi/pools", "alice@example.com", &pools); code != 200 || len(pools) != 0 {
		t.Errorf("pools outside the namespaces = %d %v, want 200 []", code, pools)
	}
	var ds []desktopJSON
	if code := call(t, out, http.MethodGet, "/api/vdi/desktops?all=1", "boss@example.com", &ds); code != 200 || len(ds) != 0 {
		t.Errorf("every desktop outside the namespaces = %d %v, want 200 []", code, ds)
	}
	var errBody struct{ Error string }
	for _, r := range routes {
		errBody.Error = ""
		if code := call(t, out, r.method, r.path, r.login, &errBody); code != http.StatusNotFound || errBody.Error == "" {
			t.Errorf("%s %s outside the namespaces = %d %q, want 404", r.method, r.path, code, errBody.Error)
		}
	}
	errBody.Error = ""
	if code := call(t, out, http.MethodPost, "/api/vdi/pools/vm/-/desk/claim", "bob@example.com", &errBody); errBody.Error != "pool vm/-/desk does not exist" {
		t.Errorf("claim outside the namespaces = %d %q, want the message of an absent pool", code, errBody.Error)
	}
	if code := resize(out); code != http.StatusNotFound {
		t.Errorf("resize outside the namespaces = %d, want 404", code)
	}

	in := vdiServerNS(t, "desktops", "-")
	if code := call(t, in, http.MethodGet, "/api/vdi/pools", "alice@example.com", &pools); code != 200 || len(pools) != 1 || pools[0]["id"] != "vm/-/desk" {
		t.Errorf("pools serving - = %d %v", code, pools)
	}
	for _, r := range routes {
		if code := call(t, in, r.method, r.path, r.login, nil); code == http.StatusNotFound {
			t.Errorf("%s %s serving - = 404", r.method, r.path)
		}
	}
	if code := resize(in); code != http.StatusAccepted {
		t.Errorf("resize serving - = %d, want 202", code)
	}
}
