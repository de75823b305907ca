package ui

import (
	"context"
	"net/http"
	"slices"
	"strconv"

	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/views"
)

// vmGet is GET /vm/{ref} (the instance page) and GET /vm/{ref}/delete
// (the confirmation step of a delete).
func (s *server) vmGet(w http.ResponseWriter, r *http.Request) error {
	text, action, err := vmPath(r)
	if err != nil {
		return err
	}
	switch action {
	case "":
		return s.vmShow(w, r, text)
	case "delete":
		return s.vmDeleteConfirm(w, r, text)
	}
	return backends.NotFoundf("no dashboard page at this path")
}

func (s *server) vmShow(w http.ResponseWriter, r *http.Request, text string) error {
	in, err := s.Instances.Get(r.Context(), text)
	if err != nil {
		return err
	}
	frag := fragmentFor(r, "summary", "summary")
	sum := s.summaryFor(r, in)
	v := views.VM{Page: s.page(r.Context(), r, in.Ref.Name, frag), Summary: sum}
	if sum.Admin {
		v.Move = s.moveDialog(in.Ref)
	}
	return renderPage(w, r, http.StatusOK, views.VMPage(v), frag)
}

// powerActions lists the actions that make sense in each state, in the
// order the page shows them.
var powerActions = map[backends.State][]backends.Action{
	backends.StateStopped: {backends.ActionStart},
	backends.StateRunning: {backends.ActionShutdown, backends.ActionStop, backends.ActionRestart, backends.ActionPause},
	backends.StatePaused:  {backends.ActionResume, backends.ActionStop},
	backends.StateUnknown: {backends.ActionStop},
}

var actionLabels = map[backends.Action]string{
	backends.ActionStart:    "Start",
	backends.ActionShutdown: "Shut down",
	backends.ActionStop:     "Power off",
	backends.ActionRestart:  "Restart",
	backends.ActionPause:    "Pause",
	backends.ActionResume:   "Resume",
}

// ctPowerActions are a CT's actions: stop deletes its pod (the data
// volume stays), start makes the pod again; a pod cannot pause.
var ctPowerActions = map[backends.State][]backends.Action{
	backends.StateStopped:  {backends.ActionStart},
	backends.StateRunning:  {backends.ActionStop, backends.ActionRestart},
	backends.StateStarting: {backends.ActionStop},
	backends.StatePaused:   {backends.ActionStop},
	backends.StateUnknown:  {backends.ActionStop},
}

var ctActionLabels = map[backends.Action]string{
	backends.ActionStart:   "Start",
	backends.ActionStop:    "Stop",
	backends.ActionRestart: "Restart",
}

// summary formats an instance for the #summary region.
// summary builds the VM page's summary; consoles says whether the
// instance's backend has consoles (the link shows while it runs).
func summary(in backends.Instance, consoles bool) views.Summary {
	u := vmURL(in.Ref)
	s := views.Summary{
		Name:      in.Ref.Name,
		Ref:       in.Ref.String(),
		URL:       u,
		State:     string(in.State),
		Type:      string(in.Type),
		CPU:       strconv.Itoa(in.CPUs),
		Memory:    sizeOrDash(in.MemoryMiB),
		Disk:      sizeOrDash(in.DiskMiB),
		IP:        orDash(in.IP),
		Node:      orDash(in.Node),
		Tags:      in.Tags,
		Backend:   string(in.Ref.Backend),
		Context:   in.Ref.ContextKey(),
		DeleteURL: u + "/delete",
	}
	actions, labels := powerActions[in.State], actionLabels
	if consoles && in.State == backends.StateRunning {
		s.ConsoleURL = "/console/" + in.Ref.String()
	}
	if in.Type == backends.TypeCT {
		// A CT's console is a shell (exec), and a pod cannot pause.
		s.CT = true
		actions, labels = ctPowerActions[in.State], ctActionLabels
		if s.ConsoleURL != "" {
			s.ConsoleURL += "?kind=serial"
		}
	}
	if in.Template {
		// A template is cloned, never started: its start is refused.
		actions = slices.DeleteFunc(slices.Clone(actions), func(a backends.Action) bool { return a == backends.ActionStart })
		s.Template = true
		s.Facts = append(s.Facts, views.Fact{Label: "Template", Value: "yes: clone it to use it"})
	}
	for _, f := range in.Facts {
		s.Facts = append(s.Facts, views.Fact{Label: f.Label, Value: f.Value})
	}
	if !in.Created.IsZero() {
		s.Created = in.Created.UTC().Format("2006-01-02 15:04 UTC")
	}
	for _, a := range actions {
		class := ""
		if a == backends.ActionStart || a == backends.ActionResume {
			class = "primary"
		}
		s.Actions = append(s.Actions, views.PowerAction{Name: string(a), Label: labels[a], URL: u + "/" + string(a), Class: class})
	}
	return s
}

func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

// hasConsoles reports whether the running instance offers a console now,
// asking its backend: a backend may have consoles for some instances and
// not others (KubeVirt: a CT's shell, not yet a VM's screen), and a link
// to a refusal helps nobody.
func (s *server) hasConsoles(ctx context.Context, in backends.Instance) bool {
	if in.State != backends.StateRunning {
		return false
	}
	b, err := s.Fleet.Backend(in.Ref)
	if err != nil {
		return false
	}
	d, ok := b.(backends.ConsoleDialer)
	if !ok {
		return false
	}
	cctx, cancel := s.Fleet.CallContext(ctx)
	defer cancel()
	kinds, err := backends.ConsolesOf(cctx, d, in)
	return err == nil && len(kinds) > 0
}

// sizeOrDash formats MiB, or a dash when the backend does not report the
// size (0): libvirt's list has no disk sizes, and "0" would be a claim.
func sizeOrDash(mib int64) string {
	if mib <= 0 {
		return "—"
	}
	return backends.FormatMiB(mib, 0)
}
