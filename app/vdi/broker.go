package vdi

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/corral-dev/corral/app/auth"
	"github.com/corral-dev/corral/app/tasks"
	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/store"
)

// PoolSummary is a pool as the broker serves it to any user.
type PoolSummary struct {
	ID        string `json:"id"`
	Ephemeral bool   `json:"ephemeral"`
	Members   int    `json:"members"`
	Claimed   int    `json:"claimed"`
	Free      int    `json:"free"`
}

// Desktop is one claimed desktop as its holder (or an admin) sees it.
type Desktop struct {
	ID        string    `json:"id"`
	SessionID string    `json:"sessionId"`
	PoolID    string    `json:"poolId"`
	Owner     string    `json:"owner"`
	Ref       string    `json:"ref"`
	Phase     string    `json:"phase"`
	Running   bool      `json:"running"`
	ClaimedAt time.Time `json:"claimedAt"`
	// Expired: nobody renewed the claim for an hour (no broker ran).
	Expired        bool       `json:"expired,omitempty"`
	Connected      bool       `json:"connected"`
	DisconnectedAt *time.Time `json:"disconnectedAt,omitempty"`
	ReclaimAt      *time.Time `json:"reclaimAt,omitempty"`
	ReclaimReason  string     `json:"reclaimReason,omitempty"`
	// StartError says why the start that came with the claim failed; the
	// caller keeps the desktop and can start it again.
	StartError string `json:"startError,omitempty"`
}

// BrokerPools returns the pools with their member, claimed and free
// counts.
func (s *Service) BrokerPools(ctx context.Context) ([]PoolSummary, error) {
	ps, err := s.servedPools(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]PoolSummary, 0, len(ps))
	for _, p := range ps {
		held, err := s.heldDesktops(ctx, p)
		if err != nil {
			return nil, err
		}
		n := 0
		for _, m := range p.Members {
			if held[m.Desktop] {
				n++
			}
		}
		out = append(out, PoolSummary{ID: p.id.String(), Ephemeral: p.Ephemeral, Members: len(p.Members), Claimed: n, Free: len(p.Members) - n})
	}
	return s.ctPools(ctx, out), nil
}

// Claim claims a member of the pool for the caller and starts it. A
// caller who already holds a member of the pool gets that one again. It
// returns a Conflict when the pool has no free member.
// surface names the caller's surface in the audit log ("rest", "dashboard").
func (s *Service) Claim(ctx context.Context, who auth.Identity, surface, poolID string) (Desktop, error) {
	if id, err := ParsePoolID(poolID); err == nil && !s.serves(id.Namespace) {
		// Outside the broker's namespaces: as if absent.
		spec := tasks.Spec{Action: "vdi claim", Target: poolID, Origin: tasks.Origin{Actor: who.Actor(), Surface: surface}}
		return Desktop{}, s.opts.Tasks.Refused(ctx, spec, backends.NotFoundf("pool %s does not exist", id))
	}
	return s.claimFor(ctx, tasks.Origin{Actor: who.Actor(), Surface: surface}, who.Login, poolID)
}

// Assign claims a member of the pool for holder on an admin's behalf
// (corral vdi assign) and starts it.
func (s *Service) Assign(ctx context.Context, o tasks.Origin, poolID, holder string) (Desktop, error) {
	return s.claimFor(ctx, o, holder, poolID)
}

func (s *Service) claimFor(ctx context.Context, o tasks.Origin, holder, poolID string) (Desktop, error) {
	spec := tasks.Spec{Action: "vdi claim", Target: poolID, Origin: o}
	if Reserved(holder) {
		return Desktop{}, s.opts.Tasks.Refused(ctx, spec, backends.Invalidf("%q cannot hold a desktop: it is a reserved identity", holder))
	}
	id, err := ParsePoolID(poolID)
	if err != nil {
		return Desktop{}, s.opts.Tasks.Refused(ctx, spec, backends.Invalidf("pool %q: accepted is vm/NAMESPACE/POOL or ct/NAMESPACE/POOL", poolID))
	}
	if id.Kind == "ct" {
		return s.claimCT(ctx, spec, id, holder)
	}
	p, err := s.load(ctx, id)
	if err != nil {
		return Desktop{}, s.opts.Tasks.Refused(ctx, spec, err)
	}
	c, err := s.acquire(ctx, p, holder)
	if err != nil {
		return Desktop{}, s.audit(ctx, spec, err, "")
	}
	defer s.changed()
	_, ref, _ := p.member(c.Desktop)
	var startErr error
	if p.kubevirt() {
		startErr = s.markAssigned(ctx, ref, holder, c.Acquired)
	}
	if startErr == nil {
		startErr = s.power(ctx, p.b, ref, backends.ActionStart)
	}
	out := s.view(ctx, p, c)
	detail := holder + " holds " + c.Desktop.String() + " (session " + c.Session + ")"
	if startErr != nil {
		// The claim stays: a second user must not get a desktop that is
		// half set up, and the holder can retry the start.
		out.StartError = backends.SafeMessage(startErr)
		if out.StartError == "" {
			out.StartError = "the desktop did not start; start it again"
		}
		s.opts.Log.Warn("vdi: start after claim failed", "desktop", c.Desktop.String(), "err", startErr)
		detail += "; start failed: " + out.StartError
	}
	s.audit(ctx, spec, nil, detail)
	return out, nil
}

// audit writes the audit row of a claim or a start, which are quick and
// synchronous: a row, not a task (a task would cost four writes per
// claim in a burst of claims). It returns err.
func (s *Service) audit(ctx context.Context, spec tasks.Spec, err error, detail string) error {
	outcome := tasks.OutcomeOK
	if err != nil {
		outcome = tasks.OutcomeError
		for _, k := range []error{backends.ErrInvalid, backends.ErrUnsupported, backends.ErrConflict, backends.ErrNotFound, backends.ErrForbidden} {
			if errors.Is(err, k) {
				outcome = tasks.OutcomeRefused
			}
		}
		detail = backends.SafeMessage(err)
		if detail == "" {
			detail = "the operation failed; the server log has the cause"
		}
	}
	// Under the claim store's write lock: SQLite takes one writer at a
	// time, and two writers of this process would meet in its busy
	// handler, which sleeps.
	s.sql.mu.Lock()
	_, aerr := s.opts.Store.AppendAudit(context.WithoutCancel(ctx), store.AuditEntry{At: s.now(), Actor: spec.Actor, Surface: spec.Surface,
		Action: spec.Action, Target: spec.Target, Outcome: outcome, Detail: detail})
	s.sql.mu.Unlock()
	if aerr != nil {
		s.opts.Log.Error("vdi: audit row lost", "action", spec.Action, "target", spec.Target, "err", aerr)
	}
	return err
}

// acquire returns holder's claim on a member of p: the one holder
// already has (renewed if it expired), the v0.6.0 assignment labelled
// with holder (adopted), else a free member through the picker.
func (s *Service) acquire(ctx context.Context, p *pool, holder string) (Claim, error) {
	now := s.now()
	// Read through the picker: a burst of claims reads the pool once.
	claims, _, err := s.picker.list(ctx, p.claims, p.id)
	if err != nil {
		return Claim{}, err
	}
	if c, ok, err := s.heldBy(ctx, p, claims, holder); err != nil || ok {
		if err == nil && c.Expired(now) {
			return p.claims.Update(ctx, Renew(c, now))
		}
		return c, err
	}
	legacy, err := s.legacyAssignments(ctx, p)
	if err != nil {
		return Claim{}, err
	}
	claimed := map[string]bool{}
	for _, c := range claims {
		claimed[c.Desktop.String()] = true
	}
	for _, d := range p.desktops() {
		if who, ok := legacy[d.String()]; ok && who == holder && !claimed[d.String()] {
			c, err := p.claims.Acquire(ctx, d, p.id.Pool, holder, now)
			if err == nil || !errors.Is(err, ErrClaimed) {
				return c, err
			}
		}
	}
	c, err := s.picker.Pick(ctx, p.claims, p.id, p.desktops(), holder, now, func(d DesktopID) bool {
		_, labelled := legacy[d.String()]
		return !labelled
	})
	if errors.Is(err, ErrNoFree) {
		return Claim{}, backends.Conflictf("pool %s has no free members: %d of %d are claimed; try again after one is released", p.id, len(claims), len(p.Members))
	}
	if err == nil {
		err = s.stillMember(ctx, p, c)
	}
	return c, err
}

// heldBy returns the claim holder has on a member of p, read by its name
// (consistently): the pool's claims as the picker read them may come
// from a cache a moment behind (CachedLister), which can still show a
// claim holder released or not yet show one they just made. It looks at
// the members those claims name for holder and the member the picker
// gave holder lately.
func (s *Service) heldBy(ctx context.Context, p *pool, claims []Claim, holder string) (Claim, bool, error) {
	var cands []DesktopID
	for _, c := range claims {
		if c.Holder == holder {
			cands = append(cands, c.Desktop)
		}
	}
	if d, ok := s.picker.Recent(p.id, holder); ok && !slices.Contains(cands, d) {
		cands = append(cands, d)
	}
	for _, d := range cands {
		c, err := p.claims.Get(ctx, d)
		if errors.Is(err, ErrNoClaim) {
			continue
		}
		if err != nil {
			return Claim{}, false, err
		}
		if c.Holder == holder {
			return c, true, nil
		}
	}
	return Claim{}, false, nil
}

// find returns the pool of desktop d.
func (s *Service) find(ctx context.Context, d DesktopID) (*pool, error) {
	rows, err := s.opts.Store.VDIPools(ctx)
	if err != nil {
		return nil, err
	}
	for _, row := range rows {
		for _, m := range row.Members {
			if m.Desktop == d.String() {
				return s.wrap(row)
			}
		}
	}
	return nil, backends.NotFoundf("desktop %s is in no pool", d)
}

// held returns the pool and the claim of desktop, after checking that
// who holds it or is an admin. A desktop without a claim is NotFound.
func (s *Service) held(ctx context.Context, who auth.Identity, desktop string) (*pool, Claim, error) {
	d, err := ParseDesktopID(desktop)
	if err != nil {
		return nil, Claim{}, backends.Invalidf("desktop %q: accepted is vm/NAMESPACE/MEMBER", desktop)
	}
	if !s.serves(d.Namespace) {
		return nil, Claim{}, backends.NotFoundf("desktop %s is in no pool", d)
	}
	p, err := s.find(ctx, d)
	if err != nil {
		return nil, Claim{}, err
	}
	c, err := p.claims.Get(ctx, d)
	if errors.Is(err, ErrNoClaim) {
		return nil, Claim{}, backends.NotFoundf("desktop %s is not claimed: claim its pool %s", d, p.id)
	}
	if err != nil {
		return nil, Claim{}, err
	}
	if !who.Admin && (who.Login == "" || who.Login != c.Holder) {
		return nil, Claim{}, backends.Forbiddenf("desktop %s is not yours: only its holder and admins may use it", d)
	}
	return p, c, nil
}

// Desktop returns one desktop to its holder or an admin.
func (s *Service) Desktop(ctx context.Context, who auth.Identity, desktop string) (Desktop, error) {
	if isCT(desktop) {
		_, c, err := s.ctHeld(ctx, who, desktop)
		if err != nil {
			return Desktop{}, err
		}
		return s.ctView(ctx, c), nil
	}
	p, c, err := s.held(ctx, who, desktop)
	if err != nil {
		return Desktop{}, err
	}
	return s.view(ctx, p, c), nil
}

// Desktops returns the caller's desktops; all lists every holder's and
// is for admins only.
func (s *Service) Desktops(ctx context.Context, who auth.Identity, all bool) ([]Desktop, error) {
	if all && !who.Admin {
		return nil, backends.Forbiddenf("only admins may list every user's desktops")
	}
	ps, err := s.servedPools(ctx)
	if err != nil {
		return nil, err
	}
	out := []Desktop{}
	for _, p := range ps {
		claims, err := p.claims.List(ctx, p.id.Kind, p.id.Namespace, p.id.Pool)
		if err != nil {
			return nil, err
		}
		var states map[string]backends.State // read once per pool, when it has a desktop to show
		for _, c := range claims {
			if _, _, ok := p.member(c.Desktop); !ok || !all && c.Holder != who.Login {
				continue
			}
			if states == nil {
				states = s.states(ctx, p)
			}
			out = append(out, s.viewWith(ctx, p, c, states))
		}
	}
	return s.ctDesktops(ctx, who, all, out), nil
}

// Start starts a desktop for its holder or an admin; a running desktop
// is left alone. It is audited as "vdi start".
func (s *Service) Start(ctx context.Context, who auth.Identity, surface, desktop string) (Desktop, error) {
	spec := tasks.Spec{Action: "vdi start", Target: desktop, Origin: tasks.Origin{Actor: who.Actor(), Surface: surface}}
	if isCT(desktop) {
		ct, c, err := s.ctHeld(ctx, who, desktop)
		if err != nil {
			return Desktop{}, s.opts.Tasks.Refused(ctx, spec, err)
		}
		if err := ct.Start(ctx, c); err != nil {
			return Desktop{}, s.audit(ctx, spec, err, "")
		}
		s.audit(ctx, spec, nil, "started "+c.Desktop.Member)
		return s.ctView(ctx, c), nil
	}
	p, c, err := s.held(ctx, who, desktop)
	if err != nil {
		return Desktop{}, s.opts.Tasks.Refused(ctx, spec, err)
	}
	_, ref, _ := p.member(c.Desktop)
	if err := s.power(ctx, p.b, ref, backends.ActionStart); err != nil {
		return Desktop{}, s.audit(ctx, spec, err, "")
	}
	s.audit(ctx, spec, nil, "started "+ref.Name)
	return s.view(ctx, p, c), nil
}

// view builds the desktop answer of claim c, reading the member's state.
func (s *Service) view(ctx context.Context, p *pool, c Claim) Desktop {
	return s.viewWith(ctx, p, c, nil)
}

// viewWith builds the desktop answer of claim c; states, when not nil,
// holds the pool context's instance states by canonical ref (a member
// missing from it is Missing, unless the context was unreachable).
func (s *Service) viewWith(ctx context.Context, p *pool, c Claim, states map[string]backends.State) Desktop {
	_, ref, _ := p.member(c.Desktop)
	now := s.now()
	v := Desktop{ID: c.Desktop.String(), SessionID: c.Session, PoolID: p.id.String(), Owner: c.Holder, Ref: ref.String(),
		ClaimedAt: c.Acquired, Expired: c.Expired(now), Phase: "Unknown"}
	var st backends.State
	var err error
	if states != nil {
		var ok bool
		if st, ok = states[ref.String()]; !ok {
			err = backends.ErrNotFound
		}
	} else {
		cctx, cancel := s.opts.Fleet.CallContext(ctx)
		var in backends.Instance
		in, err = p.b.Get(cctx, ref)
		cancel()
		st = in.State
	}
	switch {
	case errors.Is(err, backends.ErrNotFound):
		v.Phase = "Missing"
	case err == nil:
		v.Phase = phase(st)
		v.Running = st == backends.StateRunning
	}
	s.sessionView(&v, c)
	return v
}

// sessionView fills the session fields of v from claim c and the
// consoles open in this process.
func (s *Service) sessionView(v *Desktop, c Claim) {
	s.mu.Lock()
	open := s.open[c.Desktop]
	s.mu.Unlock()
	v.Connected = open > 0
	if !v.Connected && !c.Disconnected.IsZero() {
		t := c.Disconnected
		v.DisconnectedAt = &t
	}
	at, reason := s.reclaimAt(c, open)
	if !at.IsZero() {
		v.ReclaimAt, v.ReclaimReason = &at, reason
	}
}

func phase(st backends.State) string {
	switch st {
	case backends.StateRunning:
		return "Running"
	case backends.StateStopped:
		return "Stopped"
	case backends.StateStarting:
		return "Starting"
	case backends.StateStopping:
		return "Stopping"
	case backends.StatePaused:
		return "Paused"
	}
	return "Unknown"
}
