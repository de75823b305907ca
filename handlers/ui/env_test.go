package ui_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"
	"github.com/go-chi/chi/v5"

	"github.com/corral-dev/corral/app/auth"
	"github.com/corral-dev/corral/app/fleet"
	"github.com/corral-dev/corral/app/folders"
	"github.com/corral-dev/corral/app/instances"
	"github.com/corral-dev/corral/app/tasks"
	"github.com/corral-dev/corral/backends/sim"
	"github.com/corral-dev/corral/handlers/middleware"
	"github.com/corral-dev/corral/handlers/ui"
	"github.com/corral-dev/corral/static"
	"github.com/corral-dev/corral/store"
)

// env is a dashboard over real objects: simulated contexts, a fleet, a
// SQLite store in t.TempDir(), the task manager and the instance service.
type env struct {
	t       testing.TB
	fleet   *fleet.Fleet
	tasks   *tasks.Manager
	sims    map[string]*sim.Backend
	handler http.Handler
}

func newEnv(t testing.TB, fopts fleet.Options, sims ...*sim.Backend) *env {
	t.Helper()
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	fopts.Logger = log
	f := fleet.New(fopts)
	e := &env{t: t, fleet: f, sims: map[string]*sim.Backend{}}
	for _, b := range sims {
		if err := f.Add(b); err != nil {
			t.Fatal(err)
		}
		e.sims[b.Context()] = b
	}
	f.Refresh(ctx)
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "c.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	e.tasks = tasks.New(st, tasks.Options{Logger: log})
	t.Cleanup(e.tasks.Close)
	assets, err := static.New()
	if err != nil {
		t.Fatal(err)
	}
	r := chi.NewRouter()
	r.Use(middleware.RequestID, middleware.Identify(auth.NewResolver(auth.Config{}, auth.NewPolicy(nil, false), auth.ResolverOptions{})))
	in := instances.New(f, e.tasks, st, log)
	ui.Mount(r, ui.Deps{Instances: in, Fleet: f, Tasks: e.tasks, Assets: assets, Log: log,
		Folders: folders.New(st, f, e.tasks, in, folders.Options{})})
	e.handler = r
	return e
}

// labEnv is one simulated context "lab" of 30 instances.
func labEnv(t testing.TB) *env {
	return newEnv(t, fleet.Options{}, sim.New(sim.Options{Context: "lab", Size: 30}))
}

// do sends a request; htmx, when not "", is the HX-Target of an htmx
// request ("section#inventory"), or "-" for an htmx request without one.
func (e *env) do(method, target, htmx string, body io.Reader) *httptest.ResponseRecorder {
	e.t.Helper()
	req := httptest.NewRequest(method, target, body)
	if body != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if htmx != "" {
		req.Header.Set("HX-Request", "true")
		if htmx != "-" {
			req.Header.Set("HX-Target", htmx)
		}
	}
	rec := httptest.NewRecorder()
	e.handler.ServeHTTP(rec, req)
	return rec
}

func (e *env) get(target, htmx string) *httptest.ResponseRecorder {
	return e.do(http.MethodGet, target, htmx, nil)
}

func (e *env) post(target, htmx string) *httptest.ResponseRecorder {
	return e.do(http.MethodPost, target, htmx, strings.NewReader(""))
}

// doc parses a response after checking its status.
func doc(t testing.TB, rec *httptest.ResponseRecorder, status int) *goquery.Document {
	t.Helper()
	if rec.Code != status {
		t.Fatalf("status %d, want %d; body:\n%.2000s", rec.Code, status, rec.Body.String())
	}
	d, err := goquery.NewDocumentFromReader(strings.NewReader(rec.Body.String()))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func testid(id string) string { return `[data-testid="` + id + `"]` }

// texts returns the trimmed text of every match.
func texts(d *goquery.Document, sel string) []string {
	var out []string
	d.Find(sel).Each(func(_ int, s *goquery.Selection) { out = append(out, strings.TrimSpace(s.Text())) })
	return out
}
