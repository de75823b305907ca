package api

import (
	"log/slog"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/corral-dev/corral/app/auth"
	"github.com/corral-dev/corral/app/folders"
	"github.com/corral-dev/corral/handlers/middleware"
)

// MountFolders registers only the folder routes, with the lines that
// belong in Mount once Deps has a Folders field.
func MountFolders(r chi.Router, d Deps, svc *folders.Service) {
	if d.Log == nil {
		d.Log = slog.Default()
	}
	if d.Policy == nil {
		d.Policy = auth.NewPolicy(nil, false)
	}
	h := &handler{Deps: d}
	g := &middleware.Guard{Policy: d.Policy, Audit: d.Audit, Surface: "rest", Refuse: h.refuse}
	h.guard = g
	route := func(method, pattern string, rule auth.Rule, fn func(http.ResponseWriter, *http.Request) error) {
		g.Route(r, method, pattern, rule, h.wrap(fn))
	}
	fa := folderAPI{handler: h, svc: svc}
	route(http.MethodGet, "/folders", auth.Read, fa.list)
	route(http.MethodPost, "/folders", auth.Admin, fa.create)
	route(http.MethodDelete, "/folders", auth.Admin, fa.delete)
	route(http.MethodPost, "/folders/move", auth.Admin, fa.move)
	route(http.MethodPost, "/folders/members", auth.Admin, fa.memberAdd)
	route(http.MethodDelete, "/folders/members", auth.Admin, fa.memberRemove)
	route(http.MethodPost, "/folders/action", auth.Admin, fa.action)
}
