package proxmox

import (
	"context"

	"github.com/corral-dev/corral/backends"
)

// verbs maps Corral's actions onto PVE's status/* calls, which qemu and
// lxc guests share, with the states each one applies to. PVE's own
// answer for a wrong state is a failed task with free text; checking
// first makes it a Conflict with a message of Corral's.
var verbs = map[backends.Action]struct {
	verb string
	from []backends.State
}{
	backends.ActionStart:    {"start", []backends.State{backends.StateStopped}},
	backends.ActionStop:     {"stop", []backends.State{backends.StateRunning, backends.StatePaused, backends.StateStarting, backends.StateUnknown}},
	backends.ActionShutdown: {"shutdown", []backends.State{backends.StateRunning}},
	backends.ActionRestart:  {"reboot", []backends.State{backends.StateRunning}},
	backends.ActionPause:    {"suspend", []backends.State{backends.StateRunning}},
	backends.ActionResume:   {"resume", []backends.State{backends.StatePaused}},
}

// Power implements backends.Backend. PVE pauses through suspend (the
// guest stays in memory) and resumes through resume; suspend to disk
// (hibernation) is not used. Shutdown is an ACPI request, which a guest
// without ACPI support ignores until PVE's own timeout fails the task.
func (b *Backend) Power(ctx context.Context, ref backends.InstanceRef, action backends.Action) error {
	v, ok := verbs[action]
	if !ok {
		return backends.Invalidf("unknown action %q: accepted are start, shutdown, stop, restart, pause, resume", action)
	}
	g, err := b.lookup(ctx, ref)
	if err != nil {
		return err
	}
	st := g.state()
	allowed := false
	for _, s := range v.from {
		allowed = allowed || s == st
	}
	if !allowed {
		return backends.Conflictf("cannot %s %s: it is %s", action, ref.Name, st)
	}
	return b.do(ctx, "POST", g.path("status/"+v.verb), nil, string(action), ref.Name)
}
