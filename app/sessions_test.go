package app_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/corral-dev/corral/app"
	"github.com/corral-dev/corral/app/auth"
	"github.com/corral-dev/corral/app/auth/authtest"
)

// syncBuffer is a log sink safe for the server's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestCancelledRequestIsNoSessionError: a browser cancelling a request
// (htmx does for superseded fetches) makes the session load fail with
// context.Canceled; that is not a store failure worth an error line.
func TestCancelledRequestIsNoSessionError(t *testing.T) {
	op := authtest.NewProvider(t, authtest.User{ID: "1", Email: "alice@example.com", Password: "pw", Name: "Alice", EmailVerified: true})
	var logs syncBuffer
	cfg := app.Config{DataDir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	cfg.Auth = auth.Config{Required: true, Admins: []string{"alice@example.com"},
		OIDC: auth.OIDCConfig{Issuer: op.Issuer, ClientID: op.ClientID, ClientSecret: op.ClientSecret}}
	a, err := app.New(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	req := httptest.NewRequest(http.MethodGet, "/", nil).WithContext(ctx)
	req.AddCookie(&http.Cookie{Name: "corral_session", Value: "some-session-token"})
	a.Handler().ServeHTTP(httptest.NewRecorder(), req)
	if strings.Contains(logs.String(), "level=ERROR") {
		t.Errorf("a cancelled request logged an error:\n%s", logs.String())
	}
	if !strings.Contains(logs.String(), "request cancelled by the client") {
		t.Errorf("the cancelled request is not in the debug log (did the session load run?):\n%s", logs.String())
	}
}
