package auth_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/corral-dev/corral/app"
	"github.com/corral-dev/corral/app/auth"
	"github.com/corral-dev/corral/app/fleet"
	"github.com/corral-dev/corral/app/instances"
	apppve "github.com/corral-dev/corral/app/pve"
	"github.com/corral-dev/corral/app/tasks"
	"github.com/corral-dev/corral/backends/sim"
	"github.com/corral-dev/corral/handlers/middleware"
	pvehandlers "github.com/corral-dev/corral/handlers/pve"
	"github.com/corral-dev/corral/store"
)

// route is one route of the real router with the rule its surface's
// route table gave it.
type route struct {
	method, pattern string
	rule            auth.Rule
}

// walkRoutes returns every route of h (a chi router) and the routes that
// have no access rule.
func walkRoutes(t *testing.T, h http.Handler) (ruled []route, missing []string) {
	t.Helper()
	mux, ok := h.(chi.Routes)
	if !ok {
		t.Fatalf("the handler is a %T, not a chi router", h)
	}
	err := chi.Walk(mux, func(method, pattern string, h http.Handler, mws ...func(http.Handler) http.Handler) error {
		rule, ok := middleware.RuleOf(h, mws...)
		if !ok {
			missing = append(missing, method+" "+pattern)
			return nil
		}
		ruled = append(ruled, route{method, pattern, rule})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return ruled, missing
}

// TestWalkFindsRoutesWithoutRule shows the access table cannot be
// silently incomplete: a route added without a rule is found.
func TestWalkFindsRoutesWithoutRule(t *testing.T) {
	r := chi.NewRouter()
	g := &middleware.Guard{}
	g.Route(r, http.MethodGet, "/ruled", auth.Read, http.NotFoundHandler())
	r.Get("/forgotten", http.NotFoundHandler().ServeHTTP)
	r.Route("/sub", func(r chi.Router) {
		r.With(g.RequireAdmin()).Post("/guarded", http.NotFoundHandler().ServeHTTP)
	})
	ruled, missing := walkRoutes(t, r)
	if len(missing) != 1 || missing[0] != "GET /forgotten" {
		t.Fatalf("routes without a rule = %q, want only GET /forgotten", missing)
	}
	if len(ruled) != 2 || ruled[1].rule != auth.Admin && ruled[0].rule != auth.Admin {
		t.Fatalf("ruled routes = %+v, want /ruled (read) and /sub/guarded (admin)", ruled)
	}
}

// The identities of the access table. "user" and "admin" come from the
// identity headers of a trusted proxy; "spoofed" sends admin's headers
// from an address that is not trusted, and must fare as "anonymous".
var identities = []struct {
	name    string
	remote  string
	headers map[string]string
}{
	{"anonymous", "127.0.0.1:40000", nil},
	{"user", "127.0.0.1:40000", map[string]string{"Tailscale-User-Login": "bob@example.com"}},
	{"admin", "127.0.0.1:40000", map[string]string{"Tailscale-User-Login": "alice@example.com"}},
	{"peer", "203.0.113.7:40000", map[string]string{"Authorization": "Bearer " + peerToken}},
	{"spoofed", "203.0.113.7:40000", map[string]string{"Tailscale-User-Login": "alice@example.com"}},
}

// expect is the status an identity must get from a route of rule: 0 for
// "let through" (any status but 401 and 403), else 401 or 403. It is
// written from the trust model in docs/security.md, not from the code.
func expect(rule auth.Rule, who string, allowlist, required bool) int {
	switch {
	case rule == auth.Public:
		return 0
	case who == "peer":
		if rule == auth.User {
			return 403
		}
		return 0
	case who == "anonymous" || who == "spoofed":
		switch {
		case required || rule == auth.User:
			return 401
		case rule == auth.Read:
			return 0
		case allowlist:
			return 401
		}
		return 0
	case who == "user":
		// A Holder route (a console) lets a non-admin through to its own
		// check, which refuses every instance that is not a desktop the
		// caller holds: the sim instance of the table is none.
		if allowlist && (rule == auth.Admin || rule == auth.Privileged || rule == auth.Holder) {
			return 403
		}
		return 0
	}
	return 0 // admin
}

// TestAccessTable requests every route of every surface of the real
// router as every identity, in open mode and with the allowlist, with
// and without CORRAL_AUTH_REQUIRED, and checks the status against the
// route's rule. A route without a rule fails it.
func TestAccessTable(t *testing.T) {
	modes := []struct {
		name                string
		allowlist, required bool
	}{{"open", false, false}, {"open+required", false, true}, {"allowlist", true, false}, {"allowlist+required", true, true}}
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			ctx := context.Background()
			cfg := app.Config{DataDir: t.TempDir(), Demo: true, DemoSize: 9, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
			cfg.Auth.PeerToken = peerToken
			cfg.Auth.Required = m.required
			cfg.VDI.Broker = true // the broker's /api/vdi/ routes (auth.User) are in the table
			cfg.Auth.TrustedProxies, _ = auth.ParsePrefixes("127.0.0.1")
			if m.allowlist {
				cfg.Auth.Admins = []string{"alice@example.com"}
			}
			a, err := app.New(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			a.Fleet.Refresh(ctx)
			pg, err := a.Fleet.Snapshot().Query(fleet.Query{Context: "sim/lab"})
			if err != nil || len(pg.Instances) == 0 {
				t.Fatalf("no instance in sim/lab: %v", err)
			}
			ref := pg.Instances[0].Ref.String()

			routes, missing := walkRoutes(t, a.Handler())
			if len(missing) > 0 {
				t.Fatalf("routes without an access rule (add one in the surface's routes.go): %q", missing)
			}
			checked := 0
			for _, rt := range routes {
				if rt.method == http.MethodConnect || rt.method == http.MethodTrace {
					continue
				}
				path := concrete(rt, ref)
				for _, id := range identities {
					want := expect(rt.rule, id.name, m.allowlist, m.required)
					if strings.HasPrefix(path, "/api2/json/") {
						want = expectPVE(rt.rule, "")
					}
					got := call(a.Handler(), rt.method, path, id.remote, id.headers)
					checked++
					switch {
					case want == 0 && (got == 401 || got == 403 || got >= 500 && got != 503):
						t.Errorf("%s %s (%s) as %s: %d, want it let through", rt.method, path, rt.rule, id.name, got)
					case want != 0 && got != want:
						t.Errorf("%s %s (%s) as %s: %d, want %d", rt.method, path, rt.rule, id.name, got, want)
					}
				}
			}
			t.Logf("%d routes × %d identities: %d requests checked", len(routes), len(identities), checked)
			if m.allowlist {
				refused, err := a.Store.ListAudit(ctx, store.AuditFilter{Actor: "bob@example.com", Outcome: "refused"})
				if err != nil || len(refused) == 0 {
					t.Fatalf("the refused changes of a non-admin are not in the audit log (%v)", err)
				}
				if !strings.Contains(refused[0].Detail, "403") {
					t.Fatalf("refusal audit row %+v does not say 403", refused[0])
				}
			}
		})
	}
}

// concrete turns a route pattern into a path to request.
func concrete(rt route, ref string) string {
	p := strings.ReplaceAll(rt.pattern, "{id}", "nope")
	if strings.HasSuffix(p, "/*") {
		tail := ref
		switch {
		case strings.HasPrefix(p, "/static/"):
			tail = "nope.css"
		case strings.HasPrefix(p, "/rdp-token/"):
			tail = ref // the console's own check must answer, not a 404 for the path
		case rt.method == http.MethodPost:
			tail = ref + "/start"
		}
		p = strings.TrimSuffix(p, "*") + tail
	}
	return p
}

func call(h http.Handler, method, path, remote string, headers map[string]string) int {
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	var body io.Reader
	if method == http.MethodPost || method == http.MethodPut || method == http.MethodPatch {
		body = strings.NewReader("{}")
	}
	req := httptest.NewRequestWithContext(ctx, method, path, body)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
		if !strings.HasPrefix(path, "/api/") {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
	}
	req.RemoteAddr = remote
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code
}

// expectPVE is the status a caller gets from a route of the Proxmox
// surface: it accepts only PVE credentials (a ticket or an API token), so
// without one (who "") every route but the login is a 401 in every mode;
// with one, "user" (not on the allowlist) may only read.
func expectPVE(rule auth.Rule, who string) int {
	switch {
	case rule == auth.Public:
		return 0
	case who == "":
		return 401
	case who == "user" && rule != auth.Read:
		return 403
	}
	return 0
}

// TestPVEAccessTable walks the Proxmox surface's router (handlers/pve)
// with PVE credentials: an admin token, a token of a user who is not on
// the allowlist, a wrong token, and none; in open mode and with the
// allowlist. A route without a rule fails it.
func TestPVEAccessTable(t *testing.T) {
	for _, allowlist := range []bool{false, true} {
		t.Run(map[bool]string{false: "open", true: "allowlist"}[allowlist], func(t *testing.T) {
			ctx := context.Background()
			log := slog.New(slog.NewTextHandler(io.Discard, nil))
			st, err := store.Open(ctx, t.TempDir()+"/c.db", store.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			var admins []string
			if allowlist {
				admins = []string{"alice@pve"}
			}
			policy := auth.NewPolicy(admins, false)
			tm := tasks.New(st, tasks.Options{Logger: log})
			defer tm.Close()
			f := fleet.New(fleet.Options{Logger: log})
			if err := f.Add(sim.New(sim.Options{Context: "lab", Size: 2})); err != nil {
				t.Fatal(err)
			}
			f.Refresh(ctx)
			svc, err := apppve.New(ctx, apppve.Options{Fleet: f, Instances: instances.New(f, tm, st, log), Tasks: tm, Store: st, Policy: policy, Log: log})
			if err != nil {
				t.Fatal(err)
			}
			r := chi.NewRouter()
			r.Route("/api2/json", func(r chi.Router) {
				pvehandlers.Mount(r, pvehandlers.Deps{Service: svc, Policy: policy, Audit: auth.NewAuditor(st, log), Admins: admins, Log: log})
			})
			adminTok, _ := svc.CreateToken(ctx, "alice@pve", "ci", "")
			userTok, _ := svc.CreateToken(ctx, "bob@pve", "ci", "")
			who := map[string]string{"admin": adminTok, "user": userTok, "": "", "wrong": "alice@pve!ci=nope"}
			routes, missing := walkRoutes(t, r)
			if len(missing) > 0 {
				t.Fatalf("routes without an access rule: %q", missing)
			}
			for _, rt := range routes {
				path := strings.NewReplacer("{node}", "sim-lab", "{vmid}", "999", "{upid}", "UPID:sim-lab:00000001:00000001:00000001:qmstart:999:root@pam:",
					"{storage}", "local", "{volid}", "local:vm-999-disk-0", "{snapname}", "s", "{userid}", "alice@pve", "{sid}", "vm:999",
					"{poolid}", "p", "{action}", "start").Replace(rt.pattern)
				for name, tok := range who {
					want := expectPVE(rt.rule, name)
					if name == "wrong" {
						want = expectPVE(rt.rule, "")
					}
					if name == "user" && !allowlist {
						want = expectPVE(rt.rule, "admin")
					}
					h := map[string]string{}
					if tok != "" {
						h["Authorization"] = "PVEAPIToken=" + tok
					}
					got := call(r, rt.method, path, "127.0.0.1:40000", h)
					switch {
					case want == 0 && (got == 401 || got == 403):
						t.Errorf("%s %s (%s) as %q: %d, want it let through", rt.method, path, rt.rule, name, got)
					case want != 0 && got != want:
						t.Errorf("%s %s (%s) as %q: %d, want %d", rt.method, path, rt.rule, name, got, want)
					}
				}
			}
			t.Logf("%d pve routes checked", len(routes))
		})
	}
}
