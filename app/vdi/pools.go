package vdi

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/corral-dev/corral/app/tasks"
	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/store"
)

// MaxPoolSize bounds a pool: a larger one is a typo more often than not.
const MaxPoolSize = 200

// PoolRequest asks for a pool of Size clones of Golden.
type PoolRequest struct {
	Name      string
	Golden    string // canonical ref, or a name the fleet resolves to one instance
	Size      int
	Ephemeral bool
}

// Member is one desktop of a pool as an admin sees it.
type Member struct {
	Desktop string
	Ref     string
	State   string // the instance's power state; "missing" when the backend has none
	Holder  string // "" when free
	Expired bool
}

// Pool is a pool as an admin sees it.
type Pool struct {
	ID        string
	Golden    string
	Ephemeral bool
	Members   []Member
}

// CreatePool clones req.Size members of the golden instance, named
// POOL-1 to POOL-N beside it, registers them, and on KubeVirt labels them
// corral.dev/vdi-pool=POOL. A failure removes what was made, so no half
// pool is left behind. It runs as the task "vdi pool create".
func (s *Service) CreatePool(ctx context.Context, o tasks.Origin, req PoolRequest) (Pool, error) {
	spec := tasks.Spec{Action: "vdi pool create", Target: req.Name, Origin: o}
	defer s.changed()
	if err := backends.ValidateName("pool", req.Name); err != nil {
		return Pool{}, s.opts.Tasks.Refused(ctx, spec, err)
	}
	if req.Size < 1 || req.Size > MaxPoolSize {
		return Pool{}, s.opts.Tasks.Refused(ctx, spec, backends.Invalidf("size %d: accepted are 1 to %d", req.Size, MaxPoolSize))
	}
	golden, err := s.opts.Fleet.Snapshot().Resolve(req.Golden)
	if err != nil {
		return Pool{}, s.opts.Tasks.Refused(ctx, spec, fmt.Errorf("golden VM: %w", err))
	}
	b, err := s.opts.Fleet.Backend(golden)
	if err != nil {
		return Pool{}, s.opts.Tasks.Refused(ctx, spec, err)
	}
	cloner, err := backends.Clones(b)
	if err != nil {
		return Pool{}, s.opts.Tasks.Refused(ctx, spec, err)
	}
	if _, err := s.claimsFor(golden); err != nil {
		return Pool{}, s.opts.Tasks.Refused(ctx, spec, err)
	}
	ns := golden.Namespace
	if ns == "" {
		ns = "-"
	}
	id := PoolID{Kind: "vm", Namespace: ns, Pool: req.Name}
	spec.Target = id.String()
	var out Pool
	_, err = s.opts.Tasks.Do(ctx, spec, func(ctx context.Context, r *tasks.Run) error {
		if _, err := b.Get(ctx, golden); err != nil {
			return fmt.Errorf("golden VM %s: %w", golden, err)
		}
		err := s.opts.Store.CreateVDIPool(ctx, store.VDIPool{ID: id.String(), Kind: "vm", Namespace: ns, Name: req.Name,
			Golden: golden.String(), Ephemeral: req.Ephemeral})
		if errors.Is(err, store.ErrExists) {
			return backends.Conflictf("pool %s exists: delete it first or choose another name", id)
		}
		if err != nil {
			return err
		}
		var made []backends.InstanceRef
		undo := func(cause error) error {
			for _, ref := range made {
				if derr := b.Delete(context.WithoutCancel(ctx), ref); derr != nil && !errors.Is(derr, backends.ErrNotFound) {
					r.Logf("could not remove clone %s after the failure; remove it by hand", ref.Name)
				}
			}
			_ = s.opts.Store.DeleteVDIPool(context.WithoutCancel(ctx), id.String())
			return cause
		}
		for i := 1; i <= req.Size; i++ {
			name := req.Name + "-" + strconv.Itoa(i)
			in, err := cloner.Clone(ctx, golden, name)
			if err != nil {
				return undo(fmt.Errorf("clone %s: %w", name, err))
			}
			made = append(made, in.Ref)
			d := DesktopID{Kind: "vm", Namespace: ns, Member: name}
			if err := s.opts.Store.AddVDIMember(ctx, store.VDIMember{Desktop: d.String(), Pool: id.String(), Index: i, Ref: in.Ref.String()}); err != nil {
				if errors.Is(err, store.ErrExists) {
					err = backends.Conflictf("desktop %s already belongs to another pool", d)
				}
				return undo(err)
			}
			if golden.Backend == backends.KindKubeVirt {
				if err := s.labelPool(ctx, in.Ref, req.Name); err != nil {
					return undo(err)
				}
			}
			r.Logf("cloned %s (%d of %d)", name, i, req.Size)
			r.Progress(100 * i / req.Size)
		}
		p, err := s.load(ctx, id)
		if err != nil {
			return err
		}
		out, err = s.describe(ctx, p)
		return err
	})
	return out, err
}

// Pools returns every pool with its members, their state and holder.
func (s *Service) Pools(ctx context.Context) ([]Pool, error) {
	ps, err := s.pools(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Pool, 0, len(ps))
	for _, p := range ps {
		v, err := s.describe(ctx, p)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

func (s *Service) describe(ctx context.Context, p *pool) (Pool, error) {
	claims, err := p.claims.List(ctx, p.id.Kind, p.id.Namespace, p.id.Pool)
	if err != nil {
		return Pool{}, err
	}
	held := map[string]Claim{}
	for _, c := range claims {
		held[c.Desktop.String()] = c
	}
	legacy, err := s.legacyAssignments(ctx, p)
	if err != nil {
		s.opts.Log.Warn("vdi: assignment labels unreadable", "pool", p.id.String(), "err", err)
	}
	states := s.states(ctx, p)
	out := Pool{ID: p.id.String(), Golden: p.Golden, Ephemeral: p.Ephemeral}
	for _, m := range p.Members {
		v := Member{Desktop: m.Desktop, Ref: m.Ref, State: "missing"}
		if st, ok := states[m.Ref]; ok {
			v.State = string(st)
		}
		if c, ok := held[m.Desktop]; ok {
			v.Holder, v.Expired = c.Holder, c.Expired(s.now())
		} else if who, ok := legacy[m.Desktop]; ok {
			v.Holder = who
		}
		out.Members = append(out.Members, v)
	}
	return out, nil
}

// DeletePool ends every claim of the pool, deletes its members and
// forgets it, after a resize of the pool running in this process. A member that cannot be deleted keeps the pool, so the
// delete can be run again. It runs as the task "vdi pool delete".
func (s *Service) DeletePool(ctx context.Context, o tasks.Origin, poolID string) error {
	spec := tasks.Spec{Action: "vdi pool delete", Target: poolID, Origin: o}
	defer s.changed()
	id, err := ParsePoolID(poolID)
	if err != nil {
		return s.opts.Tasks.Refused(ctx, spec, backends.Invalidf("pool %q: accepted is vm/NAMESPACE/POOL", poolID))
	}
	if _, err := s.fresh(ctx, id); err != nil {
		return s.opts.Tasks.Refused(ctx, spec, err)
	}
	_, err = s.opts.Tasks.Do(ctx, spec, func(ctx context.Context, r *tasks.Run) error {
		// A growth of the pool registers members as it clones: the delete
		// waits for it and reads the members after, so none is left
		// behind without its row.
		unlock := s.poolLock(id)
		defer unlock()
		p, err := s.fresh(ctx, id)
		if err != nil {
			return err
		}
		claims, err := p.claims.List(ctx, id.Kind, id.Namespace, id.Pool)
		if err != nil {
			return err
		}
		for _, c := range claims {
			if err := p.claims.Release(ctx, c); err != nil && !errors.Is(err, ErrChanged) {
				return err
			}
		}
		for _, m := range p.Members {
			ref, err := backends.ParseRef(m.Ref)
			if err != nil {
				return err
			}
			if err := p.b.Delete(ctx, ref); err != nil && !errors.Is(err, backends.ErrNotFound) {
				return fmt.Errorf("delete member %s: %w", ref.Name, err)
			}
			if err := s.opts.Store.DeleteVDIMember(ctx, m.Desktop); err != nil && !errors.Is(err, store.ErrNotFound) {
				return err
			}
			r.Logf("deleted %s", ref.Name)
		}
		return s.opts.Store.DeleteVDIPool(ctx, id.String())
	})
	return err
}

// states returns the power state of each instance of the pool's context
// by canonical ref, read live (the CLI has no refreshed fleet); an
// unreachable context gives every member "unknown".
func (s *Service) states(ctx context.Context, p *pool) map[string]backends.State {
	cctx, cancel := s.opts.Fleet.CallContext(ctx)
	defer cancel()
	list, err := p.b.List(cctx)
	out := make(map[string]backends.State, len(list))
	if err != nil {
		for _, m := range p.Members {
			out[m.Ref] = backends.StateUnknown
		}
		return out
	}
	for _, in := range list {
		out[in.Ref.String()] = in.State
	}
	return out
}
