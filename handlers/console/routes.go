// Package console is the browser-console surface: the console page and the
// WebSocket bridges between the browser (noVNC, xterm.js) and an
// instance's console connection, opened through the backend's
// backends.ConsoleDialer, and the RDCleanPath proxy of IronRDP's web
// client (rdp.go), reached with a short-lived single-use token
// (rdp_token.go).
//
// Every viewer of a VNC console gets its own backend connection (RFB
// servers such as QEMU's accept several clients in a shared session).
// A serial port accepts one client at a time, so each instance's serial
// console is one backend connection held by a hub that fans its output out
// to every viewer and forwards the input of any of them.
//
// Opening a console is privileged even though it is a GET: Mount puts
// every route behind Deps.Authorize.
package console

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/corral-dev/corral/app/auth"
	"github.com/corral-dev/corral/app/fleet"
	"github.com/corral-dev/corral/app/instances"
	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/handlers/middleware"
	"github.com/corral-dev/corral/static"
)

// Deps is what the console surface needs from the composition root.
type Deps struct {
	Fleet     *fleet.Fleet
	Instances *instances.Service
	Assets    *static.Assets
	Log       *slog.Logger
	// Authorize guards every console route (the admin check); nil lets
	// every caller through.
	Authorize func(http.Handler) http.Handler
	// Sessions, when set, is told of each viewer that opens and closes
	// (the VDI broker's session count).
	Sessions SessionHook
	// Allow, when set, is asked before any console of an instance is shown,
	// dialed or given an RDP token, after Authorize: the VDI broker's
	// holder-or-admin rule for a claimed desktop. Its error is the answer.
	Allow func(ctx context.Context, id auth.Identity, ref backends.InstanceRef) error
	// TrustedProxies may forward RDP WebSockets they received over https
	// (X-Forwarded-Proto); see secureTransport.
	TrustedProxies []netip.Prefix
	// Now is the clock of the RDP tokens; nil means time.Now.
	Now func() time.Time
}

// server holds the dependencies of every handler of the surface.
type server struct {
	Deps
	hubs   *hubs
	tokens *rdpTokens
	csrf   *http.CrossOriginProtection
}

// Mount registers the console routes on r. The WebSocket routes hijack the
// connection: mount them outside any response-compressing middleware.
// Canonical refs contain slashes, so each route takes the rest of the
// path, and the ref is read from the escaped path.
func Mount(r chi.Router, d Deps) {
	if d.Log == nil {
		d.Log = slog.Default()
	}
	auth := d.Authorize
	if auth == nil {
		auth = func(h http.Handler) http.Handler { return h }
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	s := &server{Deps: d, hubs: newHubs(d.Log), tokens: newRDPTokens(d.Now), csrf: http.NewCrossOriginProtection()}
	r.Group(func(r chi.Router) {
		r.Use(auth)
		r.Method(http.MethodGet, "/console/*", s.handle(s.consoleShow))
		r.Method(http.MethodGet, "/ws/vnc/*", s.handle(s.vnc))
		r.Method(http.MethodGet, "/ws/serial/*", s.handle(s.serial))
		r.Method(http.MethodGet, "/ws/rdp/*", s.handle(s.rdp))
		r.Method(http.MethodPost, "/rdp-token/*", s.handle(s.rdpToken))
	})
}

// handlerFunc writes a response, or returns an error and writes nothing.
// The WebSocket handlers return errors only before the upgrade.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

// handle turns a handlerFunc into an http.Handler: an error becomes the
// error page for the console page, {"error": ...} for a request that
// accepts JSON, and a plain-text status with the safe message for a
// refused upgrade (a browser's WebSocket API shows neither,
// but scripts and logs do).
func (s *server) handle(h handlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		err := h(w, r)
		if err == nil {
			return
		}
		if isUpgrade(r) {
			status, msg := middleware.Public(s.Log, r, err)
			http.Error(w, msg, status)
			return
		}
		if strings.Contains(r.Header.Get("Accept"), "application/json") {
			// The RDP element's token request: the REST API's error shape.
			status, msg := middleware.Public(s.Log, r, err)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			_ = json.NewEncoder(w).Encode(struct {
				Error string `json:"error"`
			}{msg})
			return
		}
		s.renderError(w, r, err)
	})
}
