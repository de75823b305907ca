package proxmox_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	stdlog "log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	goproxmox "github.com/luthermonson/go-proxmox"
	golibvirt "libvirt.org/go/libvirt"

	"github.com/corral-dev/corral/app/auth"
	"github.com/corral-dev/corral/app/fleet"
	"github.com/corral-dev/corral/app/instances"
	apppve "github.com/corral-dev/corral/app/pve"
	"github.com/corral-dev/corral/app/tasks"
	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/backends/libvirt"
	"github.com/corral-dev/corral/backends/proxmox"
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

// server is "the second Corral": Corral's own /api2/json over one
// backend, on loopback over TLS with a self-signed certificate, with an
// API token made for the test.
type server struct {
	url     string
	node    string // the PVE node the backend appears as
	tokenID string
	secret  string
	roots   *x509.CertPool
}

func newServer(t *testing.T, b backends.Backend) *server {
	t.Helper()
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "corral.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tm := tasks.New(st, tasks.Options{Logger: log})
	t.Cleanup(func() {
		tm.Close()
		_ = st.Close()
	})
	f := fleet.New(fleet.Options{Logger: log, Interval: time.Hour})
	if err := f.Add(b); err != nil {
		t.Fatal(err)
	}
	f.Refresh(ctx)
	inst := instances.New(f, tm, st, log)
	policy := auth.NewPolicy(nil, false)
	svc, err := apppve.New(ctx, apppve.Options{Fleet: f, Instances: inst, Tasks: tm, Store: st, Policy: policy, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	r := chi.NewRouter()
	r.Route("/api2/json", func(r chi.Router) {
		pve.Mount(r, pve.Deps{Service: svc, Policy: policy, Audit: auth.NewAuditor(st, log), Log: log})
	})
	srv := httptest.NewUnstartedServer(r)
	srv.Config.ErrorLog = stdlog.New(io.Discard, "", 0) // TestUntrustedCertificate's handshake errors
	srv.StartTLS()
	t.Cleanup(srv.Close)
	tok, err := svc.CreateToken(ctx, "root@pam", "corral", "proxmox backend test")
	if err != nil {
		t.Fatal(err)
	}
	id, secret, _ := strings.Cut(tok, "=")
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	return &server{url: srv.URL + "/api2/json", node: apppve.NodeName(backends.ContextKey("", b.Kind(), b.Context())),
		tokenID: id, secret: secret, roots: roots}
}

// backend returns a proxmox backend for the server, verifying its
// certificate against the test CA.
func (s *server) backend(ctx string) *proxmox.Backend {
	return proxmox.New(proxmox.Options{Context: ctx, URL: s.url, TokenID: s.tokenID, Secret: s.secret,
		RootCAs: s.roots, PollInterval: 20 * time.Millisecond, TaskTimeout: time.Minute})
}

func simServer(t *testing.T) *server {
	return newServer(t, sim.New(sim.Options{Context: "lab", Size: 2}))
}

func libvirtServer(t *testing.T) *server {
	_, err := golibvirt.GetVersion()
	requireEngine(t, "libvirt not available", err)
	b := libvirt.New(libvirt.Options{Context: "test", URI: "test:///default"})
	t.Cleanup(func() { _ = b.Close() })
	return newServer(t, b)
}

// httpClient trusts the server's certificate.
func (s *server) httpClient() *http.Client {
	return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: s.roots, MinVersion: tls.VersionTLS12}}}
}

// pxclient is a go-proxmox client of the server with the test's token.
func pxclient(s *server) *goproxmox.Client {
	return goproxmox.NewClient(s.url, goproxmox.WithHTTPClient(s.httpClient()), goproxmox.WithAPIToken(s.tokenID, s.secret))
}
