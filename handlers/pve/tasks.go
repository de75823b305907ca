package pve

import (
	"net/http"

	"github.com/corral-dev/corral/app/pve"
)

func (h *handler) taskList(r *http.Request, p pve.Params) (any, error) {
	limit, err := p.Int("limit", 50)
	if err != nil {
		return nil, err
	}
	return h.Service.NodeTasks(r.Context(), param(r, "node"), int(limit))
}

func (h *handler) taskStatus(r *http.Request, _ pve.Params) (any, error) {
	return h.Service.TaskStatus(r.Context(), param(r, "node"), param(r, "upid"))
}

func (h *handler) taskLog(r *http.Request, p pve.Params) (any, error) {
	start, err := p.Int("start", 0)
	if err != nil {
		return nil, err
	}
	limit, err := p.Int("limit", 50)
	if err != nil {
		return nil, err
	}
	lines, _, err := h.Service.TaskLog(r.Context(), param(r, "node"), param(r, "upid"), int(start), int(limit))
	return lines, err
}
