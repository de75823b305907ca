package api

import (
	"net/http"

	"github.com/corral-dev/corral/handlers/middleware"
)

// vmMigrate answers POST /api/vms/{ref}/migrate with an optional
// {"targetNode": "..."}: 202 {"task": ...} once the backend accepted the
// migration; a refusal (not running 409, not migratable 400) at once.
func (h *handler) vmMigrate(w http.ResponseWriter, r *http.Request, ref string) error {
	var req struct {
		TargetNode string `json:"targetNode"`
	}
	if r.ContentLength != 0 {
		if err := decode(r, &req); err != nil {
			return err
		}
	}
	t, err := h.Instances.Migrate(r.Context(), middleware.Origin(r, "rest"), ref, req.TargetNode)
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/api/tasks/"+t.ID)
	writeJSON(w, http.StatusAccepted, map[string]string{"task": t.ID})
	return nil
}
