package api_test

import (
	"context"
	"encoding/json"
	"io"
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

const peerToken = "0123456789abcdef0123456789abcdef"

// vdiServer serves the REST API with the broker on (or off) over a pool
// of two clones in a simulated context; identities come from the real
// resolver: Tailscale serve headers from the trusted loopback proxy, and
// the peer token.
func vdiServer(t *testing.T, broker bool) *httptest.Server {
	t.Helper()
	return vdiServerOn(t, broker, sim.New(sim.Options{Context: "lab"}))
}

// vdiServerOn is vdiServer over lab, a simulated context named lab.
func vdiServerOn(t *testing.T, broker bool, lab backends.Backend) *httptest.Server {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "c.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
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
	deps := api.Deps{Fleet: f, Tasks: tm, Audit: auth.NewAuditor(st, nil)}
	if broker {
		svc := vdi.New(vdi.Options{Fleet: f, Tasks: tm, Store: st})
		if _, err := svc.CreatePool(ctx, tasks.Origin{Actor: "test", Surface: "cli"}, vdi.PoolRequest{Name: "desk", Golden: "sim/lab/-/gold", Size: 2}); err != nil {
			t.Fatal(err)
		}
		deps.VDI = svc
	}
	ac := auth.Config{Admins: []string{"boss@example.com"}, PeerToken: peerToken,
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32"), netip.MustParsePrefix("::1/128")}}
	policy := auth.NewPolicy(ac.Admins, false)
	deps.Policy = policy
	r := chi.NewRouter()
	r.Use(middleware.RequestID, middleware.Identify(auth.NewResolver(ac, policy, auth.ResolverOptions{})))
	r.Route("/api", func(r chi.Router) { api.Mount(r, deps) })
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	return srv
}

// call sends method path as login ("" anonymous, "peer" the peer token)
// and decodes the JSON answer into out when it is not nil.
func call(t *testing.T, srv *httptest.Server, method, path, login string, out any) int {
	t.Helper()
	req, _ := http.NewRequest(method, srv.URL+path, nil)
	switch login {
	case "":
	case "peer":
		req.Header.Set("Authorization", "Bearer "+peerToken)
	default:
		req.Header.Set(auth.HeaderTailscaleLogin, login)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		t.Fatalf("%s %s: content type %q, body %s", method, path, resp.Header.Get("Content-Type"), body)
	}
	if out != nil {
		if err := json.Unmarshal(body, out); err != nil {
			t.Fatalf("%s %s: %v in %s", method, path, err, body)
		}
	}
	return resp.StatusCode
}

func TestVDIBrokerOff(t *testing.T) {
	srv := vdiServer(t, false)
	for _, p := range []string{"/api/vdi/pools", "/api/vdi/desktops"} {
		if code := call(t, srv, http.MethodGet, p, "alice@example.com", nil); code != http.StatusNotFound {
			t.Errorf("GET %s with the broker off = %d, want 404", p, code)
		}
	}
	if code := call(t, srv, http.MethodPost, "/api/vdi/pools/vm/-/desk/claim", "alice@example.com", nil); code != http.StatusNotFound {
		t.Errorf("claim with the broker off = %d, want 404", code)
	}
}

type desktopJSON struct {
	ID         string `json:"id"`
	SessionID  string `json:"sessionId"`
	PoolID     string `json:"poolId"`
	Owner      string `json:"owner"`
	Phase      string `json:"phase"`
	Running    bool   `json:"running"`
	StartError string `json:"startError"`
}

func TestVDIBroker(t *testing.T) {
	srv := vdiServer(t, true)
	var errBody struct{ Error string }
	for _, tc := range []struct {
		name, method, path, login string
		want                      int
	}{
		{"anonymous pools", http.MethodGet, "/api/vdi/pools", "", 401},
		{"anonymous claim", http.MethodPost, "/api/vdi/pools/vm/-/desk/claim", "", 401},
		{"peer pools", http.MethodGet, "/api/vdi/pools", "peer", 403},
		{"peer claim", http.MethodPost, "/api/vdi/pools/vm/-/desk/claim", "peer", 403},
		{"unknown pool", http.MethodPost, "/api/vdi/pools/vm/-/nope/claim", "alice@example.com", 404},
		{"bad kind", http.MethodPost, "/api/vdi/pools/vz/-/desk/claim", "alice@example.com", 400},
		{"all by a user", http.MethodGet, "/api/vdi/desktops?all=1", "alice@example.com", 403},
		{"all=yes", http.MethodGet, "/api/vdi/desktops?all=yes", "boss@example.com", 400},
		{"unclaimed desktop", http.MethodGet, "/api/vdi/desktops/vm/-/desk-1", "alice@example.com", 404},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if code := call(t, srv, tc.method, tc.path, tc.login, &errBody); code != tc.want {
				t.Fatalf("%d (%s), want %d", code, errBody.Error, tc.want)
			}
			if errBody.Error == "" {
				t.Fatal("no error message")
			}
		})
	}

	var pools []struct {
		ID                     string
		Members, Claimed, Free int
	}
	if code := call(t, srv, http.MethodGet, "/api/vdi/pools", "alice@example.com", &pools); code != 200 || len(pools) != 1 || pools[0].ID != "vm/-/desk" || pools[0].Free != 2 {
		t.Fatalf("pools = %d %+v", code, pools)
	}
	var d, again, bobs desktopJSON
	if code := call(t, srv, http.MethodPost, "/api/vdi/pools/vm/-/desk/claim", "alice@example.com", &d); code != 200 ||
		d.Owner != "alice@example.com" || !d.Running || d.PoolID != "vm/-/desk" || d.SessionID == "" {
		t.Fatalf("claim = %d %+v", code, d)
	}
	if code := call(t, srv, http.MethodPost, "/api/vdi/pools/vm/-/desk/claim", "alice@example.com", &again); code != 200 || again.ID != d.ID {
		t.Fatalf("retry = %d %+v, want %s", code, again, d.ID)
	}
	call(t, srv, http.MethodPost, "/api/vdi/pools/vm/-/desk/claim", "bob@example.com", &bobs)
	if code := call(t, srv, http.MethodPost, "/api/vdi/pools/vm/-/desk/claim", "carol@example.com", &errBody); code != 409 {
		t.Fatalf("claim of a full pool = %d", code)
	}
	path := "/api/vdi/desktops/" + d.ID
	for _, tc := range []struct {
		method, path, login string
		want                int
	}{
		{http.MethodGet, path, "bob@example.com", 403},
		{http.MethodPost, path + "/start", "bob@example.com", 403},
		{http.MethodPost, path + "/release", "bob@example.com", 403},
		{http.MethodGet, path, "alice@example.com", 200},
		{http.MethodGet, path, "boss@example.com", 200},
		{http.MethodPost, path + "/start", "alice@example.com", 200},
		{http.MethodGet, path + "/connect", "bob@example.com", 403},
		{http.MethodGet, path + "/connect", "", 401},
		// The simulated context has no consoles: the typed refusal.
		{http.MethodGet, path + "/connect", "alice@example.com", 400},
	} {
		if code := call(t, srv, tc.method, tc.path, tc.login, nil); code != tc.want {
			t.Errorf("%s %s as %s = %d, want %d", tc.method, tc.path, tc.login, code, tc.want)
		}
	}
	var mine, all []desktopJSON
	if call(t, srv, http.MethodGet, "/api/vdi/desktops", "alice@example.com", &mine); len(mine) != 1 || mine[0].ID != d.ID {
		t.Fatalf("alice's desktops = %+v", mine)
	}
	if call(t, srv, http.MethodGet, "/api/vdi/desktops?all=1", "boss@example.com", &all); len(all) != 2 {
		t.Fatalf("all desktops = %+v", all)
	}
	var rel struct{ Desktop, Task string }
	if code := call(t, srv, http.MethodPost, path+"/release", "alice@example.com", &rel); code != 202 || rel.Desktop != d.ID || rel.Task == "" {
		t.Fatalf("release = %d %+v", code, rel)
	}
	var task struct{ Status string }
	for range 200 {
		call(t, srv, http.MethodGet, "/api/tasks/"+rel.Task, "alice@example.com", &task)
		if task.Status != "running" {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if task.Status != "done" {
		t.Fatalf("release task status %q", task.Status)
	}
	if code := call(t, srv, http.MethodGet, path, "alice@example.com", nil); code != 404 {
		t.Fatalf("released desktop = %d, want 404", code)
	}
	var carol desktopJSON
	if code := call(t, srv, http.MethodPost, "/api/vdi/pools/vm/-/desk/claim", "carol@example.com", &carol); code != 200 || carol.ID != d.ID {
		t.Fatalf("carol after the release = %d %+v", code, carol)
	}
}
