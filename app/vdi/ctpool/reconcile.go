package ctpool

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/corral-dev/corral/app/vdi"
	"github.com/corral-dev/corral/backends"
)

// Result is what one reconcile did.
type Result struct {
	Status Status
	// Steps lists the actions done, as "create desk-1".
	Steps []string
}

// Reconcile makes one pass over pool (spec/vdi-ct-pools.md,
// Reconciliation): it creates the missing members, starts the stopped
// ones, replaces the unclaimed members that drifted or failed, deletes
// the unclaimed members above the size, and records the status. Each step
// runs under the member's Lease held as vdi.ReconcilerIdentity; a member
// whose Lease someone else holds is left alone. A failed step is an error
// line in the status and makes Reconcile return an error; the other steps
// still run.
func (m *Manager) Reconcile(ctx context.Context, pool string) (Result, error) {
	d, err := m.Get(ctx, pool)
	if err != nil {
		return Result{}, err
	}
	if err := d.Spec.Validate(pool); err != nil {
		return Result{}, err
	}
	st, err := m.observePool(ctx, d)
	if err != nil {
		return Result{}, err
	}
	var res Result
	var errs []string
	var errList []error
	for _, mem := range st.Members {
		a := plan(mem)
		if a == None {
			continue
		}
		done, err := m.step(ctx, d, mem.Name)
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s %s: %s", a, mem.Name, message(err)))
			errList = append(errList, err)
		}
		if done != None {
			res.Steps = append(res.Steps, string(done)+" "+mem.Name)
		}
	}
	// The status as the pass left the pool.
	if res.Status, err = m.observePool(ctx, d); err != nil {
		return res, err
	}
	res.Status.Errors = errs
	if err := m.writeStatus(ctx, d, res.Status); err != nil {
		errList = append(errList, err)
	}
	if len(errList) > 0 {
		shown := errs
		if len(shown) > 3 {
			shown = append(shown[:3:3], fmt.Sprintf("and %d more (in the pool's status)", len(errs)-3))
		}
		if len(shown) == 0 { // only the status write failed
			shown = []string{message(errList[0])}
		}
		return res, backends.Failed("reconcile CT pool "+pool+": "+strings.Join(shown, "; ")+"; the next reconcile tries again", errList[0])
	}
	return res, nil
}

// step takes member's Lease as the reconciler, reads the member again
// (another reconciler may have acted since the pool was read), does what
// the plan says then, and removes the Lease, also when the step failed.
// It returns the action done (None when the Lease was taken or nothing
// was left to do).
func (m *Manager) step(ctx context.Context, d Definition, member string) (Action, error) {
	desk := vdi.DesktopID{Kind: "ct", Namespace: m.opts.Namespace, Member: member}
	c, err := m.claims.Acquire(ctx, desk, d.Name, vdi.ReconcilerIdentity, m.now())
	if errors.Is(err, vdi.ErrClaimed) {
		return None, nil // a user or another reconciler holds it
	}
	if err != nil {
		return None, err
	}
	// A reconciler's Lease expires after StepLease, not a claim's hour.
	now := m.now()
	c.Renewed, c.Expires = now, now.Add(m.opts.StepLease)
	if c2, err := m.claims.Update(ctx, c); err == nil {
		c = c2
	}
	defer func() {
		if err := m.claims.Release(context.WithoutCancel(ctx), c); err != nil {
			m.opts.Log.Warn("ctpool: the reconciler's Lease was not removed; it expires by itself", "member", member, "err", err)
		}
	}()
	o, err := m.member(ctx, d.Name, member)
	if err != nil {
		return None, err
	}
	mem := observe(d.Name, d.Spec, map[string]observed{member: o}, nil, now)
	var row Member
	for _, r := range mem {
		if r.Name == member {
			row = r
		}
	}
	a := plan(row)
	switch a {
	case Create:
		err = m.create(ctx, d.Name, member, d.Spec)
	case Start:
		err = m.start(ctx, d.Name, member, d.Spec, o)
	case Replace:
		if err = m.destroy(ctx, member); err == nil {
			err = m.create(ctx, d.Name, member, d.Spec)
		}
	case Delete:
		err = m.destroy(ctx, member)
	}
	if err == nil && a != None {
		m.opts.Log.Info("ctpool: reconciled", "pool", d.Name, "member", member, "action", string(a))
	}
	return a, err
}

// message is err's safe message, or its text for an error of no kind.
func message(err error) string {
	if s := backends.SafeMessage(err); s != "" {
		return s
	}
	return err.Error()
}
