package api_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/corral-dev/corral/app/auth"
	"github.com/corral-dev/corral/handlers/api"
	"github.com/corral-dev/corral/handlers/middleware"
)

type whoami struct {
	Login    string `json:"login"`
	Name     string `json:"name"`
	Admin    bool   `json:"admin"`
	Enforced bool   `json:"enforced"`
	Via      string `json:"via"`
}

func TestWhoami(t *testing.T) {
	const token = "a-peer-token-of-some-length"
	proxies, _ := auth.ParsePrefixes("192.0.2.0/24")
	tests := []struct {
		name    string
		admins  []string
		remote  string
		headers map[string]string
		status  int
		want    whoami
	}{
		{"open mode, anonymous", nil, "192.0.2.1:1", nil, 200, whoami{Admin: true, Via: "anonymous"}},
		{"allowlist, anonymous", []string{"alice@github"}, "192.0.2.1:1", nil, 200, whoami{Enforced: true, Via: "anonymous"}},
		{"allowlist, admin", []string{"alice@github"}, "192.0.2.1:1",
			map[string]string{"Tailscale-User-Login": "alice@github", "Tailscale-User-Name": "Alice"}, 200,
			whoami{Login: "alice@github", Name: "Alice", Admin: true, Enforced: true, Via: "tailscale"}},
		{"allowlist, user", []string{"alice@github"}, "192.0.2.1:1",
			map[string]string{"Tailscale-User-Login": "bob@github"}, 200,
			whoami{Login: "bob@github", Enforced: true, Via: "tailscale"}},
		{"spoofed header", []string{"alice@github"}, "198.51.100.1:1",
			map[string]string{"Tailscale-User-Login": "alice@github"}, 200, whoami{Enforced: true, Via: "anonymous"}},
		{"peer token", []string{"alice@github"}, "198.51.100.1:1",
			map[string]string{"Authorization": "Bearer " + token}, 200,
			whoami{Login: "corral-peer", Name: "Corral peer", Admin: true, Enforced: true, Via: "peer"}},
		{"wrong token", nil, "198.51.100.1:1", map[string]string{"Authorization": "Bearer nope"}, 401, whoami{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			policy := auth.NewPolicy(tt.admins, false)
			r := chi.NewRouter()
			r.Use(middleware.Identify(auth.NewResolver(auth.Config{TrustedProxies: proxies, PeerToken: token}, policy, auth.ResolverOptions{})))
			r.Route("/api", func(r chi.Router) { api.Mount(r, api.Deps{Policy: policy}) })
			req := httptest.NewRequest("GET", "/api/whoami", nil)
			req.RemoteAddr = tt.remote
			for k, v := range tt.headers {
				req.Header.Set(k, v)
			}
			rec := httptest.NewRecorder()
			r.ServeHTTP(rec, req)
			if rec.Code != tt.status {
				t.Fatalf("status %d, want %d: %s", rec.Code, tt.status, rec.Body)
			}
			if tt.status != http.StatusOK {
				if rec.Header().Get("WWW-Authenticate") == "" {
					t.Fatal("a 401 without WWW-Authenticate")
				}
				return
			}
			var got whoami
			if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Fatalf("whoami = %+v, want %+v", got, tt.want)
			}
		})
	}
}
