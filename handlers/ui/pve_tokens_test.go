package ui_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/corral-dev/corral/app/auth"
	"github.com/corral-dev/corral/app/fleet"
	"github.com/corral-dev/corral/app/instances"
	apppve "github.com/corral-dev/corral/app/pve"
	"github.com/corral-dev/corral/app/tasks"
	"github.com/corral-dev/corral/backends/sim"
	"github.com/corral-dev/corral/handlers/middleware"
	"github.com/corral-dev/corral/handlers/ui"
	"github.com/corral-dev/corral/static"
	"github.com/corral-dev/corral/store"
)

// TestPVETokensPage: an admin creates a token on the dashboard, sees its
// whole value once, the list shows it without the secret, and revoking it
// removes it; both changes are in the audit log.
func TestPVETokensPage(t *testing.T) {
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	f := fleet.New(fleet.Options{Logger: log})
	f.Add(sim.New(sim.Options{Context: "lab", Size: 3}))
	f.Refresh(ctx)
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "c.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	tm := tasks.New(st, tasks.Options{Logger: log})
	defer tm.Close()
	svc := instances.New(f, tm, st, log)
	policy := auth.NewPolicy(nil, false)
	pve, err := apppve.New(ctx, apppve.Options{Fleet: f, Instances: svc, Tasks: tm, Store: st, Policy: policy, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	assets, err := static.New()
	if err != nil {
		t.Fatal(err)
	}
	r := chi.NewRouter()
	r.Use(middleware.RequestID, middleware.Identify(auth.NewResolver(auth.Config{}, policy, auth.ResolverOptions{})))
	ui.Mount(r, ui.Deps{Instances: svc, Fleet: f, Tasks: tm, Assets: assets, Log: log, Audit: auth.NewAuditor(st, log), PVE: pve})
	e := &env{t: t, fleet: f, tasks: tm, handler: r}

	d := doc(t, e.get("/pve-tokens", ""), http.StatusOK)
	if d.Find(`[data-testid="no-tokens"]`).Length() != 1 {
		t.Fatal("a new server lists tokens")
	}
	form := url.Values{"user": {"terraform@pve"}, "tokenId": {"ci"}, "comment": {"pipeline"}}
	rec := e.do(http.MethodPost, "/pve-tokens", "", strings.NewReader(form.Encode()))
	d = doc(t, rec, http.StatusOK)
	value := d.Find(`[data-testid="token-value"]`).Text()
	if !strings.HasPrefix(value, "terraform@pve!ci=") || len(value) < len("terraform@pve!ci=")+36 {
		t.Fatalf("created token value %q", value)
	}
	if d.Find(`[data-testid="token-row"]`).Length() != 1 {
		t.Fatal("the new token is not listed")
	}
	// The secret is shown once: the list page does not carry it.
	page := e.get("/pve-tokens", "").Body.String()
	if secret := strings.SplitN(value, "=", 2)[1]; strings.Contains(page, secret) {
		t.Fatal("the token list shows the secret")
	}
	bad := url.Values{"user": {"nobody"}, "tokenId": {"x"}}
	if rec := e.do(http.MethodPost, "/pve-tokens", "", strings.NewReader(bad.Encode())); rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "NAME@REALM") {
		t.Fatalf("a bad user = %d", rec.Code)
	}
	rev := url.Values{"user": {"terraform@pve"}, "tokenId": {"ci"}}
	if rec := e.do(http.MethodPost, "/pve-tokens/revoke", "", strings.NewReader(rev.Encode())); rec.Code != http.StatusSeeOther {
		t.Fatalf("revoke = %d", rec.Code)
	}
	if toks, _ := pve.Tokens(ctx, ""); len(toks) != 0 {
		t.Fatalf("tokens after revoke: %+v", toks)
	}
	audit, _ := tm.Audit(ctx, store.AuditFilter{})
	var acts []string
	for _, a := range audit {
		acts = append(acts, a.Action+":"+a.Outcome)
	}
	got := strings.Join(acts, " ")
	for _, want := range []string{"pve token create:ok", "pve token create:refused", "pve token revoke:ok"} {
		if !strings.Contains(got, want) {
			t.Errorf("audit %q lacks %q", got, want)
		}
	}
}
