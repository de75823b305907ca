package pve

import (
	"net/http"
	"strconv"

	"github.com/corral-dev/corral/app/pve"
)

func (h *handler) version(*http.Request, pve.Params) (any, error) { return pve.Version, nil }

func (h *handler) clusterStatus(r *http.Request, _ pve.Params) (any, error) {
	return h.Service.ClusterStatus(r.Context())
}

func (h *handler) clusterResources(r *http.Request, p pve.Params) (any, error) {
	switch t := p["type"]; t {
	case "", "vm", "node", "storage", "pool":
		return h.Service.Resources(r.Context(), t)
	case "sdn":
		return []any{}, nil
	default:
		return nil, pve.ParamError("type", "value '"+t+"' does not have a value in the enumeration 'vm, storage, node, sdn, pool'")
	}
}

// nextID answers a string, as PVE does (Telmate and go-proxmox decode
// one).
func (h *handler) nextID(r *http.Request, p pve.Params) (any, error) {
	want, err := p.Int("vmid", 0)
	if err != nil {
		return nil, err
	}
	id, err := h.Service.NextID(r.Context(), want)
	if err != nil {
		return nil, err
	}
	return strconv.FormatInt(id, 10), nil
}

// haResource: Corral guests are never HA-managed.
func (h *handler) haResource(r *http.Request, _ pve.Params) (any, error) {
	return nil, &pve.Error{Status: 500, Msg: "no such resource '" + param(r, "sid") + "'"}
}

// pools answers GET /pools, and with ?poolid= PVE 8.1's query form: a
// list of the one pool with its members.
func (h *handler) pools(r *http.Request, p pve.Params) (any, error) {
	id := p["poolid"]
	if id == "" {
		return h.Service.Pools(r.Context())
	}
	members, err := h.Service.PoolMembers(r.Context(), id, p["type"])
	if err != nil {
		return nil, err
	}
	return []map[string]any{{"poolid": id, "members": members}}, nil
}

// pool answers GET /pools/{poolid}, the path form: the pool id may hold
// slashes (a nested folder), raw or escaped.
func (h *handler) pool(r *http.Request, p pve.Params) (any, error) {
	members, err := h.Service.PoolMembers(r.Context(), param(r, "*"), p["type"])
	if err != nil {
		return nil, err
	}
	return map[string]any{"members": members}, nil
}
