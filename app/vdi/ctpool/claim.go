package ctpool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/corral-dev/corral/app/vdi"
	"github.com/corral-dev/corral/backends"
)

// Claimed is the answer of a claim.
type Claimed struct {
	Member string
	Claim  vdi.Claim
	// Again: the identity already held this member (renewed when its
	// claim had expired).
	Again bool
	// StartError says why the start that came with the claim failed; the
	// claim stays and the next reconcile cannot take the member away.
	StartError error
}

// Claim gives a free member of pool to who (the Lease contract of
// spec/vdi.md: the first writer to create the Lease wins). A second claim
// by the same identity gets the same member, and renews its claim when
// it expired. A member without a pod is started. With no free member it
// returns a Conflict "pool has no free members" with the desired, claimed
// and unschedulable counts.
func (m *Manager) Claim(ctx context.Context, pool, who string) (Claimed, error) {
	d, err := m.Get(ctx, pool)
	if err != nil {
		return Claimed{}, err
	}
	return m.claimIn(ctx, d, who)
}

// claimIn is Claim in the pool d, already read. It is the one place
// that refuses an empty or reserved identity (Claim and the seam's Claim
// come here).
func (m *Manager) claimIn(ctx context.Context, d Definition, who string) (Claimed, error) {
	pool := d.Name
	if vdi.Reserved(who) {
		return Claimed{}, backends.Invalidf("%q cannot claim a desktop: it is empty or a reserved identity (corral-vdi/...)", who)
	}
	if err := d.Spec.Validate(pool); err != nil {
		return Claimed{}, err
	}
	objs, err := m.objects(ctx, pool)
	if err != nil {
		return Claimed{}, err
	}
	claims, err := m.claims.List(ctx, "ct", m.opts.Namespace, pool)
	if err != nil {
		return Claimed{}, err
	}
	now := m.now()
	for _, c := range claims {
		if c.Holder == who {
			if c.Expired(now) {
				if c, err = m.claims.Update(ctx, vdi.Renew(c, now)); err != nil {
					return Claimed{}, backends.Conflictf("the claim of %s changed while it was renewed; claim again", c.Desktop.Member)
				}
			}
			return Claimed{Member: c.Desktop.Member, Claim: c, Again: true}, nil
		}
	}
	rows := observe(pool, d.Spec, objs, claims, now)
	st := summarize(d.Spec, rows, nil)
	// Ready members first, then Starting, then Stopped.
	rank := map[State]int{Ready: 0, Starting: 1, Stopped: 2}
	free := slices.DeleteFunc(slices.Clone(rows), func(r Member) bool { return !r.Free() })
	slices.SortStableFunc(free, func(a, b Member) int { return rank[a.State] - rank[b.State] })
	for _, r := range free {
		desk := vdi.DesktopID{Kind: "ct", Namespace: m.opts.Namespace, Member: r.Name}
		c, err := m.claims.Acquire(ctx, desk, pool, who, now)
		if errors.Is(err, vdi.ErrClaimed) {
			continue
		}
		if err != nil {
			return Claimed{}, err
		}
		out := Claimed{Member: r.Name, Claim: c}
		m.markAssigned(ctx, r.Name, who)
		if r.State == Stopped {
			o := objs[r.Name]
			out.StartError = m.start(ctx, pool, r.Name, d.Spec, o)
		}
		return out, nil
	}
	return Claimed{}, backends.Conflictf("pool has no free members: CT pool %s has %d desired, %d claimed, %d unschedulable; try again after a release, or raise its size",
		pool, st.Desired, st.Claimed, st.Unschedulable)
}

// markAssigned copies the holder onto the member's PVC for display (""
// removes the copy); a failure only costs the display.
func (m *Manager) markAssigned(ctx context.Context, member, who string) {
	var v any = who
	if who == "" {
		v = nil
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{AnnAssignedTo: v}}})
	if _, err := m.kube.CoreV1().PersistentVolumeClaims(m.opts.Namespace).Patch(ctx, dataPVC(member), types.MergePatchType, patch,
		metav1.PatchOptions{FieldManager: fieldManager}); err != nil {
		m.opts.Log.Warn("ctpool: the assignment annotation was not written", "member", member, "err", err)
	}
}

// Released is the answer of a release.
type Released struct {
	// Held is false when the member had no claim: nothing was done.
	Held bool
	// Holder is the identity that held the claim.
	Holder string
	// Recreated: the member was made again from the current source (false
	// when its index is above the pool size).
	Recreated bool
}

// Release ends who's claim on member: it hands the Lease to the
// reconciler (a compare-and-swap on its resourceVersion), destroys the
// pod, the Service and the data PVC and waits until they are gone, makes
// the member again from the current source when its index is in the pool
// size, and deletes the Lease, also when a step failed (the next
// reconcile then makes the member). A member without a claim is left
// alone. force releases a claim another identity holds (an admin).
func (m *Manager) Release(ctx context.Context, pool, member, who string, force bool) (Released, error) {
	d, err := m.Get(ctx, pool)
	if err != nil {
		return Released{}, err
	}
	return m.releaseIn(ctx, d, member, who, force)
}

// releaseIn is Release in the pool d, already read.
func (m *Manager) releaseIn(ctx context.Context, d Definition, member, who string, force bool) (Released, error) {
	pool := d.Name
	if err := d.Spec.Validate(pool); err != nil {
		return Released{}, err
	}
	if memberIndex(pool, member) == 0 {
		return Released{}, backends.Invalidf("member %q is not a member of CT pool %s: members are named %s-N", member, pool, pool)
	}
	desk := vdi.DesktopID{Kind: "ct", Namespace: m.opts.Namespace, Member: member}
	c, err := m.claims.Get(ctx, desk)
	if errors.Is(err, vdi.ErrNoClaim) {
		return Released{}, nil
	}
	if err != nil {
		return Released{}, err
	}
	if c.Pool != pool {
		return Released{}, backends.Invalidf("member %s is claimed in pool %q, not %s", member, c.Pool, pool)
	}
	if c.Holder == vdi.ReconcilerIdentity {
		return Released{}, backends.Conflictf("member %s is being reconciled (the reconciler holds its Lease); release it again when that ends", member)
	}
	if c.Holder != who && !force {
		return Released{}, backends.Forbiddenf("member %s is claimed by another identity: only its holder may release it, or an administrator with --force", member)
	}
	out := Released{Held: true, Holder: c.Holder}
	now := m.now()
	mine := c
	mine.Holder, mine.Renewed, mine.Expires = vdi.ReconcilerIdentity, now, now.Add(m.opts.StepLease)
	mine, err = m.claims.Update(ctx, mine)
	if errors.Is(err, vdi.ErrChanged) {
		return Released{}, backends.Conflictf("the claim of member %s changed since it was read; release it again", member)
	}
	if err != nil {
		return Released{}, err
	}
	defer func() {
		if err := m.claims.Release(context.WithoutCancel(ctx), mine); err != nil {
			m.opts.Log.Warn("ctpool: the release's Lease was not removed; it expires by itself", "member", member, "err", err)
		}
	}()
	if err := m.destroy(ctx, member); err != nil {
		return out, backends.Failed(fmt.Sprintf("release %s: the member was not fully destroyed; the next reconcile replaces it", member), err)
	}
	if memberIndex(pool, member) > d.Spec.Size {
		return out, nil
	}
	if err := m.create(ctx, pool, member, d.Spec); err != nil {
		return out, backends.Failed(fmt.Sprintf("release %s: the member was destroyed but not made again; the next reconcile makes it", member), err)
	}
	out.Recreated = true
	return out, nil
}

// Delete removes pool: it sets its size to 0, reconciles (which deletes
// every unclaimed member), and removes the definition when no member is
// left. A claimed member stays, and so does the definition: release the
// member (--force) and run delete again.
func (m *Manager) Delete(ctx context.Context, pool string) error {
	d, err := m.Get(ctx, pool)
	if err != nil {
		return err
	}
	if d.Spec.Mode == modePersistent {
		// Nothing made members of it (every operation refuses the mode):
		// only the definition goes.
		return m.fail("delete the definition of CT pool "+pool,
			m.kube.CoreV1().ConfigMaps(m.opts.Namespace).Delete(ctx, ConfigMapName(pool), metav1.DeleteOptions{}))
	}
	spec := d.Spec
	spec.Size = 0
	if _, err := m.Apply(ctx, pool, spec); err != nil {
		return err
	}
	res, err := m.Reconcile(ctx, pool)
	if err != nil {
		return err
	}
	var left []string
	for _, r := range res.Status.Members {
		if r.State != Missing || r.Claimed() || r.Maintenance {
			left = append(left, r.Name)
		}
	}
	if len(left) > 0 {
		return backends.Conflictf("CT pool %s still has members %s (claimed, or being deleted); release them with --force and run delete again", pool, strings.Join(left, ", "))
	}
	err = m.kube.CoreV1().ConfigMaps(m.opts.Namespace).Delete(ctx, ConfigMapName(pool), metav1.DeleteOptions{})
	if err != nil {
		return m.fail("delete the definition of CT pool "+pool, err)
	}
	return nil
}

// StartMember starts a claimed member that has no pod (or one that
// ended); a member that runs or starts is left alone.
func (m *Manager) StartMember(ctx context.Context, pool, member string) error {
	d, err := m.Get(ctx, pool)
	if err != nil {
		return err
	}
	return m.startIn(ctx, d, member)
}

// startIn is StartMember in the pool d, already read.
func (m *Manager) startIn(ctx context.Context, d Definition, member string) error {
	pool := d.Name
	if err := d.Spec.Validate(pool); err != nil {
		return err
	}
	o, err := m.member(ctx, pool, member)
	if err != nil {
		return err
	}
	switch st, _ := memberState(o); st {
	case Stopped:
		return m.start(ctx, pool, member, d.Spec, o)
	case Missing, Terminating:
		return backends.Conflictf("member %s is %s: release it, and the next reconcile makes it again", member, st)
	}
	return nil
}
