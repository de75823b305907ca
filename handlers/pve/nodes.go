package pve

import (
	"net/http"

	"github.com/corral-dev/corral/app/pve"
)

func (h *handler) nodes(r *http.Request, _ pve.Params) (any, error) {
	return h.Service.Nodes(r.Context())
}

func (h *handler) nodeStatus(r *http.Request, _ pve.Params) (any, error) {
	return h.Service.NodeStatus(r.Context(), param(r, "node"))
}

func (h *handler) storageList(r *http.Request, p pve.Params) (any, error) {
	return h.Service.Storages(r.Context(), param(r, "node"), p["content"])
}

func (h *handler) storageStatus(r *http.Request, _ pve.Params) (any, error) {
	return h.Service.StorageStatus(r.Context(), param(r, "node"), param(r, "storage"))
}

func (h *handler) storageContent(r *http.Request, p pve.Params) (any, error) {
	return h.Service.Content(r.Context(), param(r, "node"), param(r, "storage"), p["content"])
}

func (h *handler) storageVolume(r *http.Request, _ pve.Params) (any, error) {
	return h.Service.Volume(r.Context(), param(r, "node"), param(r, "storage"), param(r, "volid"))
}
