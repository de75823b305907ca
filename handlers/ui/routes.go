// Package ui is the dashboard surface: templ pages with htmx on top of
// real forms and links. Every route is registered in Mount; handlers
// parse, call a use case and render a view model from package views.
package ui

import (
	"log/slog"
	"net/http"

	"github.com/alexedwards/scs/v2"
	"github.com/go-chi/chi/v5"

	"github.com/corral-dev/corral/app/auth"
	"github.com/corral-dev/corral/app/fleet"
	"github.com/corral-dev/corral/app/folders"
	"github.com/corral-dev/corral/app/instances"
	"github.com/corral-dev/corral/app/move"
	apppve "github.com/corral-dev/corral/app/pve"
	"github.com/corral-dev/corral/app/schedule"
	"github.com/corral-dev/corral/app/tasks"
	"github.com/corral-dev/corral/app/vdi"
	"github.com/corral-dev/corral/handlers/middleware"
	"github.com/corral-dev/corral/static"
)

// Deps is what the dashboard needs from the composition root.
type Deps struct {
	Instances *instances.Service
	Fleet     *fleet.Fleet
	Tasks     *tasks.Manager
	Assets    *static.Assets
	Log       *slog.Logger
	// Policy decides the access rules (nil: open mode, anonymous allowed);
	// Audit records refusals, sign-ins and sign-outs (nil: not recorded).
	Policy *auth.Policy
	Audit  *auth.Auditor
	// Sessions and OIDC are the sign-in; both nil when OIDC is not
	// configured.
	Sessions *scs.SessionManager
	OIDC     *auth.OIDC
	// PVE manages the Proxmox API's tokens (nil: those pages answer 404).
	PVE *apppve.Service
	// Folders runs the folder tree and bulk actions (nil: no folder tree,
	// and the folder routes answer 404).
	Folders *folders.Service
	// Move plans and runs cold moves (nil: the move dialog is not offered).
	Move *move.Service
	// Schedules manages power and snapshot schedules (nil: those pages answer 404).
	Schedules *schedule.Service
	// VDI is the desktop broker (nil, CORRAL_VDI_BROKER off: /desktops is a 404).
	VDI *vdi.Service
}

// server holds the dependencies of every handler of the surface.
type server struct {
	Deps
}

// Mount registers every dashboard route on r with its access rule:
//
//	Public  the sign-in flow: it must answer before there is an identity
//	Read    pages; anonymous callers only while CORRAL_AUTH_REQUIRED is off
//	Admin   every POST that changes an instance
//	User    the desktops page: signed-in persons; the broker checks
//	        holder-or-admin per desktop
//
// Static files are served by Assets.Handler, mounted by the caller under
// static.Prefix.
func Mount(r chi.Router, d Deps) {
	if d.Log == nil {
		d.Log = slog.Default()
	}
	if d.Policy == nil {
		d.Policy = auth.NewPolicy(nil, false)
	}
	s := &server{Deps: d}
	g := &middleware.Guard{Policy: d.Policy, Audit: d.Audit, Surface: "dashboard", Refuse: s.refuse}
	route := func(method, pattern string, rule auth.Rule, h handlerFunc) {
		g.Route(r, method, pattern, rule, s.handle(h))
	}
	route(http.MethodGet, "/login", auth.Public, s.loginShow)
	route(http.MethodPost, "/login", auth.Public, s.loginStart)
	route(http.MethodGet, "/login/callback", auth.Public, s.loginCallback)
	route(http.MethodPost, "/logout", auth.Public, s.logout)
	route(http.MethodGet, "/", auth.Read, s.datacenter)
	route(http.MethodGet, "/ui/events", auth.Read, s.events)
	route(http.MethodGet, "/ui/activity", auth.Read, s.activity)
	route(http.MethodGet, "/ui/tasks/{id}", auth.Read, s.taskShow)
	route(http.MethodGet, "/audit", auth.Read, s.audit)
	route(http.MethodGet, "/ui/folders", auth.Read, s.foldersShow)
	route(http.MethodPost, "/folders", auth.Admin, s.folderPost("create"))
	for _, op := range []string{"delete", "move", "members", "action"} {
		route(http.MethodPost, "/folders/"+op, auth.Admin, s.folderPost(op))
	}
	route(http.MethodGet, "/pve-tokens", auth.Privileged, s.pveTokens)
	route(http.MethodPost, "/pve-tokens", auth.Admin, s.pveTokenCreate)
	route(http.MethodPost, "/pve-tokens/revoke", auth.Admin, s.pveTokenRevoke)
	route(http.MethodGet, "/schedules", auth.Read, s.schedules)
	route(http.MethodPost, "/schedules", auth.Admin, s.scheduleCreate)
	route(http.MethodPost, "/schedules/{id}/{op}", auth.Admin, s.scheduleChange) // enable, disable, delete
	if d.VDI != nil {                                                            // the broker (CORRAL_VDI_BROKER=1)
		route(http.MethodGet, "/desktops", auth.User, s.desktops)
		route(http.MethodPost, "/desktops/claim", auth.User, s.desktopClaim)
		route(http.MethodPost, "/desktops/start", auth.User, s.desktopStart)
		route(http.MethodPost, "/desktops/release", auth.User, s.desktopRelease)
		route(http.MethodGet, "/desktops/pools", auth.Privileged, s.desktopPools) // everyone's holders
		route(http.MethodPost, "/desktops/pools", auth.Admin, s.desktopPoolCreate)
		route(http.MethodPost, "/desktops/pools/delete", auth.Admin, s.desktopPoolDelete)
		route(http.MethodPost, "/desktops/pools/resize", auth.Admin, s.desktopPoolResize)
	}
	// Canonical refs contain slashes, so /vm/ takes the rest of the path:
	// GET /vm/{ref} (the page), GET /vm/{ref}/delete (the confirmation,
	// refused to non-admins by its handler), POST /vm/{ref}/{action} (a
	// power action, or delete).
	route(http.MethodPost, "/ui/move/preflight", auth.Read, s.movePreflight) // touches nothing
	route(http.MethodPost, "/ui/move", auth.Admin, s.moveCommit)
	route(http.MethodGet, "/vm/*", auth.Read, s.vmGet)
	route(http.MethodPost, "/vm/*", auth.Admin, s.vmPost)
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
