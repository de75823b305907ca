package pve

import (
	"net/http"

	"github.com/corral-dev/corral/app/pve"
)

// upid answers an operation with its UPID.
func (h *handler) upid(op pve.Op, err error) (any, error) {
	if err != nil {
		return nil, err
	}
	return h.Service.UPID(op), nil
}

func (h *handler) qemuList(r *http.Request, _ pve.Params) (any, error) {
	return h.Service.Guests(r.Context(), param(r, "node"), "qemu")
}

func (h *handler) qemuCreate(r *http.Request, p pve.Params) (any, error) {
	return h.upid(h.Service.Create(r.Context(), caller(r), param(r, "node"), p))
}

func (h *handler) qemuDelete(r *http.Request, _ pve.Params) (any, error) {
	id, err := vmid(r)
	if err != nil {
		return nil, err
	}
	return h.upid(h.Service.Delete(r.Context(), caller(r), param(r, "node"), id))
}

func (h *handler) qemuConfig(r *http.Request, _ pve.Params) (any, error) {
	id, err := vmid(r)
	if err != nil {
		return nil, err
	}
	g, err := h.Service.Guest(r.Context(), param(r, "node"), id)
	if err != nil {
		return nil, err
	}
	return g.Config(), nil
}

func (h *handler) qemuPending(r *http.Request, _ pve.Params) (any, error) {
	id, err := vmid(r)
	if err != nil {
		return nil, err
	}
	g, err := h.Service.Guest(r.Context(), param(r, "node"), id)
	if err != nil {
		return nil, err
	}
	return g.Pending(), nil
}

// qemuConfigPut is the synchronous update: {"data": null}.
func (h *handler) qemuConfigPut(r *http.Request, p pve.Params) (any, error) {
	id, err := vmid(r)
	if err != nil {
		return nil, err
	}
	_, err = h.Service.Update(r.Context(), caller(r), param(r, "node"), id, p)
	return nil, err
}

// qemuConfigPost is the asynchronous update: a UPID.
func (h *handler) qemuConfigPost(r *http.Request, p pve.Params) (any, error) {
	id, err := vmid(r)
	if err != nil {
		return nil, err
	}
	return h.upid(h.Service.Update(r.Context(), caller(r), param(r, "node"), id, p))
}
