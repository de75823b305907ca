package vdi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/corral-dev/corral/backends"
)

// Labels and annotations of a claim's Lease (spec/vdi.md).
const (
	LabelPool          = "corral.dev/vdi-pool"
	LabelMember        = "corral.dev/vdi-member"
	LabelKind          = "corral.dev/vdi-kind"
	AnnSession         = "corral.dev/vdi-session"
	AnnConnectedAt     = "corral.dev/vdi-connected-at"
	AnnDisconnectedAt  = "corral.dev/vdi-disconnected-at"
	leaseFieldManager  = "corral-vdi"
	leaseTTLSeconds    = int32(ClaimTTL / time.Second)
	leaseTimeFormat    = time.RFC3339Nano
	leasePrefixVM      = "corral-vdi-"
	leasePrefixCT      = "corral-vdi-ct-"
	leaseNameMaxLength = 253
)

// LeaseClaims keeps claims as coordination.k8s.io/v1 Leases named
// corral-vdi-MEMBER (corral-vdi-ct-MEMBER for CT members) in the
// member's namespace. The first writer wins by Create; a stale Lease is
// replaced by an Update that carries the resourceVersion read, so of two
// claimants replacing it one gets a Conflict; Update and Release carry
// the claim's resourceVersion the same way.
type LeaseClaims struct {
	kube    kubernetes.Interface
	context string // the Corral context, named in unreachable errors
}

var (
	_ ClaimStore   = (*LeaseClaims)(nil)
	_ CachedLister = (*LeaseClaims)(nil)
)

// NewLeaseClaims returns a claim store over the Leases of a cluster;
// context names the Corral context in errors.
func NewLeaseClaims(kube kubernetes.Interface, context string) *LeaseClaims {
	return &LeaseClaims{kube: kube, context: context}
}

// LeaseName returns the name of d's Lease.
func LeaseName(d DesktopID) string {
	if d.Kind == "ct" {
		return leasePrefixCT + d.Member
	}
	return leasePrefixVM + d.Member
}

// Acquire implements ClaimStore.
func (s *LeaseClaims) Acquire(ctx context.Context, d DesktopID, pool, holder string, now time.Time) (Claim, error) {
	if Reserved(holder) && holder != ReconcilerIdentity {
		return Claim{}, fmt.Errorf("vdi: %q is a reserved identity", holder)
	}
	if len(LeaseName(d)) > leaseNameMaxLength {
		return Claim{}, backends.Invalidf("member name %q is too long for a Lease name", d.Member)
	}
	leases := s.kube.CoordinationV1().Leases(d.Namespace)
	want := newLease(d, pool, holder, now)
	got, err := leases.Create(ctx, want, metav1.CreateOptions{FieldManager: leaseFieldManager})
	if err == nil {
		return fromLease(got)
	}
	if !apierrors.IsAlreadyExists(err) {
		return Claim{}, s.fail("claim", d, err)
	}
	cur, err := leases.Get(ctx, want.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return Claim{}, ErrClaimed // released between our Create and Get: another claimant may be creating it
	}
	if err != nil {
		return Claim{}, s.fail("claim", d, err)
	}
	c, err := fromLease(cur)
	if err != nil {
		return Claim{}, err
	}
	if !c.Expired(now) {
		return Claim{}, ErrClaimed
	}
	// Stale: replace it, guarded by the resourceVersion just read.
	want.ResourceVersion = cur.ResourceVersion
	got, err = leases.Update(ctx, want, metav1.UpdateOptions{FieldManager: leaseFieldManager})
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		return Claim{}, ErrClaimed
	}
	if err != nil {
		return Claim{}, s.fail("claim", d, err)
	}
	return fromLease(got)
}

// Update implements ClaimStore: a JSON merge patch that carries the
// claim's resourceVersion. Not an Update: the API server creates a Lease
// on an Update of one that is gone (Leases allow create-on-update), so a
// renewal or a session mark racing a release would bring the claim back;
// a patch of a missing Lease is NotFound.
func (s *LeaseClaims) Update(ctx context.Context, c Claim) (Claim, error) {
	ann := map[string]any{AnnSession: c.Session, AnnConnectedAt: nil, AnnDisconnectedAt: nil}
	if !c.Connected.IsZero() {
		ann[AnnConnectedAt] = c.Connected.UTC().Format(leaseTimeFormat)
	}
	if !c.Disconnected.IsZero() {
		ann[AnnDisconnectedAt] = c.Disconnected.UTC().Format(leaseTimeFormat)
	}
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{
			"resourceVersion": c.Version,
			"labels":          map[string]string{LabelPool: c.Pool, LabelMember: c.Desktop.Member, LabelKind: c.Desktop.Kind},
			"annotations":     ann,
		},
		"spec": map[string]any{
			"holderIdentity":       c.Holder,
			"acquireTime":          metav1.MicroTime{Time: c.Acquired},
			"renewTime":            metav1.MicroTime{Time: c.Renewed},
			"leaseDurationSeconds": int32(c.Expires.Sub(c.Renewed) / time.Second),
		},
	})
	if err != nil {
		return Claim{}, err
	}
	got, err := s.kube.CoordinationV1().Leases(c.Desktop.Namespace).Patch(ctx, LeaseName(c.Desktop), types.MergePatchType, patch,
		metav1.PatchOptions{FieldManager: leaseFieldManager})
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		return Claim{}, ErrChanged
	}
	if err != nil {
		return Claim{}, s.fail("update claim", c.Desktop, err)
	}
	return fromLease(got)
}

// Release implements ClaimStore: a Delete with a resourceVersion
// precondition.
func (s *LeaseClaims) Release(ctx context.Context, c Claim) error {
	err := s.kube.CoordinationV1().Leases(c.Desktop.Namespace).Delete(ctx, LeaseName(c.Desktop),
		metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &c.Version}})
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		return ErrChanged
	}
	if err != nil {
		return s.fail("release claim", c.Desktop, err)
	}
	return nil
}

// Get implements ClaimStore.
func (s *LeaseClaims) Get(ctx context.Context, d DesktopID) (Claim, error) {
	l, err := s.kube.CoordinationV1().Leases(d.Namespace).Get(ctx, LeaseName(d), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return Claim{}, ErrNoClaim
	}
	if err != nil {
		return Claim{}, s.fail("read claim", d, err)
	}
	return fromLease(l)
}

// List implements ClaimStore: the Leases carrying the pool label (of
// that pool when one is named), read consistently.
func (s *LeaseClaims) List(ctx context.Context, kind, namespace, pool string) ([]Claim, error) {
	return s.list(ctx, kind, namespace, pool, "")
}

// ListCached implements CachedLister: List from the API server's watch
// cache (resourceVersion "0"), which answers at once but may be a moment
// behind. A consistent List waits until that cache has caught up with
// etcd: 30-45 ms of the 100 ms a burst of 100 claims takes here
// (docs/performance.md).
func (s *LeaseClaims) ListCached(ctx context.Context, kind, namespace, pool string) ([]Claim, error) {
	return s.list(ctx, kind, namespace, pool, "0")
}

func (s *LeaseClaims) list(ctx context.Context, kind, namespace, pool, rv string) ([]Claim, error) {
	sel := LabelPool
	if pool != "" {
		sel = labels.Set{LabelPool: pool}.String()
	}
	list, err := s.kube.CoordinationV1().Leases(namespace).List(ctx, metav1.ListOptions{LabelSelector: sel, ResourceVersion: rv})
	if err != nil {
		return nil, s.fail("list claims", DesktopID{Namespace: namespace}, err)
	}
	out := make([]Claim, 0, len(list.Items))
	for i := range list.Items {
		c, err := fromLease(&list.Items[i])
		if err != nil {
			continue // a Lease someone else labelled: not a claim of ours
		}
		if kind == "" || c.Desktop.Kind == kind {
			out = append(out, c)
		}
	}
	return out, nil
}

func (s *LeaseClaims) fail(op string, d DesktopID, err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return backends.Unavailable(s.context, err)
	}
	var st apierrors.APIStatus
	if errors.As(err, &st) {
		switch {
		case apierrors.IsForbidden(err):
			return backends.Failed(fmt.Sprintf("%s %s: the service account may not use Leases in namespace %s (grant coordination.k8s.io leases get, list, create, update, patch, delete)", op, d, d.Namespace), err)
		case apierrors.IsInvalid(err):
			return backends.Failed(fmt.Sprintf("%s %s: the API server refused the Lease", op, d), err)
		}
		return backends.Failed(fmt.Sprintf("%s %s: the API server failed", op, d), err)
	}
	return backends.Unavailable(s.context, err)
}

func newLease(d DesktopID, pool, holder string, now time.Time) *coordv1.Lease {
	t := metav1.MicroTime{Time: now}
	return &coordv1.Lease{
		ObjectMeta: metav1.ObjectMeta{
			Name:        LeaseName(d),
			Namespace:   d.Namespace,
			Labels:      map[string]string{LabelPool: pool, LabelMember: d.Member, LabelKind: d.Kind},
			Annotations: map[string]string{AnnSession: newSession()},
		},
		Spec: coordv1.LeaseSpec{
			HolderIdentity:       &holder,
			AcquireTime:          &t,
			RenewTime:            &t,
			LeaseDurationSeconds: ptr.To(leaseTTLSeconds),
		},
	}
}

func fromLease(l *coordv1.Lease) (Claim, error) {
	d := DesktopID{Kind: l.Labels[LabelKind], Namespace: l.Namespace, Member: l.Labels[LabelMember]}
	if d.Kind == "" {
		d.Kind = "vm"
	}
	if d.Member == "" || l.Spec.HolderIdentity == nil {
		return Claim{}, fmt.Errorf("vdi: Lease %s/%s is not a claim", l.Namespace, l.Name)
	}
	c := Claim{Desktop: d, Pool: l.Labels[LabelPool], Holder: *l.Spec.HolderIdentity, Session: l.Annotations[AnnSession],
		Version: l.ResourceVersion}
	if l.Spec.AcquireTime != nil {
		c.Acquired = l.Spec.AcquireTime.Time
	}
	c.Renewed = c.Acquired
	if l.Spec.RenewTime != nil {
		c.Renewed = l.Spec.RenewTime.Time
	}
	dur := ClaimTTL
	if l.Spec.LeaseDurationSeconds != nil {
		dur = time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second
	}
	c.Expires = c.Renewed.Add(dur)
	c.Connected, _ = time.Parse(leaseTimeFormat, l.Annotations[AnnConnectedAt])
	c.Disconnected, _ = time.Parse(leaseTimeFormat, l.Annotations[AnnDisconnectedAt])
	return c, nil
}
