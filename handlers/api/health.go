package api

import (
	"context"
	"net/http"

	"github.com/go-chi/chi/v5"
)

// HealthDeps are what the probes check.
type HealthDeps struct {
	Store interface{ Ping(context.Context) error }
}

// MountHealth registers /healthz (the process answers) and /readyz (the
// store answers) on the root router.
func MountHealth(r chi.Router, d HealthDeps) {
	r.Get("/healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
	r.Get("/readyz", func(w http.ResponseWriter, r *http.Request) {
		if err := d.Store.Ping(r.Context()); err != nil {
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "unready", "error": "the database does not answer"})
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
	})
}
