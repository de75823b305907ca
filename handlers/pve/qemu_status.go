package pve

import (
	"net/http"

	"github.com/corral-dev/corral/app/instances"
	"github.com/corral-dev/corral/app/pve"
)

func (h *handler) qemuStatus(r *http.Request, _ pve.Params) (any, error) {
	id, err := vmid(r)
	if err != nil {
		return nil, err
	}
	g, err := h.Service.Guest(r.Context(), param(r, "node"), id)
	if err != nil {
		return nil, err
	}
	return h.Service.Status(g), nil
}

func (h *handler) qemuPower(r *http.Request, p pve.Params) (any, error) {
	id, err := vmid(r)
	if err != nil {
		return nil, err
	}
	return h.upid(h.Service.Power(r.Context(), caller(r), param(r, "node"), id, param(r, "action"), p))
}

// qemuResize answers a UPID (bpg requires one).
func (h *handler) qemuResize(r *http.Request, p pve.Params) (any, error) {
	id, err := vmid(r)
	if err != nil {
		return nil, err
	}
	return h.upid(h.Service.Resize(r.Context(), caller(r), param(r, "node"), id, p))
}

func (h *handler) qemuClone(r *http.Request, p pve.Params) (any, error) {
	id, err := vmid(r)
	if err != nil {
		return nil, err
	}
	return h.upid(h.Service.Clone(r.Context(), caller(r), param(r, "node"), id, p))
}

func (h *handler) qemuTemplate(r *http.Request, _ pve.Params) (any, error) {
	id, err := vmid(r)
	if err != nil {
		return nil, err
	}
	return h.upid(h.Service.Template(r.Context(), caller(r), param(r, "node"), id))
}

func (h *handler) qemuInterfaces(r *http.Request, _ pve.Params) (any, error) {
	id, err := vmid(r)
	if err != nil {
		return nil, err
	}
	g, err := h.Service.Guest(r.Context(), param(r, "node"), id)
	if err != nil {
		return nil, err
	}
	return h.Service.Interfaces(g)
}

func (h *handler) snapshotList(r *http.Request, _ pve.Params) (any, error) {
	id, err := vmid(r)
	if err != nil {
		return nil, err
	}
	return h.Service.Snapshots(r.Context(), param(r, "node"), id)
}

func (h *handler) snapshotCreate(r *http.Request, p pve.Params) (any, error) {
	id, err := vmid(r)
	if err != nil {
		return nil, err
	}
	if p["snapname"] == "" {
		return nil, pve.ParamError("snapname", "property is missing and it is not optional")
	}
	return h.upid(h.Service.Snapshot(r.Context(), caller(r), param(r, "node"), id, instances.SnapshotCreate, p["snapname"]))
}

func (h *handler) snapshotDelete(r *http.Request, _ pve.Params) (any, error) {
	id, err := vmid(r)
	if err != nil {
		return nil, err
	}
	return h.upid(h.Service.Snapshot(r.Context(), caller(r), param(r, "node"), id, instances.SnapshotDelete, param(r, "snapname")))
}

func (h *handler) snapshotRollback(r *http.Request, _ pve.Params) (any, error) {
	id, err := vmid(r)
	if err != nil {
		return nil, err
	}
	return h.upid(h.Service.Snapshot(r.Context(), caller(r), param(r, "node"), id, instances.SnapshotRevert, param(r, "snapname")))
}
