package api

import (
	"net/http"

	"github.com/corral-dev/corral/app/instances"
	"github.com/corral-dev/corral/handlers/middleware"
)

type createRequest struct {
	Name      string   `json:"name"`
	Context   string   `json:"context"`
	Namespace string   `json:"namespace"`
	CPU       int      `json:"cpu"`
	Mem       string   `json:"mem"`
	Disk      string   `json:"disk"`
	Image     string   `json:"image"`
	PVC       string   `json:"pvc"` // an existing PVC to boot from (KubeVirt)
	Tags      []string `json:"tags"`
	Start     bool     `json:"start"`
	SSHKey    string   `json:"sshKey"`
	CloudInit string   `json:"cloudInit"` // user-data, verbatim
}

// vmCreate answers POST /api/vms: the request is validated at once (a bad
// size or an unknown context is a 400), then the instance is created by a
// task; the answer is 202 with the task id and the ref it will have.
func (h *handler) vmCreate(w http.ResponseWriter, r *http.Request) error {
	var req createRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	t, ref, err := h.Instances.Create(r.Context(), middleware.Origin(r, "rest"), instances.CreateRequest{
		Context: req.Context, Name: req.Name, Namespace: req.Namespace, CPUs: req.CPU,
		Memory: req.Mem, Disk: req.Disk, Image: req.Image, PVC: req.PVC, Tags: req.Tags, Start: req.Start,
		SSHKey: req.SSHKey, UserData: req.CloudInit,
	})
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/api/tasks/"+t.ID)
	writeJSON(w, http.StatusAccepted, map[string]string{"task": t.ID, "ref": ref.String(), "name": ref.Name, "namespace": ref.Namespace})
	return nil
}
