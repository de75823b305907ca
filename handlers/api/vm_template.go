package api

import (
	"net/http"

	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/handlers/middleware"
)

// vmTemplate answers POST /api/vms/{ref}/template with {"on": bool}.
func (h *handler) vmTemplate(w http.ResponseWriter, r *http.Request, ref string) error {
	var req struct {
		On *bool `json:"on"`
	}
	if err := decode(r, &req); err != nil {
		return err
	}
	if req.On == nil {
		return backends.Invalidf("on is required: {\"on\": true} marks the VM as a template, {\"on\": false} unmarks it")
	}
	t, err := h.Instances.SetTemplate(r.Context(), middleware.Origin(r, "rest"), ref, *req.On)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"isTemplate": *req.On, "task": t.ID})
	return nil
}
