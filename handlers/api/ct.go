package api

import (
	"cmp"
	"net/http"
	"slices"
	"strings"

	"github.com/corral-dev/corral/app/fleet"
	"github.com/corral-dev/corral/app/instances"
	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/handlers/middleware"
)

// ctJSON is a Container as GET /api/cts lists it (spec/api.md).
type ctJSON struct {
	Name       string `json:"name"`
	Namespace  string `json:"namespace"`
	Node       string `json:"node"`
	Phase      string `json:"phase"`
	Ready      bool   `json:"ready"`
	Image      string `json:"image"`
	CPU        int    `json:"cpu"`
	Mem        string `json:"mem"`
	Privileged bool   `json:"privileged"`
	Ref        string `json:"ref"`
	State      string `json:"state"`
	Context    string `json:"context"`
}

func factOf(in backends.Instance, label string) string {
	for _, f := range in.Facts {
		if f.Label == label {
			return f.Value
		}
	}
	return ""
}

func toCT(in backends.Instance) ctJSON {
	phase := factOf(in, "Phase")
	if phase == "" { // a backend that does not report the pod phase
		switch in.State {
		case backends.StateRunning:
			phase = "Running"
		case backends.StateStarting:
			phase = "Pending"
		case backends.StateStopped:
			phase = "Stopped"
		default:
			phase = "Unknown"
		}
	}
	ready := factOf(in, "Ready") == "true" || factOf(in, "Ready") == "" && in.State == backends.StateRunning
	return ctJSON{
		Name: in.Ref.Name, Namespace: in.Ref.Namespace, Node: in.Node,
		Phase: phase, Ready: ready, Image: factOf(in, "Image"),
		CPU: in.CPUs, Mem: backends.FormatMiB(in.MemoryMiB, 0),
		Privileged: factOf(in, "Privileged") == "true",
		Ref:        in.Ref.String(), State: string(in.State), Context: in.Ref.ContextKey(),
	}
}

// ctList answers GET /api/cts from the fleet snapshot: every instance of
// type ct, sorted by reference.
func (h *handler) ctList(w http.ResponseWriter, r *http.Request) error {
	snap := h.Fleet.Snapshot()
	out := []ctJSON{}
	for _, in := range snap.Instances {
		if in.Type == backends.TypeCT {
			out = append(out, toCT(in))
		}
	}
	slices.SortFunc(out, func(a, b ctJSON) int { return cmp.Compare(a.Ref, b.Ref) })
	setPartial(w, snap)
	writeJSON(w, http.StatusOK, out)
	return nil
}

type ctCreateRequest struct {
	Name         string `json:"name"`
	Context      string `json:"context"`
	Namespace    string `json:"namespace"`
	Image        string `json:"image"`
	CPU          int    `json:"cpu"`
	Mem          string `json:"mem"`
	Disk         string `json:"disk"`
	StorageClass string `json:"storageClass"`
	Privileged   bool   `json:"privileged"`
}

// ctCreate answers POST /api/cts: validated at once (400 for bad input or
// a context that runs no containers), then created by a task; the answer
// is 202 with the task id and the ref the CT will have.
func (h *handler) ctCreate(w http.ResponseWriter, r *http.Request) error {
	var req ctCreateRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	if req.StorageClass != "" {
		return backends.Invalidf("storageClass is not supported yet: leave it empty for the cluster's default storage class")
	}
	t, ref, err := h.Instances.CreateContainer(r.Context(), middleware.Origin(r, "rest"), instances.ContainerRequest{
		Context: req.Context, Name: req.Name, Namespace: req.Namespace, Image: req.Image,
		CPUs: req.CPU, Memory: req.Mem, Disk: req.Disk, Privileged: req.Privileged,
	})
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/api/tasks/"+t.ID)
	writeJSON(w, http.StatusAccepted, map[string]string{"task": t.ID, "ref": ref.String(), "name": ref.Name, "namespace": ref.Namespace})
	return nil
}

// ctAction answers POST /api/cts/{ref}/{action}, action start or stop,
// run as a task the answer waits for.
func (h *handler) ctAction(w http.ResponseWriter, r *http.Request) error {
	text, rest, err := backends.SplitRefPath(refPath(r, "/cts/"))
	if err != nil {
		return err
	}
	parts := subPath(rest)
	if len(parts) != 1 || parts[0] != "start" && parts[0] != "stop" {
		return backends.Invalidf("POST /api/cts/{ref}/{action} needs one action: accepted are start and stop")
	}
	ref, err := resolveCT(h.Fleet.Snapshot(), text)
	if err != nil {
		return err
	}
	t, err := h.Instances.Power(r.Context(), middleware.Origin(r, "rest"), ref, parts[0])
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok", "task": t.ID})
	return nil
}

// ctDelete answers DELETE /api/cts/{ref}: the pod, the Service and the
// data volume go.
func (h *handler) ctDelete(w http.ResponseWriter, r *http.Request) error {
	text, rest, err := backends.SplitRefPath(refPath(r, "/cts/"))
	if err != nil {
		return err
	}
	if rest != "" {
		return backends.NotFoundf("no such API route: DELETE /api/cts/{ref}/%s", rest)
	}
	ref, err := resolveCT(h.Fleet.Snapshot(), text)
	if err != nil {
		return err
	}
	t, err := h.Instances.Delete(r.Context(), middleware.Origin(r, "rest"), ref)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "deleted", "task": t.ID})
	return nil
}

// resolveCT turns what the caller typed into the canonical ref of a CT:
// a bare name matches the CTs of the snapshot only; a canonical ref is
// taken as is unless the snapshot knows it as a VM, which these routes
// do not act on.
func resolveCT(snap *fleet.Snapshot, text string) (string, error) {
	if !strings.Contains(text, "/") {
		var found []string
		for _, in := range snap.Instances {
			if in.Type == backends.TypeCT && in.Ref.Name == text {
				found = append(found, in.Ref.String())
			}
		}
		switch len(found) {
		case 0:
			return "", backends.NotFoundf("no container is named %s", text)
		case 1:
			return found[0], nil
		}
		return "", &fleet.Ambiguous{Name: text, Candidates: found}
	}
	ref, err := backends.ParseRef(text)
	if err != nil {
		return "", err
	}
	if in, ok := snap.Find(ref); ok && in.Type != backends.TypeCT {
		return "", backends.NotFoundf("%s is a VM, not a container: use /api/vms", ref)
	}
	return ref.String(), nil
}
