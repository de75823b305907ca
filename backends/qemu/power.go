package qemu

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/corral-dev/corral/backends"
)

// state reports v's power state from its process and QMP. A live qemu
// whose monitor does not answer is unknown rather than a guess: it may be
// wedged, or another client may hold the one QMP connection.
func (b *Backend) state(ctx context.Context, v *vm) backends.State {
	if _, alive := v.process(); !alive {
		return backends.StateStopped
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	st, err := qmpStatus(ctx, v.qmpSock())
	if err != nil {
		b.opts.Logger.Debug("qemu: query-status failed", "vm", v.cfg.Name, "err", err)
		return backends.StateUnknown
	}
	return stateOf(st)
}

// stateOf maps a QMP RunState onto Corral's states.
func stateOf(status string) backends.State {
	switch status {
	case "running":
		return backends.StateRunning
	case "paused", "suspended", "save-vm", "restore-vm":
		return backends.StatePaused
	case "prelaunch", "inmigrate", "finish-migrate", "postmigrate":
		return backends.StateStarting
	case "shutdown":
		// The guest powered off and qemu is about to exit.
		return backends.StateStopping
	}
	return backends.StateUnknown // debug, internal-error, io-error, guest-panicked, ...
}

// powerRule says from which states an action applies and what to tell a
// caller who asks at the wrong time.
type powerRule struct {
	from []backends.State
	hint string
}

var powerRules = map[backends.Action]powerRule{
	backends.ActionStart: {[]backends.State{backends.StateStopped}, "it must be stopped to start; resume a paused instance"},
	// stop is the way out of every state a live qemu can be in.
	backends.ActionStop: {[]backends.State{backends.StateRunning, backends.StatePaused, backends.StateStarting,
		backends.StateStopping, backends.StateUnknown}, "it is not running"},
	// A paused guest cannot act on the ACPI button until it is resumed.
	backends.ActionShutdown: {[]backends.State{backends.StateRunning}, "only a running instance can be shut down; resume it first or stop it"},
	backends.ActionRestart:  {[]backends.State{backends.StateRunning}, "only a running instance can be restarted; start or resume it"},
	backends.ActionPause:    {[]backends.State{backends.StateRunning}, "only a running instance can be paused"},
	backends.ActionResume:   {[]backends.State{backends.StatePaused}, "only a paused instance can be resumed"},
}

// Power implements backends.Backend. start returns once qemu runs; stop
// and shutdown return once the process has exited (shutdown asks the
// guest over ACPI and pulls the plug after Options.ShutdownTimeout).
func (b *Backend) Power(ctx context.Context, ref backends.InstanceRef, action backends.Action) error {
	rule, ok := powerRules[action]
	if !ok {
		return backends.Invalidf("unknown action %q: accepted are start, shutdown, stop, restart, pause, resume", action)
	}
	v, err := b.lookup(ref)
	if err != nil {
		return err
	}
	unlock := b.lock(ref.Name)
	locked := true
	defer func() {
		if locked {
			unlock()
		}
	}()
	st := b.state(ctx, v)
	if !slices.Contains(rule.from, st) {
		return backends.Conflictf("cannot %s %s: it is %s; %s", action, ref.Name, st, rule.hint)
	}
	pid, _ := v.process()
	switch action {
	case backends.ActionStart:
		err = b.launch(ctx, v)
	case backends.ActionStop:
		err = b.quit(ctx, v, pid)
	case backends.ActionRestart:
		_, err = qmp(ctx, v.qmpSock(), "system_reset")
	case backends.ActionPause:
		_, err = qmp(ctx, v.qmpSock(), "stop")
	case backends.ActionResume:
		_, err = qmp(ctx, v.qmpSock(), "cont")
	case backends.ActionShutdown:
		if _, err = qmp(ctx, v.qmpSock(), "system_powerdown"); err != nil {
			break
		}
		// Wait without the lock: a caller may stop the VM meanwhile, and
		// listing it must not wait for the guest.
		unlock()
		locked = false
		err = b.awaitShutdown(ctx, v, pid)
	}
	return b.fail(string(action), ref.Name, err)
}

// awaitShutdown waits for the guest to power off after system_powerdown;
// a guest that ignores the button for ShutdownTimeout is stopped hard,
// since the caller asked for the VM to end up stopped.
func (b *Backend) awaitShutdown(ctx context.Context, v *vm, pid int) error {
	wctx, cancel := context.WithTimeout(ctx, b.opts.ShutdownTimeout)
	defer cancel()
	err := v.waitExit(wctx, pid)
	if err == nil || ctx.Err() != nil {
		return err
	}
	b.opts.Logger.Info("qemu: the guest ignored the power button; stopping it", "vm", v.cfg.Name, "after", b.opts.ShutdownTimeout)
	defer b.lock(v.cfg.Name)()
	return b.quit(ctx, v, pid)
}

// quit ends pid (v's qemu) with QMP quit, or SIGKILL when the monitor does
// not answer or qemu does not exit within a few seconds, and removes what
// it left behind. The caller holds v's lock.
func (b *Backend) quit(ctx context.Context, v *vm, pid int) error {
	if pid == 0 || !isQEMUOf(pid, v.pidFile()) {
		return nil
	}
	qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := qmpQuit(qctx, v.qmpSock()); err != nil {
		b.opts.Logger.Warn("qemu: quit over QMP failed; killing", "vm", v.cfg.Name, "err", err)
	} else if err := v.waitExit(qctx, pid); err == nil {
		b.cleanup(v)
		return nil
	}
	kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := v.kill(kctx, pid); err != nil {
		return fmt.Errorf("qemu: kill %d: %w", pid, err)
	}
	b.cleanup(v)
	return nil
}
