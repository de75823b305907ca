package e2e

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/corral-dev/corral/app"
	"github.com/corral-dev/corral/app/auth"
	"github.com/corral-dev/corral/app/auth/authtest"
)

// TestLogin signs in through a real OpenID provider (zitadel's pkg/op,
// started here) in headless Chromium: login.mjs.
func TestLogin(t *testing.T) {
	node := browser(t)

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	op := authtest.NewProvider(t,
		authtest.User{ID: "1", Email: "alice@example.com", Password: "alice-pw", Name: "Alice", EmailVerified: true},
		authtest.User{ID: "2", Email: "bob@example.com", Password: "bob-pw", Name: "Bob", EmailVerified: true},
	)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	cfg := app.Config{DataDir: t.TempDir(), Demo: true, DemoSize: 30, Logger: log}
	cfg.Auth = auth.Config{Required: true, Admins: []string{"alice@example.com"},
		OIDC: auth.OIDCConfig{Issuer: op.Issuer, ClientID: op.ClientID, ClientSecret: op.ClientSecret}}
	a, err := app.New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	a.Start(ctx)
	a.Fleet.Refresh(ctx)
	srv := httptest.NewServer(a.Handler())
	defer srv.Close()
	op.AllowRedirect(srv.URL + "/login/callback")

	out := artifacts(t)
	cmd := exec.CommandContext(ctx, node, "login.mjs", srv.URL, out)
	b, err := cmd.CombinedOutput()
	t.Logf("login.mjs:\n%s", b)
	t.Logf("screenshots in %s", out)
	if err != nil {
		t.Fatalf("login.mjs: %v", err)
	}
}
