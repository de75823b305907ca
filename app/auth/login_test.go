package auth_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/corral-dev/corral/app"
	"github.com/corral-dev/corral/app/auth"
	"github.com/corral-dev/corral/app/auth/authtest"
	"github.com/corral-dev/corral/app/fleet"
	"github.com/corral-dev/corral/store"
)

type loginEnv struct {
	srv *httptest.Server
	app *app.App
	op  *authtest.Provider
	ref string
	// preLogin is the session cookie a sign-in started with (holding its
	// state, nonce and verifier); sign-in must renew it.
	preLogin string
}

// newLoginEnv is the whole server with CORRAL_AUTH_REQUIRED, the
// allowlist {alice} and OIDC sign-in at a real provider started here.
func newLoginEnv(t *testing.T) *loginEnv {
	t.Helper()
	ctx := context.Background()
	op := authtest.NewProvider(t,
		authtest.User{ID: "1", Email: "alice@example.com", Password: "alice-pw", Name: "Alice", EmailVerified: true},
		authtest.User{ID: "2", Email: "bob@example.com", Password: "bob-pw", Name: "Bob", EmailVerified: true},
		authtest.User{ID: "3", Email: "eve@example.com", Password: "eve-pw", Name: "Eve", EmailVerified: false},
	)
	cfg := app.Config{DataDir: t.TempDir(), Demo: true, DemoSize: 9, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	cfg.Auth = auth.Config{Required: true, Admins: []string{"alice@example.com"},
		OIDC: auth.OIDCConfig{Issuer: op.Issuer, ClientID: op.ClientID, ClientSecret: op.ClientSecret}}
	a, err := app.New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	a.Fleet.Refresh(ctx)
	pg, _ := a.Fleet.Snapshot().Query(fleet.Query{Context: "sim/lab", State: "stopped"})
	if len(pg.Instances) == 0 {
		t.Fatal("no stopped instance in sim/lab")
	}
	srv := httptest.NewServer(a.Handler())
	t.Cleanup(srv.Close)
	op.AllowRedirect(srv.URL + "/login/callback")
	return &loginEnv{srv: srv, app: a, op: op, ref: pg.Instances[0].Ref.String()}
}

func newBrowser(t *testing.T) *http.Client {
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Jar: jar}
}

var hiddenID = regexp.MustCompile(`name="id" value="([^"]+)"`)

// signIn goes from the dashboard to the provider and back as a browser
// would, and returns the dashboard page it lands on.
func (e *loginEnv) signIn(t *testing.T, c *http.Client, user, password string) (*http.Response, string) {
	t.Helper()
	res, body := get(t, c, e.srv.URL+"/vm/"+e.ref)
	if res.Request.URL.Path != "/login" || !strings.Contains(body, `data-testid="login-start"`) {
		t.Fatalf("an anonymous dashboard request ended at %s (%d), want the sign-in page", res.Request.URL, res.StatusCode)
	}
	next := res.Request.URL.Query().Get("next")
	res, body = post(t, c, e.srv.URL+"/login", e.srv.URL, url.Values{"next": {next}})
	if !strings.HasPrefix(res.Request.URL.String(), e.op.Issuer+"/login") {
		t.Fatalf("POST /login ended at %s, want the provider's login page", res.Request.URL)
	}
	e.preLogin = sessionCookie(c, e.srv.URL)
	m := hiddenID.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("the provider's login page has no request id:\n%s", body)
	}
	return post(t, c, e.op.Issuer+"/login", e.op.Issuer, url.Values{"id": {m[1]}, "username": {user}, "password": {password}})
}

func TestOIDCLogin(t *testing.T) {
	e := newLoginEnv(t)
	ctx := context.Background()

	// The API refuses anonymous callers with 401, not a redirect.
	if res, _ := get(t, http.DefaultClient, e.srv.URL+"/api/vms"); res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("anonymous GET /api/vms = %d, want 401", res.StatusCode)
	}

	bob := newBrowser(t)
	res, body := e.signIn(t, bob, "bob@example.com", "bob-pw")
	if res.StatusCode != http.StatusOK || res.Request.URL.Path != "/vm/"+e.ref {
		t.Fatalf("after sign-in: %d at %s, want 200 at the page first asked for", res.StatusCode, res.Request.URL)
	}
	if !strings.Contains(body, "Bob (bob@example.com)") || !strings.Contains(body, `data-testid="read-only"`) {
		t.Fatal("the page does not show the signed-in non-admin")
	}
	if strings.Contains(body, `data-testid="action-start"`) || strings.Contains(body, `data-testid="action-delete"`) {
		t.Fatal("a non-admin is shown power or delete buttons")
	}
	if after := sessionCookie(bob, e.srv.URL); e.preLogin == "" || after == "" || after == e.preLogin {
		t.Fatalf("session token before sign-in %q, after %q: want two different tokens (renewed at sign-in)", e.preLogin, after)
	}

	var who map[string]any
	_, body = get(t, bob, e.srv.URL+"/api/whoami")
	_ = json.Unmarshal([]byte(body), &who)
	if who["login"] != "bob@example.com" || who["admin"] != false || who["enforced"] != true || who["via"] != "oidc" || who["name"] != "Bob" {
		t.Fatalf("whoami = %v", who)
	}

	// The server refuses what the page hides, and audits it.
	res, body = post(t, bob, e.srv.URL+"/vm/"+e.ref+"/start", e.srv.URL, nil)
	if res.StatusCode != http.StatusForbidden || !strings.Contains(body, "not an admin") {
		t.Fatalf("a non-admin's POST start = %d, want 403 with a safe message", res.StatusCode)
	}

	// A cross-site POST with the (admin's) cookie is refused before any
	// handler, and audited.
	alice := newBrowser(t)
	if res, body := e.signIn(t, alice, "alice@example.com", "alice-pw"); !strings.Contains(body, `data-testid="action-start"`) {
		t.Fatalf("the admin sees no start button (%d at %s)", res.StatusCode, res.Request.URL)
	}
	req, _ := http.NewRequest(http.MethodPost, e.srv.URL+"/vm/"+e.ref+"/start", strings.NewReader(""))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "https://evil.example")
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	if res, err := alice.Do(req); err != nil || res.StatusCode != http.StatusForbidden {
		t.Fatalf("cross-site POST = %v %v, want 403", res.StatusCode, err)
	}
	res, _ = post(t, alice, e.srv.URL+"/vm/"+e.ref+"/start", e.srv.URL, nil)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("the admin's same-origin POST start = %d, want 200 (after the redirect)", res.StatusCode)
	}

	audit := func(f store.AuditFilter) []store.AuditEntry {
		rows, err := e.app.Store.ListAudit(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		return rows
	}
	if rows := audit(store.AuditFilter{Actor: "bob@example.com", Outcome: "refused"}); len(rows) != 1 || rows[0].Surface != "dashboard" {
		t.Fatalf("bob's refused start in the audit log: %+v", rows)
	}
	if rows := audit(store.AuditFilter{Actor: "alice@example.com", Outcome: "refused"}); len(rows) != 1 || !strings.Contains(rows[0].Detail, "cross-origin") {
		t.Fatalf("the cross-site POST in the audit log: %+v", rows)
	}
	if rows := audit(store.AuditFilter{Actor: "alice@example.com", Action: "start", Outcome: "ok"}); len(rows) != 1 {
		t.Fatalf("alice's start in the audit log: %+v", rows)
	}
	if rows := audit(store.AuditFilter{Action: "login", Outcome: "ok"}); len(rows) != 2 {
		t.Fatalf("sign-ins in the audit log: %+v", rows)
	}

	// Sign-out destroys the session: the next page asks to sign in again.
	res, _ = post(t, bob, e.srv.URL+"/logout", e.srv.URL, nil)
	if res.Request.URL.Path != "/login" {
		t.Fatalf("after sign-out: at %s, want /login", res.Request.URL)
	}
	if res, _ := get(t, bob, e.srv.URL+"/"); res.Request.URL.Path != "/login" {
		t.Fatalf("after sign-out GET / ended at %s, want /login", res.Request.URL)
	}
	if rows := audit(store.AuditFilter{Actor: "bob@example.com", Action: "logout"}); len(rows) != 1 {
		t.Fatalf("bob's sign-out in the audit log: %+v", rows)
	}
	if n, err := e.app.Store.Sessions().AllCtx(ctx); err != nil || len(n) != 1 {
		t.Fatalf("live sessions after bob signed out = %d (%v), want alice's only", len(n), err)
	}

	// The chain holds what happened here, and shows a row edited behind
	// the server's back (rewriting who was refused).
	if n, err := e.app.Store.VerifyAudit(ctx); err != nil || n < 6 {
		t.Fatalf("VerifyAudit = %d, %v; want an intact chain of the rows above", n, err)
	}
	db := e.app.Store.DB()
	if _, err := db.ExecContext(ctx, `DROP TRIGGER audit_no_update`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `UPDATE audit SET actor = 'alice@example.com' WHERE actor = 'bob@example.com' AND outcome = 'refused'`); err != nil {
		t.Fatal(err)
	}
	var broken *store.BrokenLink
	if _, err := e.app.Store.VerifyAudit(ctx); !errors.As(err, &broken) {
		t.Fatalf("VerifyAudit after an edit = %v, want a broken link", err)
	}
}

func TestOIDCLoginRefusals(t *testing.T) {
	e := newLoginEnv(t)
	// An unverified email is not a login.
	res, body := e.signIn(t, newBrowser(t), "eve@example.com", "eve-pw")
	if res.StatusCode != http.StatusUnauthorized || !strings.Contains(body, "did not verify your email") {
		t.Fatalf("unverified email: %d, want 401 saying why", res.StatusCode)
	}
	// A callback that this browser did not start (no state in its
	// session, or another state) is refused and audited.
	c := newBrowser(t)
	res, _ = get(t, c, e.srv.URL+"/login/callback?code=x&state=forged")
	if res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("forged callback = %d, want 401", res.StatusCode)
	}
	rows, _ := e.app.Store.ListAudit(context.Background(), store.AuditFilter{Action: "login", Outcome: "refused"})
	if len(rows) != 2 {
		t.Fatalf("refused sign-ins in the audit log = %d, want 2: %+v", len(rows), rows)
	}
	// Identity never comes from the query or the body.
	res, body = get(t, c, e.srv.URL+"/api/whoami?login=alice@example.com")
	if res.StatusCode != http.StatusUnauthorized || strings.Contains(body, "alice") {
		t.Fatalf("whoami with a login in the query = %d %s", res.StatusCode, body)
	}
}

func sessionCookie(c *http.Client, base string) string {
	u, _ := url.Parse(base)
	for _, k := range c.Jar.Cookies(u) {
		if k.Name == "corral_session" {
			return k.Value
		}
	}
	return ""
}

func get(t *testing.T, c *http.Client, u string) (*http.Response, string) {
	t.Helper()
	res, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res, string(b)
}

// post sends a form as a browser page of origin would.
func post(t *testing.T, c *http.Client, u, origin string, form url.Values) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, u, strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", origin)
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res, string(b)
}
