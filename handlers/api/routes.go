// Package api is the REST surface under /api: JSON in and out, errors as
// {"error": "..."} with the status of their kind, canonical instance refs
// in the path (a bare name is accepted when it is unambiguous).
package api

import (
	"log/slog"

	"github.com/go-chi/chi/v5"

	"github.com/corral-dev/corral/app/fleet"
	"github.com/corral-dev/corral/app/instances"
	"github.com/corral-dev/corral/app/tasks"
)

// Deps are what the REST handlers call.
type Deps struct {
	Instances *instances.Service
	Fleet     *fleet.Fleet
	Tasks     *tasks.Manager
	Log       *slog.Logger
}

type handler struct{ Deps }

// Mount registers every REST route on r, which is mounted at /api. Every
// route is listed here with its method; access rules join them here.
func Mount(r chi.Router, d Deps) {
	if d.Log == nil {
		d.Log = slog.Default()
	}
	h := &handler{d}
	r.Get("/contexts", h.wrap(h.contextList))
	r.Get("/vms", h.wrap(h.vmList))
	r.Post("/vms", h.wrap(h.vmCreate))
	r.Get("/vms/*", h.wrap(h.vmGet))
	r.Delete("/vms/*", h.wrap(h.vmDelete))
	r.Post("/vms/*", h.wrap(h.vmAction)) // /vms/{ref}/{action}
	r.Get("/tasks/{id}", h.wrap(h.taskGet))
	r.Get("/tasklog", h.wrap(h.taskLog))
	r.NotFound(h.wrap(h.notFound))
	r.MethodNotAllowed(h.wrap(h.methodNotAllowed))
}
