// Package proxmox is the backend for Proxmox VE contexts: a PVE cluster
// driven over its HTTPS API (/api2/json) with a revocable API token,
// through github.com/luthermonson/go-proxmox.
//
// Every node's qemu guests are VMs and its lxc guests are CTs. A guest's
// canonical reference is
//
//	proxmox/CONTEXT/NODE/NAME
//
// with the node as the namespace and the guest's name as the name. PVE's
// vmid is unique in a cluster and its names are not, but a reference must
// be readable and the conformance contract wants Create(spec) to answer
// with spec's name, so the name wins; the vmid is shown as a fact. The
// consequences, accepted and documented: migrating a guest to another
// node or renaming it in PVE changes its reference (Corral's folders and
// schedules keyed by the old one no longer match it), and a guest whose
// name is empty or shared with another guest of its node is named by its
// vmid in decimal ("105") so that every reference stays unique. Corral
// itself refuses to create or clone onto a name used anywhere in the
// cluster, so guests it makes never need that fallback.
//
// Every change in PVE is a task with a UPID; the backend waits for the
// task and maps a failed one to backends.ErrFailed, keeping PVE's exit
// status (free text that may name hosts and storage paths) in the cause.
//
// Consoles are PVE's VNC websockets (console.go): a vncproxy ticket, the
// websocket dialled with the API token, PVE's VNC password step done by
// the backend, so the console bridge sees a plain RFB server.
package proxmox

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	proxmox "github.com/luthermonson/go-proxmox"

	"github.com/corral-dev/corral/backends"
)

var (
	_ backends.Backend       = (*Backend)(nil)
	_ backends.Snapshotter   = (*Backend)(nil)
	_ backends.Cloner        = (*Backend)(nil)
	_ backends.Doctor        = (*Backend)(nil)
	_ backends.ConsoleDialer = (*Backend)(nil)
)

// Options configure one Proxmox VE context.
type Options struct {
	// Context names the context, e.g. "homelab"; it appears in references
	// and messages, so it must not carry credentials or the URL.
	Context string
	// URL is the API base, "https://host:8006/api2/json".
	URL string
	// TokenID is the API token's id, "USER@REALM!TOKENID", and Secret its
	// secret (a UUID). The secret is sent only in the Authorization header
	// and never appears in an error or a log line.
	TokenID string
	Secret  string
	// InsecureTLS skips verification of the server's certificate (PVE's
	// default certificate is self-signed). RootCAs, when set, is the pool
	// the certificate is verified against instead of the system's.
	InsecureTLS bool
	RootCAs     *x509.CertPool
	// Storage is where new disks are allocated ("local-lvm" when empty)
	// and Bridge the bridge of a new guest's network card ("vmbr0").
	Storage string
	Bridge  string
	// PollInterval is how often a running task is polled (1 s when zero)
	// and TaskTimeout how long a task may run (10 min when zero).
	PollInterval time.Duration
	TaskTimeout  time.Duration
	// HTTPClient replaces the client built from the TLS options; for tests.
	HTTPClient *http.Client
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Logger receives diagnostics; nil discards them.
	Logger *slog.Logger
}

// Backend is one Proxmox VE context. It is safe for concurrent use: it
// holds no state besides the client, and PVE is the only truth.
type Backend struct {
	opts Options
	c    *proxmox.Client
	hc   *http.Client // also dials the consoles' websockets
}

// New returns a backend for opts. It does not connect: the first call
// does, so a context whose server is down can still be constructed and
// reports itself unavailable.
func New(opts Options) *Backend {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Storage == "" {
		opts.Storage = "local-lvm"
	}
	if opts.Bridge == "" {
		opts.Bridge = "vmbr0"
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = time.Second
	}
	if opts.TaskTimeout <= 0 {
		opts.TaskTimeout = 10 * time.Minute
	}
	hc := opts.HTTPClient
	if hc == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: opts.RootCAs, InsecureSkipVerify: opts.InsecureTLS} //nolint:gosec // the operator's explicit choice for a self-signed PVE
		hc = &http.Client{Transport: tr}
	}
	c := proxmox.NewClient(opts.URL,
		proxmox.WithHTTPClient(hc),
		proxmox.WithAPIToken(opts.TokenID, opts.Secret),
		proxmox.WithUserAgent("corral"),
		// go-proxmox's own logger prints request paths and bodies; ours
		// goes to the debug level of the context's logger, never stderr.
		proxmox.WithLogger(logger{opts.Logger}),
	)
	return &Backend{opts: opts, c: c, hc: hc}
}

// Kind implements backends.Backend.
func (b *Backend) Kind() backends.Kind { return backends.KindProxmox }

// Context implements backends.Backend.
func (b *Backend) Context() string { return b.opts.Context }

// logger adapts slog to go-proxmox's leveled logger. Everything goes to
// debug: the library logs request bodies, which are not secret (the token
// travels in a header) but are noise at any other level.
type logger struct{ l *slog.Logger }

func (l logger) Debugf(format string, v ...any) {
	if l.l.Enabled(context.Background(), slog.LevelDebug) {
		l.l.Debug("go-proxmox: " + fmt.Sprintf(format, v...))
	}
}
func (l logger) Infof(format string, v ...any)  { l.Debugf(format, v...) }
func (l logger) Warnf(format string, v ...any)  { l.Debugf(format, v...) }
func (l logger) Errorf(format string, v ...any) { l.Debugf(format, v...) }
