// Package pve is the Proxmox-VE-compatible surface mounted at /api2/json:
// PVE's envelope {"data": ...}, PVE's error shape (the message as the
// status line's reason phrase, "message" and "errors" fields), PVE's
// authentication (tickets, API tokens) and the value formats its clients
// parse strictly (docs/proxmox-api.md). Handlers parse, call app/pve and
// render; the route table below is the whole surface.
package pve

import (
	"log/slog"
	"net/http"

	"github.com/go-chi/chi/v5"
	chimw "github.com/go-chi/chi/v5/middleware"

	"github.com/corral-dev/corral/app/auth"
	"github.com/corral-dev/corral/app/pve"
	"github.com/corral-dev/corral/handlers/middleware"
)

// Deps are what the PVE handlers call.
type Deps struct {
	Service *pve.Service
	Policy  *auth.Policy  // nil: open mode
	Audit   *auth.Auditor // nil: refusals not recorded
	Admins  []string      // the allowlist, listed by /access/users
	Log     *slog.Logger
}

type handler struct {
	Deps
}

// Mount registers every route on r, which is mounted at /api2/json.
// Callers always authenticate (a ticket or an API token): every route but
// the login answers 401 without credentials, whatever the server's mode.
//
//	Public  POST /access/ticket (the login itself)
//	Read    GETs: any authenticated caller
//	Admin   changes: admins (the allowlist names PVE user ids; everyone
//	        authenticated in open mode)
func Mount(r chi.Router, d Deps) {
	if d.Log == nil {
		d.Log = slog.Default()
	}
	if d.Policy == nil {
		d.Policy = auth.NewPolicy(nil, false)
	}
	h := &handler{Deps: d}
	g := &middleware.Guard{Policy: d.Policy, Audit: d.Audit, Surface: "pve", Refuse: h.refuse}
	r.Use(chimw.StripSlashes, h.identify)
	route := func(method, pattern string, rule auth.Rule, fn func(*http.Request, pve.Params) (any, error)) {
		g.Route(r, method, pattern, rule, h.wrap(fn))
	}
	const R, A = auth.Read, auth.Admin

	route(http.MethodPost, "/access/ticket", auth.Public, h.ticket)
	route(http.MethodGet, "/access/users", R, h.users)
	route(http.MethodGet, "/access/users/{userid}/token", R, h.userTokens)
	route(http.MethodGet, "/access/groups", R, h.groups)
	route(http.MethodGet, "/access/roles", R, h.roles)
	route(http.MethodGet, "/access/permissions", R, h.permissions)
	route(http.MethodGet, "/access/domains", R, h.domains)

	route(http.MethodGet, "/version", R, h.version)
	route(http.MethodGet, "/cluster/status", R, h.clusterStatus)
	route(http.MethodGet, "/cluster/resources", R, h.clusterResources)
	route(http.MethodGet, "/cluster/nextid", R, h.nextID)
	route(http.MethodGet, "/cluster/ha/resources/{sid}", R, h.haResource)
	route(http.MethodGet, "/pools", R, h.pools)
	route(http.MethodGet, "/pools/*", R, h.pool) // a pool id may hold slashes

	route(http.MethodGet, "/nodes", R, h.nodes)
	route(http.MethodGet, "/nodes/{node}/status", R, h.nodeStatus)
	route(http.MethodGet, "/nodes/{node}/storage", R, h.storageList)
	route(http.MethodGet, "/nodes/{node}/storage/{storage}/status", R, h.storageStatus)
	route(http.MethodGet, "/nodes/{node}/storage/{storage}/content", R, h.storageContent)
	route(http.MethodGet, "/nodes/{node}/storage/{storage}/content/{volid}", R, h.storageVolume)
	route(http.MethodGet, "/nodes/{node}/tasks", R, h.taskList)
	route(http.MethodGet, "/nodes/{node}/tasks/{upid}/status", R, h.taskStatus)
	route(http.MethodGet, "/nodes/{node}/tasks/{upid}/log", R, h.taskLog)
	route(http.MethodGet, "/nodes/{node}/lxc", R, h.lxcList)
	route(http.MethodGet, "/nodes/{node}/lxc/{vmid}/config", R, h.lxcConfig)
	route(http.MethodGet, "/nodes/{node}/lxc/{vmid}/status/current", R, h.lxcStatus)
	route(http.MethodPost, "/nodes/{node}/lxc/{vmid}/status/{action}", A, h.lxcPower)

	route(http.MethodGet, "/nodes/{node}/qemu", R, h.qemuList)
	route(http.MethodPost, "/nodes/{node}/qemu", A, h.qemuCreate)
	route(http.MethodDelete, "/nodes/{node}/qemu/{vmid}", A, h.qemuDelete)
	route(http.MethodGet, "/nodes/{node}/qemu/{vmid}/config", R, h.qemuConfig)
	route(http.MethodPut, "/nodes/{node}/qemu/{vmid}/config", A, h.qemuConfigPut)
	route(http.MethodPost, "/nodes/{node}/qemu/{vmid}/config", A, h.qemuConfigPost)
	route(http.MethodGet, "/nodes/{node}/qemu/{vmid}/pending", R, h.qemuPending)
	route(http.MethodGet, "/nodes/{node}/qemu/{vmid}/status/current", R, h.qemuStatus)
	route(http.MethodPost, "/nodes/{node}/qemu/{vmid}/status/{action}", A, h.qemuPower)
	route(http.MethodPut, "/nodes/{node}/qemu/{vmid}/resize", A, h.qemuResize)
	route(http.MethodPost, "/nodes/{node}/qemu/{vmid}/clone", A, h.qemuClone)
	route(http.MethodPost, "/nodes/{node}/qemu/{vmid}/template", A, h.qemuTemplate)
	route(http.MethodGet, "/nodes/{node}/qemu/{vmid}/agent/network-get-interfaces", R, h.qemuInterfaces)
	route(http.MethodPost, "/nodes/{node}/qemu/{vmid}/vncproxy", A, h.qemuVNCProxy)
	route(http.MethodPost, "/nodes/{node}/qemu/{vmid}/termproxy", A, h.qemuTermProxy)
	// A WebSocket (not PVE's envelope) and privileged although a GET.
	g.Route(r, http.MethodGet, "/nodes/{node}/qemu/{vmid}/vncwebsocket", auth.Privileged, http.HandlerFunc(h.qemuVNCWebsocket))
	route(http.MethodGet, "/nodes/{node}/qemu/{vmid}/snapshot", R, h.snapshotList)
	route(http.MethodPost, "/nodes/{node}/qemu/{vmid}/snapshot", A, h.snapshotCreate)
	route(http.MethodDelete, "/nodes/{node}/qemu/{vmid}/snapshot/{snapname}", A, h.snapshotDelete)
	route(http.MethodPost, "/nodes/{node}/qemu/{vmid}/snapshot/{snapname}/rollback", A, h.snapshotRollback)

	r.NotFound(h.wrap(h.notImplemented).ServeHTTP)
	r.MethodNotAllowed(h.wrap(h.notImplemented).ServeHTTP)
}

// notImplemented is PVE's answer for a path it does not serve.
func (h *handler) notImplemented(r *http.Request, _ pve.Params) (any, error) {
	return nil, &pve.Error{Status: http.StatusNotImplemented, Msg: "Method '" + r.Method + " " + r.URL.Path + "' not implemented"}
}
