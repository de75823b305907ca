package vdi

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/corral-dev/corral/app/auth"
	"github.com/corral-dev/corral/app/tasks"
	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/store"
)

// Resize is what a pool resize did, or, for a growth started in the
// background, the task that does it.
type Resize struct {
	Pool string `json:"pool"`
	From int    `json:"from"`
	To   int    `json:"to"`
	// Added and Removed are the desktops the resize made and deleted.
	Added   []string `json:"added"`
	Removed []string `json:"removed"`
	// Task is the ID of the task (GET /api/tasks/{id}); "" when nothing
	// had to change.
	Task string `json:"task,omitempty"`
}

// ResizePool makes the VM pool poolID have size members, as the task
// "vdi pool resize", before it returns (the CLI, the pools page). Admins
// only.
//
// Growing clones new members from the golden VM as CreatePool does,
// named POOL-N with N continuing after the highest number in the pool
// and skipping a name an instance or another pool's desktop has. A
// member that fails to clone ends the task with an error that says so;
// the pool keeps the members made before it.
//
// Shrinking removes unclaimed members only, highest number first: each
// one's claim is taken by the reconciler identity while it is stopped,
// deleted and unregistered, so nobody claims it meanwhile. When fewer
// members are unclaimed than must go, nothing is removed: the refusal (a
// 400) names the claimed members and the smallest size possible now. A
// claimed member is never touched.
//
// A CT pool (ct/...) is refused with the remedy: its size is in its
// definition (corral vdi ct-pool apply --size), which the reconciler
// follows.
func (s *Service) ResizePool(ctx context.Context, who auth.Identity, surface, poolID string, size int) (Resize, error) {
	return s.resize(ctx, who, surface, poolID, size, false)
}

// StartResizePool is ResizePool for the REST API: a growth, which clones,
// runs in the background and the answer carries its task (started
// reports it); a shrink, or no change, is done before it returns. A
// pool outside the broker's namespaces is NotFound, as on every broker
// route; the CLI and the pools page (ResizePool) reach every pool.
func (s *Service) StartResizePool(ctx context.Context, who auth.Identity, surface, poolID string, size int) (out Resize, started bool, err error) {
	if id, perr := ParsePoolID(poolID); perr == nil && !s.serves(id.Namespace) {
		spec := tasks.Spec{Action: "vdi pool resize", Target: poolID + " (size " + strconv.Itoa(size) + ")", Origin: tasks.Origin{Actor: who.Actor(), Surface: surface}}
		return Resize{}, false, s.opts.Tasks.Refused(ctx, spec, backends.NotFoundf("pool %s does not exist", id))
	}
	out, err = s.resize(ctx, who, surface, poolID, size, true)
	return out, err == nil && out.To > out.From, err
}

func (s *Service) resize(ctx context.Context, who auth.Identity, surface, poolID string, size int, async bool) (Resize, error) {
	spec := tasks.Spec{Action: "vdi pool resize", Target: poolID + " (size " + strconv.Itoa(size) + ")", Origin: tasks.Origin{Actor: who.Actor(), Surface: surface}}
	refuse := func(err error) (Resize, error) { return Resize{}, s.opts.Tasks.Refused(ctx, spec, err) }
	if !who.Admin {
		return refuse(backends.Forbiddenf("only admins may resize a pool"))
	}
	id, err := ParsePoolID(poolID)
	if err != nil {
		return refuse(backends.Invalidf("pool %q: accepted is vm/NAMESPACE/POOL", poolID))
	}
	if size < 1 || size > MaxPoolSize {
		return refuse(backends.Invalidf("size %d: accepted are 1 to %d (to remove a pool, delete it)", size, MaxPoolSize))
	}
	if id.Kind == "ct" {
		return refuse(backends.Invalidf("CT pool %s keeps its size in its definition: run corral vdi ct-pool apply %s -n %s --size %d (the reconciler then makes or removes members, never a claimed one)",
			id, id.Pool, id.Namespace, size))
	}
	p, err := s.fresh(ctx, id)
	if err != nil {
		return refuse(err)
	}
	out := Resize{Pool: id.String(), From: len(p.Members), To: size, Added: []string{}, Removed: []string{}}
	switch {
	case size == len(p.Members):
		s.audit(ctx, spec, nil, "the pool has "+strconv.Itoa(size)+" members already")
		return out, nil
	case size > len(p.Members):
		if _, err := backends.Clones(p.b); err != nil {
			return refuse(err)
		}
	default:
		if _, err := s.shrinkable(ctx, p, size); err != nil {
			return refuse(err)
		}
	}
	var res Resize
	run := func(ctx context.Context, r *tasks.Run) error {
		// One change of a pool at a time in this process; the pool is
		// read again under the lock, fresh (another resize may have run).
		unlock := s.poolLock(id)
		defer unlock()
		defer s.changed()
		p, err := s.fresh(ctx, id)
		if errors.Is(err, backends.ErrNotFound) {
			return backends.NotFoundf("pool %s was deleted before the resize began: nothing was resized", id)
		}
		if err != nil {
			return err
		}
		res = Resize{Pool: id.String(), From: len(p.Members), To: size, Added: []string{}, Removed: []string{}}
		if size > len(p.Members) {
			return s.grow(ctx, p, size, r, &res)
		}
		return s.shrink(ctx, p, size, r, &res)
	}
	if async && size > len(p.Members) {
		t, err := s.opts.Tasks.Start(ctx, spec, run)
		out.Task = t.ID
		return out, err
	}
	t, err := s.opts.Tasks.Do(ctx, spec, run)
	res.Task = t.ID
	return res, err
}

// grow clones members until p has size, numbering on after the highest.
func (s *Service) grow(ctx context.Context, p *pool, size int, r *tasks.Run, out *Resize) error {
	cloner, err := backends.Clones(p.b)
	if err != nil {
		return err
	}
	taken, err := s.desktopIDs(ctx)
	if err != nil {
		return err
	}
	next := 1
	for _, m := range p.Members {
		next = max(next, m.Index+1)
	}
	want := size - len(p.Members)
	for tries := 0; len(out.Added) < want; tries++ {
		if tries >= MaxPoolSize+want {
			return backends.Conflictf("no free member name after %s-%d: remove the instances named %s-N that are no members", p.id.Pool, next-1, p.id.Pool)
		}
		i := next
		next++
		name := p.id.Pool + "-" + strconv.Itoa(i)
		d := DesktopID{Kind: "vm", Namespace: p.id.Namespace, Member: name}
		cand := p.golden
		cand.Name = name
		if taken[d.String()] {
			r.Logf("skipped %s: another pool has the desktop %s", name, d)
			continue
		}
		if _, err := p.b.Get(ctx, cand); err == nil {
			r.Logf("skipped %s: an instance of that name exists", name)
			continue
		} else if !errors.Is(err, backends.ErrNotFound) {
			return kept(err, "read "+name, p, out)
		}
		in, err := cloner.Clone(ctx, p.golden, name)
		if err != nil {
			return kept(err, "clone "+name, p, out)
		}
		undo := func(cause error) error {
			if derr := p.b.Delete(context.WithoutCancel(ctx), in.Ref); derr != nil && !errors.Is(derr, backends.ErrNotFound) {
				r.Logf("could not remove the clone %s after the failure; remove it by hand", name)
			}
			return kept(cause, "register "+name, p, out)
		}
		if err := s.opts.Store.AddVDIMember(ctx, store.VDIMember{Desktop: d.String(), Pool: p.id.String(), Index: i, Ref: in.Ref.String()}); err != nil {
			if errors.Is(err, store.ErrExists) {
				err = backends.Conflictf("desktop %s already belongs to another pool", d)
			}
			return undo(err)
		}
		if p.kubevirt() {
			if err := s.labelPool(ctx, in.Ref, p.id.Pool); err != nil {
				_ = s.opts.Store.DeleteVDIMember(context.WithoutCancel(ctx), d.String())
				return undo(err)
			}
		}
		out.Added = append(out.Added, d.String())
		r.Logf("cloned %s (%d of %d)", name, len(out.Added), want)
		r.Progress(100 * len(out.Added) / want)
	}
	return nil
}

// kept is the error of a growth that stopped at step: the members made
// before it stay in the pool, and the message says so.
func kept(err error, step string, p *pool, out *Resize) error {
	return stopped(err, step, fmt.Sprintf("the pool keeps the %d members made before (it has %d of %d)",
		len(out.Added), len(p.Members)+len(out.Added), out.To))
}

// stopped is the error of a resize that stopped at step on err: its
// kind (a backend failure when it has none), err's safe message, what
// the pool keeps, and the remedy; err stays the cause for the log.
func stopped(err error, step, keeps string) error {
	msg := cmp.Or(backends.SafeMessage(err), "the backend failed")
	return &backends.Error{Kind: cmp.Or(backends.KindOf(err), backends.ErrFailed), Err: err,
		Msg: fmt.Sprintf("%s: %s; %s: resize it again to retry", step, msg, keeps)}
}

// desktopIDs returns every registered desktop ID.
func (s *Service) desktopIDs(ctx context.Context) (map[string]bool, error) {
	rows, err := s.opts.Store.VDIPools(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, r := range rows {
		for _, m := range r.Members {
			out[m.Desktop] = true
		}
	}
	return out, nil
}

// shrinkable returns the members of p without a claim (nor a v0.6.0
// assignment), highest number first, or the refusal when fewer than
// len(p.Members)-size are.
func (s *Service) shrinkable(ctx context.Context, p *pool, size int) ([]store.VDIMember, error) {
	held, err := s.heldDesktops(ctx, p)
	if err != nil {
		return nil, err
	}
	var free []store.VDIMember
	var claimed []string
	for _, m := range p.Members {
		if held[m.Desktop] {
			claimed = append(claimed, m.Desktop)
		} else {
			free = append(free, m)
		}
	}
	slices.SortFunc(free, func(a, b store.VDIMember) int { return cmp.Compare(b.Index, a.Index) })
	if need := len(p.Members) - size; len(free) < need {
		return nil, backends.Invalidf("pool %s cannot shrink to %d: %d of its %d members are claimed (%s) and a claimed member is never removed; the smallest size now is %d, or release desktops first",
			p.id, size, len(claimed), len(p.Members), strings.Join(claimed, ", "), max(1, len(claimed)))
	}
	return free, nil
}

// shrink removes unclaimed members of p, highest number first, until it
// has size. Each one's claim is held by the reconciler identity while it
// goes, so a claimant cannot get it; one claimed meanwhile is kept.
func (s *Service) shrink(ctx context.Context, p *pool, size int, r *tasks.Run, out *Resize) error {
	free, err := s.shrinkable(ctx, p, size)
	if err != nil {
		return err
	}
	need := len(p.Members) - size
	for _, m := range free {
		if len(out.Removed) == need {
			break
		}
		d, err := ParseDesktopID(m.Desktop)
		if err != nil {
			return err
		}
		ref, err := backends.ParseRef(m.Ref)
		if err != nil {
			return err
		}
		hold, err := p.claims.Acquire(ctx, d, p.id.Pool, ReconcilerIdentity, s.now())
		if errors.Is(err, ErrClaimed) {
			r.Logf("kept %s: it was claimed meanwhile", d)
			continue
		}
		if err != nil {
			return err
		}
		err = s.power(ctx, p.b, ref, backends.ActionStop)
		if err == nil || errors.Is(err, backends.ErrNotFound) {
			err = p.b.Delete(ctx, ref)
		}
		if err != nil && !errors.Is(err, backends.ErrNotFound) {
			_ = p.claims.Release(context.WithoutCancel(ctx), hold)
			return stopped(err, "delete "+ref.Name, fmt.Sprintf("the pool keeps it (%d removed before)", len(out.Removed)))
		}
		// The VM is gone: its row and the hold go too, whatever the
		// caller's context does now, or a member without a VM would stay
		// held by the reconciler.
		if err := s.opts.Store.DeleteVDIMember(context.WithoutCancel(ctx), m.Desktop); err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		if err := p.claims.Release(context.WithoutCancel(ctx), hold); err != nil {
			s.opts.Log.Warn("vdi: the hold of a removed member stays until it expires", "desktop", d.String(), "err", err)
		}
		out.Removed = append(out.Removed, d.String())
		r.Logf("removed %s", ref.Name)
		r.Progress(100 * len(out.Removed) / need)
	}
	if len(out.Removed) < need {
		return backends.Conflictf("pool %s has %d members, not %d: members were claimed while it shrank; resize it again to retry",
			p.id, len(p.Members)-len(out.Removed), size)
	}
	return nil
}

// stillMember checks, after a claim, that its member was not removed by
// a shrink that ran between the claimant's read of the pool and its
// Acquire (the shrink's hold had ended by then); such a claim is given
// up.
func (s *Service) stillMember(ctx context.Context, p *pool, c Claim) error {
	_, ref, _ := p.member(c.Desktop)
	_, err := s.opts.Store.VDIMemberByRef(ctx, ref.String())
	if !errors.Is(err, store.ErrNotFound) {
		return nil // a read error is no evidence: the claim stands
	}
	if err := p.claims.Release(context.WithoutCancel(ctx), c); err != nil {
		s.opts.Log.Warn("vdi: a claim on a removed member stays until it expires", "desktop", c.Desktop.String(), "err", err)
	}
	return backends.Conflictf("desktop %s left the pool %s while you claimed it (the pool shrank): claim again", c.Desktop, p.id)
}

// heldDesktops returns the desktops of p that someone holds: by a claim, or by a
// v0.6.0 assignment label (KubeVirt).
func (s *Service) heldDesktops(ctx context.Context, p *pool) (map[string]bool, error) {
	claims, err := p.claims.List(ctx, p.id.Kind, p.id.Namespace, p.id.Pool)
	if err != nil {
		return nil, err
	}
	legacy, err := s.legacyAssignments(ctx, p)
	if err != nil {
		return nil, err
	}
	held := map[string]bool{}
	for _, c := range claims {
		held[c.Desktop.String()] = true
	}
	for d := range legacy {
		held[d] = true
	}
	return held, nil
}
