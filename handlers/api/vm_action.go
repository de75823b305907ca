package api

import (
	"net/http"

	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/handlers/middleware"
)

// vmAction answers POST /api/vms/{ref}/{action} (a power action, run as a
// task that the answer waits for), POST /api/vms/{ref}/clone, migrate,
// scale, template,
// POST /api/vms/{ref}/snapshots and POST /api/vms/{ref}/snapshots/{snap}/restore.
func (h *handler) vmAction(w http.ResponseWriter, r *http.Request) error {
	ref, rest, err := splitVM(r)
	if err != nil {
		return err
	}
	parts := subPath(rest)
	switch {
	case len(parts) == 1 && parts[0] == "clone":
		return h.vmClone(w, r, ref)
	case len(parts) == 1 && parts[0] == "migrate":
		return h.vmMigrate(w, r, ref)
	case len(parts) == 1 && parts[0] == "scale":
		return h.vmScale(w, r, ref)
	case len(parts) == 1 && parts[0] == "template":
		return h.vmTemplate(w, r, ref)
	case len(parts) == 1 && parts[0] == "snapshots":
		return h.snapshotCreate(w, r, ref)
	case len(parts) == 2 && parts[0] == "snapshots" && parts[1] == "prune":
		return h.snapshotPrune(w, r, ref)
	case len(parts) == 3 && parts[0] == "snapshots" && parts[2] == "restore":
		return h.snapshotRevert(w, r, ref, parts[1])
	case len(parts) != 1:
		return backends.Invalidf("POST /api/vms/{ref}/{action} needs one action: accepted are start, shutdown, stop, restart, pause, resume, clone, snapshots, migrate, scale, template")
	}
	t, err := h.Instances.Power(r.Context(), middleware.Origin(r, "rest"), ref, parts[0])
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok", "task": t.ID})
	return nil
}

// vmDelete answers DELETE /api/vms/{ref} and DELETE /api/vms/{ref}/snapshots/{snap}.
func (h *handler) vmDelete(w http.ResponseWriter, r *http.Request) error {
	ref, rest, err := splitVM(r)
	if err != nil {
		return err
	}
	parts := subPath(rest)
	switch {
	case len(parts) == 2 && parts[0] == "snapshots":
		return h.snapshotDelete(w, r, ref, parts[1])
	case len(parts) != 0:
		return backends.NotFoundf("no such API route: DELETE /api/vms/{ref}/%s", rest)
	}
	t, err := h.Instances.Delete(r.Context(), middleware.Origin(r, "rest"), ref)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "deleted", "task": t.ID})
	return nil
}
