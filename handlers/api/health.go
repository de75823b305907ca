package api

import (
	"context"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/corral-dev/corral/app/auth"
	"github.com/corral-dev/corral/handlers/middleware"
)

// HealthDeps are what the probes check.
type HealthDeps struct {
	Store interface{ Ping(context.Context) error }
}

// MountHealth registers /healthz (the process answers) and /readyz (the
// store answers) on the root router. Both are public: probes carry no
// identity.
func MountHealth(r chi.Router, d HealthDeps) {
	g := &middleware.Guard{Surface: "rest"}
	g.Route(r, http.MethodGet, "/healthz", auth.Public, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	}))
	g.Route(r, http.MethodGet, "/readyz", auth.Public, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := d.Store.Ping(r.Context()); err != nil {
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "unready", "error": "the database does not answer"})
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
	}))
}
