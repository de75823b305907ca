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
	case "", "vm", "node", "storage":
		return h.Service.Resources(r.Context(), t)
	case "pool", "sdn":
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

// pools: Corral's folders do not exist yet, so there is no pool.
func (h *handler) pools(_ *http.Request, p pve.Params) (any, error) {
	if id := p["poolid"]; id != "" {
		return nil, &pve.Error{Status: 500, Msg: "pool '" + id + "' does not exist"}
	}
	return []any{}, nil
}

func (h *handler) pool(r *http.Request, _ pve.Params) (any, error) {
	return nil, &pve.Error{Status: 500, Msg: "pool '" + param(r, "poolid") + "' does not exist"}
}
