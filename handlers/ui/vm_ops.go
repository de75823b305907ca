package ui

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/corral-dev/corral/app/instances"
	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/handlers/middleware"
	"github.com/corral-dev/corral/views"
)

// nodeLister is implemented by backends that can name their nodes (the
// simulated ones); the migrate form offers a select of them. A backend
// without it gets a typed node name plus "let the scheduler choose".
type nodeLister interface {
	Nodes(ctx context.Context) ([]string, error)
}

// summaryFor is the #summary model of in as the caller may see it: the
// power actions and, for an admin, the operations its backend supports.
func (s *server) summaryFor(r *http.Request, in backends.Instance) views.Summary {
	sum := summary(in, s.hasConsoles(r.Context(), in))
	sum.Admin = middleware.IdentityFrom(r.Context()).Admin
	if sum.Admin {
		sum.Ops = s.vmOps(r.Context(), in)
	}
	return sum
}

// vmOps lists the forms in's backend and state allow; a backend that
// cannot be found offers none (the page still shows its facts).
func (s *server) vmOps(ctx context.Context, in backends.Instance) views.VMOps {
	var o views.VMOps
	b, err := s.Fleet.Backend(in.Ref)
	if err != nil || in.Type == backends.TypeCT {
		return o
	}
	u := vmURL(in.Ref)
	if backends.Supports[backends.Scaler](b) {
		o.Scale = &views.ScaleForm{URL: u + "/scale", CPU: strconv.Itoa(in.CPUs)}
		if in.MemoryMiB > 0 {
			o.Scale.Memory = backends.FormatMiB(in.MemoryMiB, 0)
		}
	}
	if backends.Supports[backends.Migrator](b) && in.State == backends.StateRunning {
		o.Migrate = &views.MigrateForm{URL: u + "/migrate", Node: in.Node}
		if nl, ok := b.(nodeLister); ok {
			cctx, cancel := s.Fleet.CallContext(ctx)
			nodes, err := nl.Nodes(cctx)
			cancel()
			if err == nil {
				o.Migrate.Listed = true
				o.Migrate.Nodes = slices.DeleteFunc(nodes, func(n string) bool { return n == in.Node })
			}
		}
	}
	if backends.Supports[backends.Templater](b) && (in.Template || in.State == backends.StateStopped) {
		o.Template = &views.TemplateForm{URL: u + "/template", On: !in.Template}
	}
	if backends.Supports[backends.Cloner](b) && in.State == backends.StateStopped {
		o.Clone = &views.CloneForm{URL: u + "/clone", Suggest: in.Ref.Name + "-clone"}
	}
	return o
}

// parseForm reads a POSTed form, refusing one that does not parse.
func parseForm(r *http.Request) error {
	if err := r.ParseForm(); err != nil {
		return backends.Invalidf("the form does not parse: send application/x-www-form-urlencoded")
	}
	return nil
}

// vmScale is POST /vm/{ref}/scale with cpu and mem; an empty field keeps
// the current value. The scale is a task the answer waits for.
func (s *server) vmScale(w http.ResponseWriter, r *http.Request, text string) error {
	if err := parseForm(r); err != nil {
		return err
	}
	var req instances.ScaleRequest
	if c := strings.TrimSpace(r.PostForm.Get("cpu")); c != "" {
		n, err := strconv.Atoi(c)
		if err != nil || n < 1 || n > 512 {
			return backends.Invalidf("cpu %q is not accepted: give a whole number of CPUs from 1 to 512, or leave it empty to keep the current count", c)
		}
		req.CPUs = n
	}
	req.Memory = strings.TrimSpace(r.PostForm.Get("mem"))
	if req.CPUs == 0 && req.Memory == "" {
		return backends.Invalidf("nothing to change: give a CPU count (1 to 512), a memory size (e.g. 4G, 8Gi) or both")
	}
	t, err := s.Instances.Scale(r.Context(), middleware.Origin(r, "dashboard"), text, req)
	if err != nil {
		return err
	}
	return s.vmDone(w, r, t.Target, func(in backends.Instance) string {
		return "Scaled to " + strconv.Itoa(in.CPUs) + " CPU, " + sizeOrDash(in.MemoryMiB) + "."
	})
}

// vmMigrate is POST /vm/{ref}/migrate with targetNode; an empty one, or
// the "scheduler" button, lets the backend's scheduler choose. The
// answer comes once the backend accepted the migration; its phases
// follow in the activity panel.
func (s *server) vmMigrate(w http.ResponseWriter, r *http.Request, text string) error {
	if err := parseForm(r); err != nil {
		return err
	}
	node := strings.TrimSpace(r.PostForm.Get("targetNode"))
	if r.PostForm.Get("scheduler") != "" {
		node = ""
	}
	t, err := s.Instances.Migrate(r.Context(), middleware.Origin(r, "dashboard"), text, node)
	if err != nil {
		return err
	}
	where := "a node the scheduler chooses"
	if node != "" {
		where = node
	}
	return s.vmDone(w, r, t.Target, func(backends.Instance) string {
		return "Migration to " + where + " started: its phases show in the activity panel."
	})
}

// vmTemplate is POST /vm/{ref}/template with on=1 (mark) or on=0 (unmark).
func (s *server) vmTemplate(w http.ResponseWriter, r *http.Request, text string) error {
	if err := parseForm(r); err != nil {
		return err
	}
	var on bool
	switch v := r.PostForm.Get("on"); v {
	case "1", "true":
		on = true
	case "0", "false":
	default:
		return backends.Invalidf("on %q is not accepted: 1 marks the VM as a template, 0 unmarks it", v)
	}
	t, err := s.Instances.SetTemplate(r.Context(), middleware.Origin(r, "dashboard"), text, on)
	if err != nil {
		return err
	}
	return s.vmDone(w, r, t.Target, func(backends.Instance) string {
		if on {
			return "Marked as a template: clone it to use it."
		}
		return "No longer a template."
	})
}

// vmClone is POST /vm/{ref}/clone with name: the copy is made by a task;
// the answer says where it will be.
func (s *server) vmClone(w http.ResponseWriter, r *http.Request, text string) error {
	if err := parseForm(r); err != nil {
		return err
	}
	t, dst, err := s.Instances.Clone(r.Context(), middleware.Origin(r, "dashboard"), text, strings.TrimSpace(r.PostForm.Get("name")))
	if err != nil {
		return err
	}
	return s.vmDone(w, r, t.Target, func(backends.Instance) string {
		return "Cloning to " + dst.String() + ": it appears in the inventory when the task ends."
	})
}

// vmDone answers a VM operation that succeeded: with htmx the updated
// #summary with notice(in) and the tasks-changed event; without, a 303
// back to the instance page.
func (s *server) vmDone(w http.ResponseWriter, r *http.Request, target string, notice func(backends.Instance) string) error {
	ref, err := backends.ParseRef(target)
	if err != nil {
		return err
	}
	if !isHTMX(r) {
		http.Redirect(w, r, vmURL(ref), http.StatusSeeOther)
		return nil
	}
	in, err := s.Instances.Get(r.Context(), ref.String())
	if err != nil {
		return err
	}
	sum := s.summaryFor(r, in)
	sum.Notice = notice(in)
	w.Header().Set("HX-Trigger", tasksChanged)
	return renderPage(w, r, http.StatusOK, views.SummaryView(sum), "")
}
