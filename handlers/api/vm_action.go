package api

import (
	"net/http"
	"strings"

	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/handlers/middleware"
)

// vmAction answers POST /api/vms/{ref}/{action}: the power action runs as
// a task and the answer waits for it.
func (h *handler) vmAction(w http.ResponseWriter, r *http.Request) error {
	p := refPath(r, "/vms/")
	i := strings.LastIndex(p, "/")
	if i < 0 {
		return backends.Invalidf("POST /api/vms/{ref}/{action} needs an action: accepted are start, shutdown, stop, restart, pause, resume")
	}
	t, err := h.Instances.Power(r.Context(), middleware.Origin(r, "rest"), p[:i], p[i+1:])
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok", "task": t.ID})
	return nil
}

// vmDelete answers DELETE /api/vms/{ref}.
func (h *handler) vmDelete(w http.ResponseWriter, r *http.Request) error {
	t, err := h.Instances.Delete(r.Context(), middleware.Origin(r, "rest"), refPath(r, "/vms/"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "deleted", "task": t.ID})
	return nil
}
