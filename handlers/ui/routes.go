// Package ui is the dashboard surface: templ pages with htmx on top of
// real forms and links. Every route is registered in Mount; handlers
// parse, call a use case and render a view model from package views.
package ui

import (
	"log/slog"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/corral-dev/corral/app/fleet"
	"github.com/corral-dev/corral/app/instances"
	"github.com/corral-dev/corral/app/tasks"
	"github.com/corral-dev/corral/static"
)

// Deps is what the dashboard needs from the composition root.
type Deps struct {
	Instances *instances.Service
	Fleet     *fleet.Fleet
	Tasks     *tasks.Manager
	Assets    *static.Assets
	Log       *slog.Logger
}

// server holds the dependencies of every handler of the surface.
type server struct {
	Deps
}

// Mount registers every dashboard route on r. Static files are served by
// Assets.Handler, mounted by the caller under static.Prefix.
func Mount(r chi.Router, d Deps) {
	if d.Log == nil {
		d.Log = slog.Default()
	}
	s := &server{Deps: d}
	r.Method(http.MethodGet, "/", s.handle(s.datacenter))
	r.Method(http.MethodGet, "/ui/events", s.handle(s.events))
	r.Method(http.MethodGet, "/ui/activity", s.handle(s.activity))
	r.Method(http.MethodGet, "/ui/tasks/{id}", s.handle(s.taskShow))
	// Canonical refs contain slashes, so /vm/ takes the rest of the path:
	// GET /vm/{ref} (the page), GET /vm/{ref}/delete (the confirmation),
	// POST /vm/{ref}/{action} (a power action, or delete).
	r.Method(http.MethodGet, "/vm/*", s.handle(s.vmGet))
	r.Method(http.MethodPost, "/vm/*", s.handle(s.vmPost))
}

// handlerFunc is a dashboard handler: it writes a response, or returns an
// error and writes nothing.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

// handle turns a handlerFunc into an http.Handler: an error becomes the
// error partial (htmx) or the error page (plain browser).
func (s *server) handle(h handlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := h(w, r); err != nil {
			s.renderError(w, r, err)
		}
	})
}
