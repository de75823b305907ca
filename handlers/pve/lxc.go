package pve

import (
	"net/http"

	"github.com/corral-dev/corral/app/pve"
)

// lxcList lists the node's CTs (backends that run containers).
func (h *handler) lxcList(r *http.Request, _ pve.Params) (any, error) {
	return h.Service.Guests(r.Context(), param(r, "node"), "lxc")
}

func (h *handler) lxcStatus(r *http.Request, _ pve.Params) (any, error) {
	id, err := vmid(r)
	if err != nil {
		return nil, err
	}
	g, err := h.Service.Container(r.Context(), param(r, "node"), id)
	if err != nil {
		return nil, err
	}
	return h.Service.CTStatus(g), nil
}

func (h *handler) lxcConfig(r *http.Request, _ pve.Params) (any, error) {
	id, err := vmid(r)
	if err != nil {
		return nil, err
	}
	g, err := h.Service.Container(r.Context(), param(r, "node"), id)
	if err != nil {
		return nil, err
	}
	return h.Service.CTConfig(g), nil
}

func (h *handler) lxcPower(r *http.Request, p pve.Params) (any, error) {
	id, err := vmid(r)
	if err != nil {
		return nil, err
	}
	return h.upid(h.Service.PowerCT(r.Context(), caller(r), param(r, "node"), id, param(r, "action"), p))
}
