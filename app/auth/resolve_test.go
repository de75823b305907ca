package auth_test

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/corral-dev/corral/app/auth"
	"github.com/corral-dev/corral/app/auth/authtest"
)

type fakeSessions map[string]string

func (f fakeSessions) GetString(_ context.Context, k string) string { return f[k] }

const peerToken = "peer-token-0123456789abcdef"

func TestResolve(t *testing.T) {
	lapi := authtest.NewLocalAPI(t)
	lapi.AddPeer("100.101.102.103", "alice@example.com", "Alice")
	lapi.AddPeer("100.64.0.9", "", "ci-runner", "tag:ci")
	proxies, _ := auth.ParsePrefixes("127.0.0.1, 10.0.0.0/8")
	cfg := auth.Config{TrustedProxies: proxies, PeerToken: peerToken, Tailscale: lapi.Socket}
	policy := auth.NewPolicy([]string{"Alice@example.com", "tag:ci"}, false)
	res := auth.NewResolver(cfg, policy, auth.ResolverOptions{})

	tests := []struct {
		name    string
		remote  string
		headers map[string]string
		want    auth.Identity
	}{
		{name: "tailnet peer by WhoIs", remote: "100.101.102.103:41234",
			want: auth.Identity{Login: "alice@example.com", Name: "Alice", Via: auth.ViaTailscale, Admin: true}},
		{name: "tagged node is named by its tag", remote: "100.64.0.9:5000",
			want: auth.Identity{Login: "tag:ci", Name: "ci-runner.tail0000.ts.net", Via: auth.ViaTailscale, Admin: true}},
		{name: "unknown tailnet address is anonymous", remote: "100.100.1.1:5000",
			want: auth.Identity{Via: auth.ViaAnonymous}},
		{name: "serve headers from a trusted proxy", remote: "127.0.0.1:5000",
			headers: map[string]string{"Tailscale-User-Login": "bob@example.com", "Tailscale-User-Name": "=?utf-8?q?Bj=C3=B6rn?="},
			want:    auth.Identity{Login: "bob@example.com", Name: "Björn", Via: auth.ViaTailscale}},
		{name: "serve headers from a trusted CIDR", remote: "10.1.2.3:5000",
			headers: map[string]string{"Tailscale-User-Login": "alice@example.com"},
			want:    auth.Identity{Login: "alice@example.com", Via: auth.ViaTailscale, Admin: true}},
		{name: "spoofed headers from an untrusted address are ignored", remote: "203.0.113.9:5000",
			headers: map[string]string{"Tailscale-User-Login": "alice@example.com", "Tailscale-User-Name": "Alice"},
			want:    auth.Identity{Via: auth.ViaAnonymous}},
		{name: "spoofed headers do not override WhoIs", remote: "100.101.102.103:1",
			headers: map[string]string{"Tailscale-User-Login": "root@example.com"},
			want:    auth.Identity{Login: "alice@example.com", Name: "Alice", Via: auth.ViaTailscale, Admin: true}},
		{name: "peer token", remote: "203.0.113.9:5000",
			headers: map[string]string{"Authorization": "Bearer " + peerToken},
			want:    auth.Identity{Via: auth.ViaPeer, Name: "Corral peer", Admin: true}},
		{name: "wrong bearer token is rejected", remote: "127.0.0.1:5000",
			headers: map[string]string{"Authorization": "Bearer nope", "Tailscale-User-Login": "alice@example.com"},
			want:    auth.Identity{Via: auth.ViaAnonymous, Rejected: "the bearer token is not valid"}},
		{name: "basic auth is rejected", remote: "127.0.0.1:5000",
			headers: map[string]string{"Authorization": "Basic YTpi"},
			want:    auth.Identity{Via: auth.ViaAnonymous, Rejected: "the Authorization header is not accepted: send Bearer <peer token>"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/?login=alice@example.com", nil)
			r.RemoteAddr = tt.remote
			for k, v := range tt.headers {
				r.Header.Set(k, v)
			}
			got := res.Resolve(r)
			if got != tt.want {
				t.Fatalf("Resolve = %+v, want %+v", got, tt.want)
			}
			if strings.HasPrefix(tt.name, "spoofed") && r.Header.Get("Tailscale-User-Login") != "" {
				t.Fatal("untrusted Tailscale headers were left on the request for later handlers")
			}
		})
	}
	if lapi.Calls() == 0 {
		t.Fatal("tailscaled's LocalAPI was never asked")
	}
}

func TestResolveSession(t *testing.T) {
	res := auth.NewResolver(auth.Config{}, auth.NewPolicy([]string{"carol@example.com"}, true),
		auth.ResolverOptions{Sessions: fakeSessions{auth.SessionLogin: "carol@example.com", auth.SessionName: "Carol"}})
	got := res.Resolve(httptest.NewRequest("GET", "/", nil))
	want := auth.Identity{Login: "carol@example.com", Name: "Carol", Via: auth.ViaOIDC, Admin: true}
	if got != want {
		t.Fatalf("Resolve = %+v, want %+v", got, want)
	}
}

func TestDecide(t *testing.T) {
	anon := auth.Identity{Via: auth.ViaAnonymous}
	bob := auth.Identity{Login: "bob@example.com", Via: auth.ViaOIDC}
	alice := auth.Identity{Login: "alice@example.com", Via: auth.ViaTailscale}
	peer := auth.Identity{Via: auth.ViaPeer}
	rejected := auth.Identity{Via: auth.ViaAnonymous, Rejected: "the bearer token is not valid"}
	modes := []struct {
		name   string
		policy *auth.Policy
	}{
		{"open", auth.NewPolicy(nil, false)},
		{"open+required", auth.NewPolicy(nil, true)},
		{"allowlist", auth.NewPolicy([]string{"alice@example.com"}, false)},
		{"allowlist+required", auth.NewPolicy([]string{"alice@example.com"}, true)},
	}
	// want[mode][identity][rule]: "" allowed, else "401" or "403".
	want := map[string]map[string]map[auth.Rule]string{
		"open": {
			"anon":  {auth.Public: "", auth.Read: "", auth.Admin: "", auth.Privileged: "", auth.User: "401"},
			"bob":   {auth.Public: "", auth.Read: "", auth.Admin: "", auth.Privileged: "", auth.User: ""},
			"alice": {auth.Public: "", auth.Read: "", auth.Admin: "", auth.Privileged: "", auth.User: ""},
			"peer":  {auth.Public: "", auth.Read: "", auth.Admin: "", auth.Privileged: "", auth.User: "403"},
			"bad":   {auth.Public: "", auth.Read: "401", auth.Admin: "401", auth.Privileged: "401", auth.User: "401"},
		},
		"open+required": {
			"anon":  {auth.Public: "", auth.Read: "401", auth.Admin: "401", auth.Privileged: "401", auth.User: "401"},
			"bob":   {auth.Public: "", auth.Read: "", auth.Admin: "", auth.Privileged: "", auth.User: ""},
			"alice": {auth.Public: "", auth.Read: "", auth.Admin: "", auth.Privileged: "", auth.User: ""},
			"peer":  {auth.Public: "", auth.Read: "", auth.Admin: "", auth.Privileged: "", auth.User: "403"},
			"bad":   {auth.Public: "", auth.Read: "401", auth.Admin: "401", auth.Privileged: "401", auth.User: "401"},
		},
		"allowlist": {
			"anon":  {auth.Public: "", auth.Read: "", auth.Admin: "401", auth.Privileged: "401", auth.User: "401"},
			"bob":   {auth.Public: "", auth.Read: "", auth.Admin: "403", auth.Privileged: "403", auth.User: ""},
			"alice": {auth.Public: "", auth.Read: "", auth.Admin: "", auth.Privileged: "", auth.User: ""},
			"peer":  {auth.Public: "", auth.Read: "", auth.Admin: "", auth.Privileged: "", auth.User: "403"},
			"bad":   {auth.Public: "", auth.Read: "401", auth.Admin: "401", auth.Privileged: "401", auth.User: "401"},
		},
		"allowlist+required": {
			"anon":  {auth.Public: "", auth.Read: "401", auth.Admin: "401", auth.Privileged: "401", auth.User: "401"},
			"bob":   {auth.Public: "", auth.Read: "", auth.Admin: "403", auth.Privileged: "403", auth.User: ""},
			"alice": {auth.Public: "", auth.Read: "", auth.Admin: "", auth.Privileged: "", auth.User: ""},
			"peer":  {auth.Public: "", auth.Read: "", auth.Admin: "", auth.Privileged: "", auth.User: "403"},
			"bad":   {auth.Public: "", auth.Read: "401", auth.Admin: "401", auth.Privileged: "401", auth.User: "401"},
		},
	}
	ids := map[string]auth.Identity{"anon": anon, "bob": bob, "alice": alice, "peer": peer, "bad": rejected}
	for _, m := range modes {
		for name, id := range ids {
			id = m.policy.Complete(id)
			for rule, w := range want[m.name][name] {
				err := m.policy.Decide(rule, id)
				got := ""
				if err != nil {
					got = "403"
					if isUnauth(err) {
						got = "401"
					}
				}
				if got != w {
					t.Errorf("%s: %s calling a %s route: got %q, want %q (%v)", m.name, name, rule, got, w, err)
				}
			}
		}
	}
}

func isUnauth(err error) bool {
	r, ok := err.(*auth.Refusal)
	return ok && r.Kind == auth.ErrUnauthenticated
}
