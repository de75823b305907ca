package vdi

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/corral-dev/corral/app/auth"
	"github.com/corral-dev/corral/app/tasks"
	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/store"
)

// Release gives a desktop back as a task: "vdi release" by its holder,
// "vdi force-release" by an admin who is not the holder (the target names
// the holder). A persistent member stops and keeps its disks; an
// ephemeral one is destroyed and cloned again from the golden VM. If that
// fails the claim stays, so the release can be sent again.
func (s *Service) Release(ctx context.Context, who auth.Identity, surface, desktop string) (store.Task, error) {
	spec := tasks.Spec{Action: "vdi release", Target: desktop, Origin: tasks.Origin{Actor: who.Actor(), Surface: surface}}
	if isCT(desktop) {
		return s.ctRelease(ctx, who, spec, desktop)
	}
	p, c, err := s.held(ctx, who, desktop)
	if err != nil {
		return store.Task{}, s.opts.Tasks.Refused(ctx, spec, err)
	}
	if who.Login != c.Holder {
		spec.Action, spec.Target = "vdi force-release", desktop+" (held by "+c.Holder+")"
	}
	return s.opts.Tasks.Start(ctx, spec, func(ctx context.Context, r *tasks.Run) error {
		return s.release(ctx, p, c, r)
	})
}

// Unassign ends a desktop's claim whoever holds it (corral vdi
// unassign), as an admin's release: the member stops, or is recreated
// when the pool is ephemeral. A v0.6.0 assignment (a label, no claim) is
// cleared too.
func (s *Service) Unassign(ctx context.Context, o tasks.Origin, desktop string) error {
	spec := tasks.Spec{Action: "vdi force-release", Target: desktop, Origin: o}
	d, err := ParseDesktopID(desktop)
	if err != nil {
		return s.opts.Tasks.Refused(ctx, spec, backends.Invalidf("desktop %q: accepted is vm/NAMESPACE/MEMBER", desktop))
	}
	p, err := s.find(ctx, d)
	if err != nil {
		return s.opts.Tasks.Refused(ctx, spec, err)
	}
	c, err := p.claims.Get(ctx, d)
	switch {
	case errors.Is(err, ErrNoClaim):
		legacy, lerr := s.legacyAssignments(ctx, p)
		if lerr != nil {
			return s.opts.Tasks.Refused(ctx, spec, lerr)
		}
		who, ok := legacy[d.String()]
		if !ok {
			return s.opts.Tasks.Refused(ctx, spec, backends.Conflictf("desktop %s is not assigned", d))
		}
		spec.Target = desktop + " (held by " + who + ")"
		_, err = s.opts.Tasks.Do(ctx, spec, func(ctx context.Context, r *tasks.Run) error {
			_, ref, _ := p.member(d)
			if err := s.power(ctx, p.b, ref, backends.ActionStop); err != nil {
				return err
			}
			return s.markAssigned(ctx, ref, "", time.Time{})
		})
		return err
	case err != nil:
		return s.opts.Tasks.Refused(ctx, spec, err)
	}
	spec.Target = desktop + " (held by " + c.Holder + ")"
	_, err = s.opts.Tasks.Do(ctx, spec, func(ctx context.Context, r *tasks.Run) error {
		return s.release(ctx, p, c, r)
	})
	return err
}

// release ends checked, the claim the caller checked, unless it changed
// since (another holder, another session): then nothing is released.
func (s *Service) release(ctx context.Context, p *pool, checked Claim, r *tasks.Run) error {
	d := checked.Desktop
	unlock := s.lock(d)
	defer unlock()
	defer s.changed() // also a failed release: its claim may be back with its holder
	cur, err := p.claims.Get(ctx, d)
	if errors.Is(err, ErrNoClaim) {
		return backends.Conflictf("desktop %s was released already", d)
	}
	if err != nil {
		return err
	}
	if cur.Holder != checked.Holder || cur.Session != checked.Session {
		return backends.Conflictf("the claim of %s changed since it was checked; nothing was released", d)
	}
	_, ref, ok := p.member(d)
	if !ok {
		return backends.NotFoundf("desktop %s is in no pool", d)
	}
	if !p.Ephemeral {
		if err := s.power(ctx, p.b, ref, backends.ActionStop); err != nil && !errors.Is(err, backends.ErrNotFound) {
			return fmt.Errorf("stop %s; the holder keeps the desktop: %w", d, err)
		}
		r.Logf("stopped %s", ref.Name)
	} else if err := s.recreate(ctx, p, ref, cur, r); err != nil {
		return err
	}
	if p.kubevirt() {
		if err := s.markAssigned(ctx, ref, "", time.Time{}); err != nil {
			s.opts.Log.Warn("vdi: clearing the assignment label failed", "desktop", d.String(), "err", err)
		}
	}
	latest, err := p.claims.Get(ctx, d)
	if err != nil && !errors.Is(err, ErrNoClaim) {
		return err
	}
	if err == nil {
		if err := p.claims.Release(ctx, latest); errors.Is(err, ErrChanged) {
			return backends.Conflictf("the claim of %s changed during the release; try again", d)
		} else if err != nil {
			return err
		}
	}
	s.mu.Lock()
	delete(s.open, d)
	s.mu.Unlock()
	r.Logf("released %s", d)
	return nil
}

// recreate destroys an ephemeral member and clones it again from the
// golden VM, with the claim held by the reconciler identity meanwhile.
// On failure the claim goes back to its holder.
func (s *Service) recreate(ctx context.Context, p *pool, ref backends.InstanceRef, cur Claim, r *tasks.Run) error {
	cloner, err := backends.Clones(p.b)
	if err != nil {
		return err
	}
	hold := cur
	hold.Holder = ReconcilerIdentity
	hold, err = p.claims.Update(ctx, hold)
	if errors.Is(err, ErrChanged) {
		return backends.Conflictf("the claim of %s changed during the release; try again", cur.Desktop)
	}
	if err != nil {
		return err
	}
	giveBack := func(cause error) error {
		back := hold
		back.Holder = cur.Holder
		if _, err := p.claims.Update(context.WithoutCancel(ctx), back); err != nil {
			s.opts.Log.Error("vdi: could not give the claim back after a failed recreate", "desktop", cur.Desktop.String(), "err", err)
		}
		return cause
	}
	if err := p.b.Delete(ctx, ref); err != nil && !errors.Is(err, backends.ErrNotFound) {
		return giveBack(fmt.Errorf("delete %s; the holder keeps the desktop: %w", ref.Name, err))
	}
	r.Logf("deleted %s", ref.Name)
	if _, err := cloner.Clone(ctx, p.golden, ref.Name); err != nil {
		return giveBack(fmt.Errorf("recreate %s from %s; the release can be sent again: %w", ref.Name, p.golden.Name, err))
	}
	if p.kubevirt() {
		if err := s.labelPool(ctx, ref, p.id.Pool); err != nil {
			return giveBack(err)
		}
	}
	r.Logf("recreated %s from %s", ref.Name, p.golden.Name)
	return nil
}
