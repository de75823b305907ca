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
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/go-chi/chi/v5"

	"github.com/corral-dev/corral/app/auth"
	"github.com/corral-dev/corral/app/fleet"
	"github.com/corral-dev/corral/app/instances"
	"github.com/corral-dev/corral/app/move"
	"github.com/corral-dev/corral/app/tasks"
	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/backends/qemu"
	"github.com/corral-dev/corral/backends/qemu/qemutest"
	"github.com/corral-dev/corral/backends/sim"
	"github.com/corral-dev/corral/handlers/middleware"
	"github.com/corral-dev/corral/handlers/ui"
	"github.com/corral-dev/corral/static"
	"github.com/corral-dev/corral/store"
)

// moveEnv is a dashboard with the move dialog over the given backends.
func moveEnv(t *testing.T, bs ...backends.Backend) *env {
	t.Helper()
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	f := fleet.New(fleet.Options{Logger: log, Timeout: time.Minute})
	for _, b := range bs {
		if err := f.Add(b); err != nil {
			t.Fatal(err)
		}
	}
	f.Refresh(ctx)
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "c.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	tm := tasks.New(st, tasks.Options{Logger: log})
	t.Cleanup(tm.Close)
	assets, err := static.New()
	if err != nil {
		t.Fatal(err)
	}
	r := chi.NewRouter()
	r.Use(middleware.RequestID, middleware.Identify(auth.NewResolver(auth.Config{}, auth.NewPolicy(nil, false), auth.ResolverOptions{})))
	ui.Mount(r, ui.Deps{Instances: instances.New(f, tm, st, log), Fleet: f, Tasks: tm, Assets: assets, Log: log,
		Move: move.New(f, tm, move.Options{Registry: st, Logger: log})})
	return &env{t: t, fleet: f, tasks: tm, handler: r}
}

func form(v url.Values) io.Reader { return strings.NewReader(v.Encode()) }

// TestMoveDialog: the instance page carries the dialog with the other
// contexts; the preflight partial lists every refusal with the commit
// button disabled, and a commit the server refuses answers the same list.
func TestMoveDialog(t *testing.T) {
	lab := sim.New(sim.Options{Context: "lab"})
	prod := sim.New(sim.Options{Context: "prod"})
	if _, err := lab.Create(context.Background(), backends.Spec{Name: "web"}); err != nil {
		t.Fatal(err)
	}
	e := moveEnv(t, lab, prod)

	d := doc(t, e.get("/vm/sim/lab/-/web", ""), http.StatusOK)
	if d.Find(testid("move-dialog")).Length() != 1 {
		t.Fatal("the instance page has no move dialog")
	}
	opts := d.Find(testid("move-dest") + " option[value]").Map(func(_ int, s *goquery.Selection) string { return s.AttrOr("value", "") })
	if strings.Join(opts, ",") != ",sim/prod" {
		t.Fatalf("destination options = %q, want the placeholder and sim/prod (not the source's own context)", opts)
	}
	if _, ok := d.Find(testid("move-commit")).Attr("disabled"); !ok {
		t.Fatal("the commit button is enabled before a destination is chosen")
	}
	if hx := d.Find(testid("move-form")).AttrOr("hx-post", ""); hx != "/ui/move/preflight" {
		t.Fatalf("the form's hx-post = %q, want the preflight partial", hx)
	}

	v := url.Values{"ref": {"sim/lab/-/web"}, "dest": {"sim/prod"}}
	p := doc(t, e.do(http.MethodPost, "/ui/move/preflight", "div#move-preflight", form(v)), http.StatusOK)
	refusals := texts(p, testid("move-refusal"))
	if len(refusals) != 2 || !strings.Contains(strings.Join(refusals, " "), "cannot import") {
		t.Fatalf("refusals = %q, want the source's and the destination's", refusals)
	}
	if _, ok := p.Find(testid("move-commit")).Attr("disabled"); !ok || p.Find(testid("move-dialog")).Length() != 0 {
		t.Fatal("the partial must be the fragment alone, with the commit button disabled")
	}
	c := doc(t, e.do(http.MethodPost, "/ui/move", "div#move-preflight", form(v)), http.StatusOK)
	if got := texts(c, testid("move-refusal")); strings.Join(got, "|") != strings.Join(refusals, "|") {
		t.Fatalf("refused commit lists %q, want the preflight's %q", got, refusals)
	}
	if rec := e.do(http.MethodPost, "/ui/move", "", form(v)); rec.Code != http.StatusConflict {
		t.Fatalf("a refused commit without htmx = %d, want 409", rec.Code)
	}
	if rec := e.do(http.MethodPost, "/ui/move/preflight", "-", form(url.Values{"ref": {"web"}, "dest": {"nonsense"}})); rec.Code != http.StatusBadRequest {
		t.Fatalf("a malformed destination = %d, want 400", rec.Code)
	}
}

// TestMoveDialogCommit: between two local-QEMU contexts the preflight is
// clean, the button enabled, and the commit starts a task.
func TestMoveDialogCommit(t *testing.T) {
	qemutest.Tools(t)
	a, err := qemu.New(qemu.Options{Context: "local", Dir: t.TempDir(), Accel: "tcg"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := qemu.New(qemu.Options{Context: "other", Dir: t.TempDir(), Accel: "tcg"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Create(context.Background(), backends.Spec{Name: "db", DiskMiB: 16}); err != nil {
		t.Fatal(err)
	}
	e := moveEnv(t, a, b)
	v := url.Values{"ref": {"qemu/local/-/db"}, "dest": {"qemu/other"}}
	p := doc(t, e.do(http.MethodPost, "/ui/move/preflight", "div#move-preflight", form(v)), http.StatusOK)
	if p.Find(testid("move-refusal")).Length() != 0 || p.Find(testid("move-warning")).Length() == 0 || p.Find(testid("move-steps")+" li").Length() < 2 {
		t.Fatalf("preflight partial:\n%s", e.do(http.MethodPost, "/ui/move/preflight", "div#move-preflight", form(v)).Body.String())
	}
	if _, ok := p.Find(testid("move-commit")).Attr("disabled"); ok {
		t.Fatal("the commit button is disabled for a move nothing refuses")
	}
	rec := e.do(http.MethodPost, "/ui/move", "div#move-preflight", form(v))
	c := doc(t, rec, http.StatusOK)
	if rec.Header().Get("HX-Trigger") != "corral:tasks" || !strings.Contains(c.Find(testid("move-notice")).Text(), "Move started") {
		t.Fatalf("commit answer: %s", rec.Body.String())
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		if _, err := b.Get(context.Background(), backends.InstanceRef{Backend: backends.KindQEMU, Context: "other", Name: "db"}); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the copy never appeared on the destination")
		}
	}
}
