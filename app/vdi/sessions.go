package vdi

import (
	"context"
	"errors"
	"time"

	"github.com/corral-dev/corral/app/tasks"
	"github.com/corral-dev/corral/backends"
)

// Reclaim reasons (spec/vdi.md, Sessions and reclaim).
const (
	ReasonDisconnectGrace = "disconnect-grace"
	ReasonMaxDuration     = "max-duration"
)

// ConsoleOpened counts a console the bridge opened to instance ref; the
// first one of a desktop marks it connected. Instances that are no
// desktop are ignored. It implements the console bridge's session hook.
func (s *Service) ConsoleOpened(ref backends.InstanceRef) {
	// A holder's access check has just looked the desktop up; an admin's
	// did not, so it is looked up here.
	l, ok := s.takeLookup(ref)
	if !ok {
		if l.d, ok = s.desktopOf(ref); !ok {
			return
		}
	}
	d := l.d
	s.mu.Lock()
	s.open[d]++
	s.consoles[ref.String()] = d
	first := s.open[d] == 1
	s.mu.Unlock()
	if first {
		s.mark(d, l.claims, func(c *Claim, now time.Time) { c.Connected = now })
	}
}

// ConsoleClosed counts a console of instance ref closed; the last one of
// a desktop marks it disconnected, which starts the disconnect grace.
func (s *Service) ConsoleClosed(ref backends.InstanceRef) {
	// The desktop the open mapped ref to: a CT member being recreated
	// meanwhile cannot be looked up again.
	s.mu.Lock()
	d, ok := s.consoles[ref.String()]
	s.mu.Unlock()
	if !ok {
		if d, ok = s.desktopOf(ref); !ok {
			return
		}
	}
	s.mu.Lock()
	if s.open[d] > 0 {
		s.open[d]--
	}
	last := s.open[d] == 0
	if last {
		delete(s.open, d)
		delete(s.consoles, ref.String())
	}
	s.mu.Unlock()
	if last {
		s.mark(d, nil, func(c *Claim, now time.Time) { c.Disconnected = now })
	}
}

// desktopOf maps an instance to its desktop: a VM pool member by its
// registered ref, a CT pool member (ct/NAMESPACE/MEMBER) through the
// CT seam.
// A desktop outside the broker's namespaces is none: its consoles are
// not counted and its holder has no console access as holder.
func (s *Service) desktopOf(ref backends.InstanceRef) (DesktopID, bool) {
	m, err := s.opts.Store.VDIMemberByRef(context.Background(), ref.String())
	if err != nil {
		if s.opts.CT == nil {
			return DesktopID{}, false
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		d, ok := s.opts.CT.Desktop(ctx, ref)
		return d, ok && s.serves(d.Namespace)
	}
	d, err := ParseDesktopID(m.Desktop)
	return d, err == nil && s.serves(d.Namespace)
}

// mark records a session mark on d's claim, kept in claims (nil: looked
// up), retrying a lost compare-and-swap a few times; a desktop without a
// claim has no marks.
func (s *Service) mark(d DesktopID, claims claimRW, set func(*Claim, time.Time)) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	defer s.changed()
	if claims == nil {
		var err error
		if claims, err = s.claimsOf(ctx, d); err != nil {
			return
		}
	}
	for range 5 {
		c, err := claims.Get(ctx, d)
		if err != nil {
			return
		}
		set(&c, s.now())
		if _, err = claims.Update(ctx, c); !errors.Is(err, ErrChanged) {
			if err != nil {
				s.opts.Log.Warn("vdi: session mark lost", "desktop", d.String(), "err", err)
			}
			return
		}
	}
}

// reclaimAt returns when the policy reclaims claim c with open consoles
// open in this process, and why; zero when it never does.
func (s *Service) reclaimAt(c Claim, open int) (time.Time, string) {
	var at time.Time
	reason := ""
	if s.opts.MaxSession > 0 {
		at, reason = c.Acquired.Add(s.opts.MaxSession), ReasonMaxDuration
	}
	// Disconnect grace runs from the end of the last connected period; a
	// desktop never connected through a console (a native client, which
	// the broker cannot see) has none.
	if s.opts.Grace > 0 && open == 0 && !c.Disconnected.IsZero() && !c.WasConnected() {
		if g := c.Disconnected.Add(s.opts.Grace); at.IsZero() || g.Before(at) {
			at, reason = g, ReasonDisconnectGrace
		}
	}
	return at, reason
}

// Recover applies the restart rule once, before the first pass: a
// desktop whose marks say it was connected has no console in this new
// process (the restart closed them), so its grace period starts now, in
// full. A desktop already disconnected keeps its recorded time.
func (s *Service) Recover(ctx context.Context) error {
	ps, err := s.servedPools(ctx)
	if err != nil {
		return err
	}
	for _, p := range ps {
		claims, err := p.claims.List(ctx, p.id.Kind, p.id.Namespace, p.id.Pool)
		if err != nil {
			return err
		}
		s.recover(claims)
	}
	if s.opts.CT != nil {
		claims, err := s.opts.CT.Claims(ctx)
		if err != nil {
			return err
		}
		s.recover(s.servedClaims(claims))
	}
	return nil
}

func (s *Service) recover(claims []Claim) {
	for _, c := range claims {
		s.mu.Lock()
		open := s.open[c.Desktop]
		s.mu.Unlock()
		if c.WasConnected() && open == 0 {
			s.mark(c.Desktop, nil, func(c *Claim, now time.Time) {
				if c.WasConnected() {
					c.Disconnected = now
				}
			})
		}
	}
}

// Pass applies the policy once to every claim of every pool the broker
// serves (Options.Namespaces; the others are neither renewed nor
// reclaimed): a claim
// past its maximum duration or its disconnect grace is reclaimed (as a
// release, audited "vdi reclaim (REASON)" by corral-vdi/broker); every
// other claim is renewed. A reclaim that fails keeps the claim, and the
// next pass tries again.
func (s *Service) Pass(ctx context.Context) error {
	ps, err := s.servedPools(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, p := range ps {
		claims, err := p.claims.List(ctx, p.id.Kind, p.id.Namespace, p.id.Pool)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, c := range claims {
			if Reserved(c.Holder) {
				continue // the reconciler's own step
			}
			if _, _, ok := p.member(c.Desktop); !ok {
				continue
			}
			if err := s.apply(ctx, c, p.claims, func(ctx context.Context, c Claim, r *tasks.Run) error {
				return s.release(ctx, p, c, r)
			}); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if err := s.ctPass(ctx); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// claimRW reads and writes claims: a pool's ClaimStore, or the CT seam.
type claimRW interface {
	Get(ctx context.Context, d DesktopID) (Claim, error)
	Update(ctx context.Context, c Claim) (Claim, error)
}

// claimsOf returns where d's claim is kept.
func (s *Service) claimsOf(ctx context.Context, d DesktopID) (claimRW, error) {
	if d.Kind == "ct" {
		return s.ctSeam()
	}
	p, err := s.find(ctx, d)
	if err != nil {
		return nil, err
	}
	return p.claims, nil
}

// apply applies the policy to claim c, kept in claims: it reclaims c
// through reclaim (a task audited "vdi reclaim (REASON)") when c is past
// its maximum duration or its disconnect grace, and renews it otherwise.
func (s *Service) apply(ctx context.Context, c Claim, claims claimRW, reclaim func(context.Context, Claim, *tasks.Run) error) error {
	now := s.now()
	s.mu.Lock()
	open := s.open[c.Desktop]
	s.mu.Unlock()
	if c.WasConnected() && open == 0 {
		// Marked connected but nothing open here: the close was lost
		// or the process restarted. Grace starts now.
		c.Disconnected = now
		var err error
		if c, err = claims.Update(ctx, c); err != nil {
			return nil // changed meanwhile: the next pass sees it
		}
	}
	if at, reason := s.reclaimAt(c, open); !at.IsZero() && !now.Before(at) {
		spec := tasks.Spec{Action: "vdi reclaim (" + reason + ")", Target: c.Desktop.String() + " (held by " + c.Holder + ")",
			Origin: tasks.Origin{Actor: BrokerIdentity, Surface: "vdi"}}
		_, _ = s.opts.Tasks.Do(ctx, spec, func(ctx context.Context, r *tasks.Run) error {
			return reclaim(ctx, c, r)
		})
		return nil
	}
	if now.Sub(c.Renewed) >= s.opts.Interval || c.Expired(now) {
		if _, err := claims.Update(ctx, Renew(c, now)); err != nil && !errors.Is(err, ErrChanged) {
			return err
		}
	}
	return nil
}

// Run applies the restart rule, then the policy every Interval, until
// ctx ends.
func (s *Service) Run(ctx context.Context) {
	if err := s.Recover(ctx); err != nil && ctx.Err() == nil {
		s.opts.Log.Warn("vdi: applying the restart rule failed; the next pass does it", "err", err)
	}
	t := time.NewTicker(s.opts.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := s.Pass(ctx); err != nil && ctx.Err() == nil {
				s.opts.Log.Warn("vdi: policy pass incomplete", "err", err)
			}
		}
	}
}
