package pve_test

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	golibvirt "libvirt.org/go/libvirt"

	"github.com/go-chi/chi/v5"

	"github.com/corral-dev/corral/app/auth"
	"github.com/corral-dev/corral/app/fleet"
	"github.com/corral-dev/corral/app/instances"
	apppve "github.com/corral-dev/corral/app/pve"
	"github.com/corral-dev/corral/app/tasks"
	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/backends/libvirt"
	"github.com/corral-dev/corral/backends/sim"
	"github.com/corral-dev/corral/handlers/pve"
	"github.com/corral-dev/corral/store"
)

// requireEngine skips the test when the engine is missing, or fails it
// under CORRAL_REQUIRE_ENGINES=1.
func requireEngine(t *testing.T, why string, err error) {
	t.Helper()
	if err == nil {
		return
	}
	if os.Getenv("CORRAL_REQUIRE_ENGINES") == "1" {
		t.Fatalf("engine: %s: %v", why, err)
	}
	t.Skipf("engine: %s: %v", why, err)
}

// env is a server with the PVE surface over real use cases.
type env struct {
	dir     string
	store   *store.Store
	fleet   *fleet.Fleet
	tasks   *tasks.Manager
	inst    *instances.Service
	svc     *apppve.Service
	handler *chi.Mux
}

type envOpts struct {
	simSize int
	libvirt bool
	admins  []string
	dir     string
	// wrap, when set, replaces the sim backend (e.g. to give it consoles).
	wrap func(backends.Backend) backends.Backend
	// now is the service's clock; nil means time.Now.
	now func() time.Time
}

func newEnv(t testing.TB, o envOpts) *env {
	t.Helper()
	ctx := context.Background()
	e := &env{dir: o.dir}
	if e.dir == "" {
		e.dir = t.TempDir()
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	st, err := store.Open(ctx, filepath.Join(e.dir, "corral.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e.store = st
	e.tasks = tasks.New(st, tasks.Options{Logger: log})
	e.fleet = fleet.New(fleet.Options{Logger: log, Interval: time.Hour})
	var sb backends.Backend = sim.New(sim.Options{Context: "lab", Size: o.simSize})
	if o.wrap != nil {
		sb = o.wrap(sb)
	}
	if err := e.fleet.Add(sb); err != nil {
		t.Fatal(err)
	}
	if o.libvirt {
		if tt, ok := t.(*testing.T); ok {
			_, err := golibvirt.GetVersion()
			requireEngine(tt, "libvirt not available", err)
		}
		b := libvirt.New(libvirt.Options{Context: "test", URI: "test:///default"})
		t.Cleanup(func() { _ = b.Close() })
		if err := e.fleet.Add(b); err != nil {
			t.Fatal(err)
		}
	}
	e.fleet.Refresh(ctx)
	e.inst = instances.New(e.fleet, e.tasks, st, log)
	policy := auth.NewPolicy(o.admins, false)
	e.svc, err = apppve.New(ctx, apppve.Options{Fleet: e.fleet, Instances: e.inst, Tasks: e.tasks, Store: st, Policy: policy, Log: log, Now: o.now})
	if err != nil {
		t.Fatal(err)
	}
	r := chi.NewRouter()
	r.Route("/api2/json", func(r chi.Router) {
		pve.Mount(r, pve.Deps{Service: e.svc, Policy: policy, Audit: auth.NewAuditor(st, log), Admins: o.admins, Log: log})
	})
	e.handler = r
	t.Cleanup(func() {
		e.tasks.Close()
		_ = st.Close()
	})
	return e
}

// token creates an API token and returns the header value.
func (e *env) token(t testing.TB, user, id string) string {
	t.Helper()
	v, err := e.svc.CreateToken(context.Background(), user, id, "test")
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// tls starts the handler on loopback over TLS with a self-signed
// certificate.
func (e *env) tls(t testing.TB) *httptest.Server {
	srv := httptest.NewTLSServer(e.handler)
	t.Cleanup(srv.Close)
	return srv
}
