// Package api is the REST surface under /api: JSON in and out, errors as
// {"error": "..."} with the status of their kind, canonical instance refs
// in the path (a bare name is accepted when it is unambiguous).
package api

import (
	"log/slog"
	"net/http"

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
)

// Deps are what the REST handlers call.
type Deps struct {
	Instances *instances.Service
	Fleet     *fleet.Fleet
	Tasks     *tasks.Manager
	Log       *slog.Logger
	// Policy decides the access rules (nil: open mode, anonymous allowed);
	// Audit records refused mutations (nil: not recorded).
	Policy *auth.Policy
	Audit  *auth.Auditor
	// PVE manages the Proxmox API's tokens (nil: those routes answer 404).
	PVE *apppve.Service
	// Folders runs the folder tree and bulk actions (nil: those routes answer 404).
	Folders *folders.Service
	// Move plans and runs cold moves between backends (nil: those routes answer 404).
	Move *move.Service
	// Schedules manages power and snapshot schedules (nil: those routes answer 404).
	Schedules *schedule.Service
	// VDI is the desktop broker (nil, CORRAL_VDI_BROKER off: /vdi/ answers 404).
	VDI *vdi.Service
}

type handler struct {
	Deps
	guard *middleware.Guard
}

// Mount registers every REST route on r, which is mounted at /api. Every
// route is listed here with its method and its access rule:
//
//	Read        any caller that is not refused (anonymous only while
//	            CORRAL_AUTH_REQUIRED is off)
//	Admin       changes: admins (everyone in open mode) and the peer token
//	Privileged  GETs as strong as a change: downloading a disk
//	User        the VDI broker's self-service routes: signed-in persons,
//	            not anonymous callers (401) nor the peer token (403);
//	            holder-or-admin is checked by the broker per desktop
func Mount(r chi.Router, d Deps) {
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
	route(http.MethodGet, "/whoami", auth.Read, h.whoami)
	route(http.MethodGet, "/contexts", auth.Read, h.contextList)
	route(http.MethodGet, "/vms", auth.Read, h.vmList)
	route(http.MethodPost, "/vms", auth.Admin, h.vmCreate)
	route(http.MethodGet, "/vms/*", auth.Read, h.vmGet)
	route(http.MethodDelete, "/vms/*", auth.Admin, h.vmDelete)
	route(http.MethodPost, "/vms/*", auth.Admin, h.vmAction) // {ref}/{action}, clone, snapshots[/{snap}/restore]
	// Export has routes of its own for its rule: a bare name, a canonical
	// ref, a peer's ref (chi prefers these to the catch-all above).
	for _, p := range []string{"/vms/{r1}/export", "/vms/{r1}/{r2}/{r3}/{r4}/export", "/vms/{r0}/{r1}/{r2}/{r3}/{r4}/export"} {
		route(http.MethodGet, p, auth.Privileged, h.vmExportRoute)
	}
	route(http.MethodGet, "/cts", auth.Read, h.ctList)
	route(http.MethodPost, "/cts", auth.Admin, h.ctCreate)
	route(http.MethodPost, "/cts/*", auth.Admin, h.ctAction) // {ref}/{action}: start|stop
	route(http.MethodDelete, "/cts/*", auth.Admin, h.ctDelete)
	route(http.MethodGet, "/images", auth.Read, h.imageList)
	route(http.MethodGet, "/doctor", auth.Read, h.doctor)
	route(http.MethodGet, "/pve/tokens", auth.Privileged, h.pveTokenList)
	route(http.MethodPost, "/pve/tokens", auth.Admin, h.pveTokenCreate)
	route(http.MethodDelete, "/pve/tokens/{user}/{tokenId}", auth.Admin, h.pveTokenRevoke)
	fa := folderAPI{handler: h, svc: d.Folders}
	route(http.MethodGet, "/folders", auth.Read, fa.list)
	route(http.MethodPost, "/folders", auth.Admin, fa.create)
	route(http.MethodDelete, "/folders", auth.Admin, fa.delete)
	route(http.MethodPost, "/folders/move", auth.Admin, fa.move)
	route(http.MethodPost, "/folders/members", auth.Admin, fa.memberAdd)
	route(http.MethodDelete, "/folders/members", auth.Admin, fa.memberRemove)
	route(http.MethodPost, "/folders/action", auth.Admin, fa.action)
	mv := moveAPI{handler: h, svc: d.Move}
	route(http.MethodGet, "/move/destinations", auth.Read, mv.destinations)
	route(http.MethodPost, "/move/preflight", auth.Read, mv.preflight) // touches nothing
	route(http.MethodPost, "/move", auth.Admin, mv.commit)
	sa := scheduleAPI{handler: h, svc: d.Schedules}
	route(http.MethodGet, "/schedules", auth.Read, sa.list)
	route(http.MethodPost, "/schedules", auth.Admin, sa.create)
	route(http.MethodGet, "/schedules/{id}", auth.Read, sa.get)
	route(http.MethodDelete, "/schedules/{id}", auth.Admin, sa.delete)
	route(http.MethodPost, "/schedules/{id}/enable", auth.Admin, sa.enable(true))
	route(http.MethodPost, "/schedules/{id}/disable", auth.Admin, sa.enable(false))
	if d.VDI != nil { // the broker (CORRAL_VDI_BROKER=1); off, every /vdi/ route answers 404
		v := vdiAPI{h}
		route(http.MethodGet, "/vdi/pools", auth.User, v.pools)
		route(http.MethodPost, "/vdi/pools/{kind}/{ns}/{pool}/claim", auth.User, v.claim)
		route(http.MethodPatch, "/vdi/pools/{kind}/{ns}/{pool}", auth.Admin, v.resize) // {"size": N}
		route(http.MethodGet, "/vdi/desktops", auth.User, v.desktops)
		route(http.MethodGet, "/vdi/desktops/{kind}/{ns}/{member}", auth.User, v.desktop)
		route(http.MethodPost, "/vdi/desktops/{kind}/{ns}/{member}/start", auth.User, v.start)
		route(http.MethodPost, "/vdi/desktops/{kind}/{ns}/{member}/release", auth.User, v.release)
		route(http.MethodGet, "/vdi/desktops/{kind}/{ns}/{member}/connect", auth.User, v.connect)
	}
	route(http.MethodGet, "/tasks/{id}", auth.Read, h.taskGet)
	route(http.MethodGet, "/tasklog", auth.Read, h.taskLog)
	// Unknown routes answer 404/405 in JSON, except to callers refused
	// everything (so the API's shape is not probed anonymously).
	r.NotFound(g.Wrap(auth.Read, h.wrap(h.notFound)).ServeHTTP)
	r.MethodNotAllowed(g.Wrap(auth.Read, h.wrap(h.methodNotAllowed)).ServeHTTP)
}
