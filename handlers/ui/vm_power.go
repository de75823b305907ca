package ui

import (
	"net/http"

	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/handlers/middleware"
)

// tasksChanged is the HX-Trigger event after a mutation: the activity
// panel listens for it (the SSE stream says the same a moment later).
const tasksChanged = "corral:tasks"

// vmPost is POST /vm/{ref}/{action}: a power action, delete after its
// confirmation step, or one of the operations of vm_ops.go.
func (s *server) vmPost(w http.ResponseWriter, r *http.Request) error {
	text, action, err := vmPath(r)
	if err != nil {
		return err
	}
	switch action {
	case "":
		return backends.NotFoundf("no action named in the path")
	case "delete":
		return s.vmDelete(w, r, text)
	case "scale":
		return s.vmScale(w, r, text)
	case "migrate":
		return s.vmMigrate(w, r, text)
	case "template":
		return s.vmTemplate(w, r, text)
	case "clone":
		return s.vmClone(w, r, text)
	}
	return s.vmPower(w, r, text, action)
}

// vmPower runs the action as a task and waits for it. With htmx it
// answers the updated #summary and tells the page the tasks changed;
// without, it redirects (303) back to the instance page.
func (s *server) vmPower(w http.ResponseWriter, r *http.Request, text, action string) error {
	t, err := s.Instances.Power(r.Context(), middleware.Origin(r, "dashboard"), text, action)
	if err != nil {
		return err
	}
	return s.vmDone(w, r, t.Target, func(in backends.Instance) string {
		label := actionLabels[backends.Action(t.Action)]
		if in.Type == backends.TypeCT {
			label = ctActionLabels[backends.Action(t.Action)]
		}
		return label + ": done."
	})
}
