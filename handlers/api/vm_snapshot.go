package api

import (
	"net/http"
	"time"

	"github.com/corral-dev/corral/app/instances"
	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/handlers/middleware"
)

type snapshotJSON struct {
	Name        string    `json:"name"`
	Consistency string    `json:"consistency"`
	CreatedAt   time.Time `json:"creationTime"`
	Description string    `json:"description,omitempty"`
}

// snapshotList answers GET /api/vms/{ref}/snapshots.
func (h *handler) snapshotList(w http.ResponseWriter, r *http.Request, ref string) error {
	list, err := h.Instances.Snapshots(r.Context(), ref)
	if err != nil {
		return err
	}
	out := make([]snapshotJSON, 0, len(list))
	for _, s := range list {
		out = append(out, snapshotJSON{Name: s.Name, Consistency: string(s.Consistency), CreatedAt: s.Created.UTC(), Description: s.Description})
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// snapshotCreate answers POST /api/vms/{ref}/snapshots with {"name": ...};
// without a name one is made from the time. A state the backend cannot
// capture safely (local QEMU: a running VM) is a 400 with the remedy.
func (h *handler) snapshotCreate(w http.ResponseWriter, r *http.Request, ref string) error {
	var req struct {
		Name string `json:"name"`
	}
	if r.ContentLength != 0 {
		if err := decode(r, &req); err != nil {
			return err
		}
	}
	if req.Name == "" {
		req.Name = "snap-" + time.Now().UTC().Format("20060102-150405")
	}
	t, err := h.Instances.Snapshot(r.Context(), middleware.Origin(r, "rest"), ref, instances.SnapshotCreate, req.Name)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, map[string]string{"name": req.Name, "task": t.ID})
	return nil
}

// snapshotRevert answers POST /api/vms/{ref}/snapshots/{snap}/restore.
func (h *handler) snapshotRevert(w http.ResponseWriter, r *http.Request, ref, snap string) error {
	t, err := h.Instances.Snapshot(r.Context(), middleware.Origin(r, "rest"), ref, instances.SnapshotRevert, snap)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "restored", "task": t.ID})
	return nil
}

// snapshotDelete answers DELETE /api/vms/{ref}/snapshots/{snap}.
func (h *handler) snapshotDelete(w http.ResponseWriter, r *http.Request, ref, snap string) error {
	t, err := h.Instances.Snapshot(r.Context(), middleware.Origin(r, "rest"), ref, instances.SnapshotDelete, snap)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "deleted", "task": t.ID})
	return nil
}

// vmClone answers POST /api/vms/{ref}/clone with {"target": NAME}: 202 and
// the task, since a clone copies the disk.
func (h *handler) vmClone(w http.ResponseWriter, r *http.Request, ref string) error {
	var req struct {
		Target string `json:"target"`
	}
	if err := decode(r, &req); err != nil {
		return err
	}
	t, dst, err := h.Instances.Clone(r.Context(), middleware.Origin(r, "rest"), ref, req.Target)
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/api/tasks/"+t.ID)
	writeJSON(w, http.StatusAccepted, map[string]string{"target": dst.Name, "ref": dst.String(), "task": t.ID})
	return nil
}

// snapshotPrune answers POST /api/vms/{ref}/snapshots/prune with
// {"keep": N}: the oldest "auto-" snapshots beyond the newest N are
// deleted; snapshots named by hand never are.
func (h *handler) snapshotPrune(w http.ResponseWriter, r *http.Request, ref string) error {
	var req struct {
		Keep *int `json:"keep"`
	}
	if err := decode(r, &req); err != nil {
		return err
	}
	if req.Keep == nil {
		return backends.Invalidf("keep is required: the number of auto- snapshots to keep, from 0")
	}
	t, deleted, err := h.Instances.PruneSnapshots(r.Context(), middleware.Origin(r, "rest"), ref, *req.Keep)
	if err != nil {
		return err
	}
	if deleted == nil {
		deleted = []string{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"deleted": deleted, "task": t.ID})
	return nil
}
