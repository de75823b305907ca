package vdi

import (
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/corral-dev/corral/app/auth"
	"github.com/corral-dev/corral/app/tasks"
	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/store"
)

// CTPools is the seam through which the broker serves the CT-backed
// pools of spec/vdi-ct-pools.md (app/vdi/ctpool, which imports this
// package; the composition root wires it) beside the VM pools. Their
// pools live in ConfigMaps and their claims in Leases named
// corral-vdi-ct-MEMBER, not in Corral's database. Pool IDs are
// ct/NAMESPACE/POOL, desktop IDs ct/NAMESPACE/MEMBER.
type CTPools interface {
	// Summaries returns the CT pools with their member, claimed and free
	// counts.
	Summaries(ctx context.Context) ([]PoolSummary, error)
	// Claim gives holder a free member of pool (the same one again when
	// holder has one); startErr says why the member's start failed (the
	// claim stays).
	Claim(ctx context.Context, pool PoolID, holder string) (c Claim, startErr error, err error)
	// Claims returns the users' claims on CT pool members.
	Claims(ctx context.Context) ([]Claim, error)
	// Get returns the claim of d, ErrNoClaim when it has none.
	Get(ctx context.Context, d DesktopID) (Claim, error)
	// Members returns, for each claim of cs in order, the canonical ref
	// of its member, its state as the pool status names it, and whether
	// it runs: a list of desktops is read in a few requests, not a few
	// per claim.
	Members(ctx context.Context, cs []Claim) []MemberView
	// Start starts the member of c when it has no pod.
	Start(ctx context.Context, c Claim) error
	// Release destroys the member of c and makes it again from the
	// image, if c is still the claim (its holder and version).
	Release(ctx context.Context, c Claim) error
	// Update writes c's times and session marks if the claim is still
	// at c.Version; ErrChanged otherwise (renewal and marks).
	Update(ctx context.Context, c Claim) (Claim, error)
	// Desktop maps the instance ref of a CT pool member (its console's
	// ref) to its desktop ct/NAMESPACE/MEMBER; false for any other ref.
	Desktop(ctx context.Context, ref backends.InstanceRef) (DesktopID, bool)
}

// MemberView is what a desktop answer shows of a CT claim's member.
type MemberView struct {
	Ref     string // canonical ref; "" when the member was not found
	Phase   string // the state as the pool status names it ("Unknown")
	Running bool
	// Err says why the member could not be read (its cluster unreachable,
	// a list refused); Ref is "" and Phase "Unknown" then.
	Err error
}

func isCT(desktop string) bool { return strings.HasPrefix(desktop, "ct/") }

// ctPools appends the CT pools to the VM pools' summaries; an
// unreachable cluster drops them with a warning.
func (s *Service) ctPools(ctx context.Context, out []PoolSummary) []PoolSummary {
	if s.opts.CT == nil {
		return out
	}
	cts, err := s.opts.CT.Summaries(ctx)
	if err != nil {
		s.opts.Log.Warn("vdi: CT pools not listed", "err", err)
		return out
	}
	for _, p := range cts {
		if id, err := ParsePoolID(p.ID); err == nil && s.serves(id.Namespace) {
			out = append(out, p)
		}
	}
	return out
}

func (s *Service) ctSeam() (CTPools, error) {
	if s.opts.CT == nil {
		return nil, backends.NotFoundf("this server serves no CT pools (no KubeVirt context)")
	}
	return s.opts.CT, nil
}

// claimCT is claimFor for a CT pool.
func (s *Service) claimCT(ctx context.Context, spec tasks.Spec, id PoolID, holder string) (Desktop, error) {
	ct, err := s.ctSeam()
	if err != nil {
		return Desktop{}, s.opts.Tasks.Refused(ctx, spec, err)
	}
	c, startErr, err := ct.Claim(ctx, id, holder)
	if err != nil {
		return Desktop{}, s.audit(ctx, spec, err, "")
	}
	out := s.ctView(ctx, c)
	detail := holder + " holds " + c.Desktop.String() + " (session " + c.Session + ")"
	if startErr != nil {
		out.StartError = backends.SafeMessage(startErr)
		if out.StartError == "" {
			out.StartError = "the desktop did not start; start it again"
		}
		detail += "; start failed: " + out.StartError
	}
	s.audit(ctx, spec, nil, detail)
	return out, nil
}

// ctHeld returns the claim of a CT desktop after checking that who holds
// it or is an admin.
func (s *Service) ctHeld(ctx context.Context, who auth.Identity, desktop string) (CTPools, Claim, error) {
	d, err := ParseDesktopID(desktop)
	if err != nil {
		return nil, Claim{}, backends.Invalidf("desktop %q: accepted is ct/NAMESPACE/MEMBER", desktop)
	}
	if !s.serves(d.Namespace) {
		return nil, Claim{}, backends.NotFoundf("desktop %s is not claimed: claim its pool", d)
	}
	ct, err := s.ctSeam()
	if err != nil {
		return nil, Claim{}, err
	}
	c, err := ct.Get(ctx, d)
	if errors.Is(err, ErrNoClaim) {
		return nil, Claim{}, backends.NotFoundf("desktop %s is not claimed: claim its pool", d)
	}
	if err != nil {
		return nil, Claim{}, err
	}
	if Reserved(c.Holder) {
		return nil, Claim{}, backends.Conflictf("desktop %s is being recreated; try again shortly", d)
	}
	if !who.Admin && (who.Login == "" || who.Login != c.Holder) {
		return nil, Claim{}, backends.Forbiddenf("desktop %s is not yours: only its holder and admins may use it", d)
	}
	return ct, c, nil
}

// ctView is the desktop answer of a CT claim, with its session marks
// and planned reclaim as for a VM desktop.
func (s *Service) ctView(ctx context.Context, c Claim) Desktop {
	m := MemberView{Phase: "Unknown"}
	if s.opts.CT != nil {
		m = s.opts.CT.Members(ctx, []Claim{c})[0]
	}
	return s.ctViewOf(c, m)
}

// ctViewOf is ctView with the member already read.
func (s *Service) ctViewOf(c Claim, m MemberView) Desktop {
	v := Desktop{ID: c.Desktop.String(), SessionID: c.Session, PoolID: "ct/" + c.Desktop.Namespace + "/" + c.Pool, Owner: c.Holder,
		ClaimedAt: c.Acquired, Expired: c.Expired(s.now()), Phase: "Unknown"}
	v.Ref, v.Phase, v.Running = m.Ref, m.Phase, m.Running
	s.sessionView(&v, c)
	return v
}

// ctDesktops appends the CT desktops of who (all: everyone's).
func (s *Service) ctDesktops(ctx context.Context, who auth.Identity, all bool, out []Desktop) []Desktop {
	if s.opts.CT == nil {
		return out
	}
	claims, err := s.opts.CT.Claims(ctx)
	if err != nil {
		s.opts.Log.Warn("vdi: CT desktops not listed", "err", err)
		return out
	}
	claims = slices.DeleteFunc(s.servedClaims(claims), func(c Claim) bool { return Reserved(c.Holder) || !all && c.Holder != who.Login })
	if len(claims) == 0 {
		return out
	}
	for i, m := range s.opts.CT.Members(ctx, claims) {
		out = append(out, s.ctViewOf(claims[i], m))
	}
	return out
}

// ctRelease is Release for a CT desktop: a task that destroys the member
// and makes it again from the image.
func (s *Service) ctRelease(ctx context.Context, who auth.Identity, spec tasks.Spec, desktop string) (store.Task, error) {
	ct, c, err := s.ctHeld(ctx, who, desktop)
	if err != nil {
		return store.Task{}, s.opts.Tasks.Refused(ctx, spec, err)
	}
	if who.Login != c.Holder {
		spec.Action, spec.Target = "vdi force-release", desktop+" (held by "+c.Holder+")"
	}
	return s.opts.Tasks.Start(ctx, spec, func(ctx context.Context, r *tasks.Run) error {
		unlock := s.lock(c.Desktop)
		defer unlock()
		defer s.changed()
		if err := ct.Release(ctx, c); err != nil {
			return err
		}
		r.Logf("released %s: destroyed and made again from its image", c.Desktop)
		return nil
	})
}
