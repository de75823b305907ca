package libvirt

import (
	"context"
	"slices"

	"libvirt.org/go/libvirt"

	"github.com/corral-dev/corral/backends"
)

// powerRule says from which native states an action applies and what to
// tell a caller who asks at the wrong time.
type powerRule struct {
	from []libvirt.DomainState
	hint string // appended to the Conflict message
}

var (
	stoppedStates = []libvirt.DomainState{libvirt.DOMAIN_SHUTOFF, libvirt.DOMAIN_CRASHED}
	runningStates = []libvirt.DomainState{libvirt.DOMAIN_RUNNING, libvirt.DOMAIN_BLOCKED}
)

// powerRules is checked before libvirt is asked, so that a transition
// that does not apply is a Conflict with a useful hint rather than
// whatever error code the driver happens to use (the test driver answers
// "resume a running domain" with an internal error, for one).
var powerRules = map[backends.Action]powerRule{
	backends.ActionStart: {stoppedStates, "it must be stopped to start; resume a paused instance"},
	backends.ActionStop: {[]libvirt.DomainState{libvirt.DOMAIN_RUNNING, libvirt.DOMAIN_BLOCKED, libvirt.DOMAIN_PAUSED,
		libvirt.DOMAIN_SHUTDOWN, libvirt.DOMAIN_PMSUSPENDED, libvirt.DOMAIN_NOSTATE}, "it is not running"},
	// A paused guest cannot act on the ACPI button until it is resumed.
	backends.ActionShutdown: {runningStates, "only a running instance can be shut down; resume it first or stop it"},
	backends.ActionRestart:  {runningStates, "only a running instance can be restarted; start or resume it"},
	backends.ActionPause:    {runningStates, "only a running instance can be paused"},
	backends.ActionResume:   {[]libvirt.DomainState{libvirt.DOMAIN_PAUSED, libvirt.DOMAIN_PMSUSPENDED}, "only a paused instance can be resumed"},
}

// Power implements backends.Backend. shutdown is an ACPI request: it
// returns once the guest has been asked, and the instance reports
// stopping, then stopped, as the guest complies.
func (b *Backend) Power(ctx context.Context, ref backends.InstanceRef, action backends.Action) error {
	rule, ok := powerRules[action]
	if !ok {
		return backends.Invalidf("unknown action %q: accepted are start, shutdown, stop, restart, pause, resume", action)
	}
	d, err := b.lookup(ctx, ref)
	if err != nil {
		return err
	}
	defer d.Free()
	st, _, err := d.GetState()
	if err != nil {
		return b.fail(string(action), ref.Name, err)
	}
	if !slices.Contains(rule.from, st) {
		return backends.Conflictf("cannot %s %s: it is %s; %s", action, ref.Name, stateOf(st), rule.hint)
	}
	switch action {
	case backends.ActionStart:
		err = d.Create()
	case backends.ActionStop:
		err = d.Destroy()
	case backends.ActionShutdown:
		err = d.Shutdown()
	case backends.ActionRestart:
		err = restart(d)
	case backends.ActionPause:
		err = d.Suspend()
	case backends.ActionResume:
		if st == libvirt.DOMAIN_PMSUSPENDED {
			// Suspended to RAM by the guest: Resume does not wake it.
			err = d.PMWakeup(0)
		} else {
			err = d.Resume()
		}
	}
	if err != nil {
		return b.fail(string(action), ref.Name, err)
	}
	return nil
}

// restart reboots d in place. A driver that cannot reboot gets a hard
// reset made of destroy and start instead: the promise of restart is that
// the instance is running again afterwards.
func restart(d *libvirt.Domain) error {
	err := d.Reboot(0)
	if err == nil || !isCode(err, libvirt.ERR_NO_SUPPORT, libvirt.ERR_OPERATION_UNSUPPORTED, libvirt.ERR_ARGUMENT_UNSUPPORTED) {
		return err
	}
	if err := d.Destroy(); err != nil {
		return err
	}
	return d.Create()
}
