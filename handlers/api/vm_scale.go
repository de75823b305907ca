package api

import (
	"net/http"

	"github.com/corral-dev/corral/app/instances"
	"github.com/corral-dev/corral/handlers/middleware"
)

// vmScale answers POST /api/vms/{ref}/scale with {"cpu": 4, "mem": "8G"}
// (either may be left out): the change runs as a task the answer waits for.
func (h *handler) vmScale(w http.ResponseWriter, r *http.Request, ref string) error {
	var req struct {
		CPU int    `json:"cpu"`
		Mem string `json:"mem"`
	}
	if err := decode(r, &req); err != nil {
		return err
	}
	t, err := h.Instances.Scale(r.Context(), middleware.Origin(r, "rest"), ref, instances.ScaleRequest{CPUs: req.CPU, Memory: req.Mem})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok", "task": t.ID})
	return nil
}
