// Package vdi is Corral's VDI: pools of desktops cloned from a golden
// instance, the claims that hand a desktop to one user, the self-service
// broker (claim, start, release), and the sessions and reclaim policy of
// spec/vdi.md.
//
// A claim lives in a ClaimStore. Two implementations, both
// compare-and-swap and run by the same race tests (claimtest): Leases of
// coordination.k8s.io/v1 for pools on KubeVirt contexts, rows in SQLite
// for every other backend.
package vdi

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// ClaimTTL is how long a claim lasts without renewal (spec/vdi.md: a
// Lease expires after an hour that nobody renewed it).
const ClaimTTL = time.Hour

// Reserved identities: they hold claims and audit rows, and no user may
// claim under them.
const (
	// ReconcilerIdentity holds a member's claim while a reconciler (or a
	// release) destroys and recreates it (spec/vdi-ct-pools.md).
	ReconcilerIdentity = "corral-vdi/reconciler"
	// BrokerIdentity is the actor of the reclaim policy's audit rows.
	BrokerIdentity = "corral-vdi/broker"
)

// Errors of the claim contract.
var (
	// ErrClaimed: the desktop has a claim that has not expired.
	ErrClaimed = errors.New("vdi: desktop already claimed")
	// ErrChanged: the claim changed or ended since the caller read it
	// (the compare-and-swap lost).
	ErrChanged = errors.New("vdi: claim changed since read")
	// ErrNoClaim: the desktop has no claim.
	ErrNoClaim = errors.New("vdi: desktop not claimed")
)

// DesktopID names a desktop: kind ("vm" or "ct"), namespace ("-" on
// backends without namespaces) and member name. It stays the same across
// claims.
type DesktopID struct {
	Kind      string
	Namespace string
	Member    string
}

func (d DesktopID) String() string { return d.Kind + "/" + d.Namespace + "/" + d.Member }

// PoolID names a pool the same way: kind, namespace, pool name.
type PoolID struct {
	Kind      string
	Namespace string
	Pool      string
}

func (p PoolID) String() string { return p.Kind + "/" + p.Namespace + "/" + p.Pool }

// ParsePoolID parses "kind/namespace/pool".
func ParsePoolID(s string) (PoolID, error) {
	k, ns, name, err := split3(s)
	return PoolID{Kind: k, Namespace: ns, Pool: name}, err
}

// ParseDesktopID parses "kind/namespace/member".
func ParseDesktopID(s string) (DesktopID, error) {
	k, ns, name, err := split3(s)
	return DesktopID{Kind: k, Namespace: ns, Member: name}, err
}

func split3(s string) (string, string, string, error) {
	p := strings.Split(s, "/")
	if len(p) != 3 || p[0] == "" || p[1] == "" || p[2] == "" {
		return "", "", "", fmt.Errorf("vdi: %q is not KIND/NAMESPACE/NAME", s)
	}
	if p[0] != "vm" && p[0] != "ct" {
		return "", "", "", fmt.Errorf("vdi: kind %q: accepted are vm and ct", p[0])
	}
	return p[0], p[1], p[2], nil
}

// Claim is the ownership of one desktop by one holder.
type Claim struct {
	Desktop DesktopID
	Pool    string // pool name (the pool's namespace and kind are the desktop's)
	Holder  string
	// Session changes with every claim of the desktop.
	Session  string
	Acquired time.Time
	Renewed  time.Time
	// Expires is Renewed + ClaimTTL: past it, Acquire may replace the
	// claim.
	Expires time.Time
	// Connected and Disconnected are the session marks: the start and the
	// end of the last connected period (zero when there was none).
	Connected    time.Time
	Disconnected time.Time
	// Version is the compare-and-swap token (a Lease's resourceVersion, a
	// row's version); callers pass it back unchanged.
	Version string
}

// Expired reports whether the claim expired at now.
func (c Claim) Expired(now time.Time) bool { return !now.Before(c.Expires) }

// WasConnected reports whether the last mark is a connect without a
// disconnect after it.
func (c Claim) WasConnected() bool {
	return !c.Connected.IsZero() && c.Connected.After(c.Disconnected)
}

// ClaimStore keeps claims. Every change is a compare-and-swap: of
// concurrent writers to one desktop exactly one succeeds.
type ClaimStore interface {
	// Acquire claims d for holder at now: it succeeds when d has no claim
	// (first writer wins) or when d's claim expired (the stale claim is
	// replaced, guarded by its version). It returns ErrClaimed when an
	// unexpired claim holds d, whoever holds it.
	Acquire(ctx context.Context, d DesktopID, pool, holder string, now time.Time) (Claim, error)
	// Update writes c's holder, times and marks if the claim is still at
	// c.Version; ErrChanged otherwise. Renewal is an Update with Renewed
	// and Expires moved on.
	Update(ctx context.Context, c Claim) (Claim, error)
	// Release ends c if the claim is still at c.Version; ErrChanged
	// otherwise.
	Release(ctx context.Context, c Claim) error
	// Get returns d's claim, or ErrNoClaim.
	Get(ctx context.Context, d DesktopID) (Claim, error)
	// List returns the claims of pool (of kind, in namespace); an empty
	// pool lists every pool's, an empty kind or namespace every kind's or
	// namespace's.
	List(ctx context.Context, kind, namespace, pool string) ([]Claim, error)
}

// CachedLister is a claim store that can also list from a cache that may
// be a moment behind, and answers sooner than List. The picker chooses
// its candidates from it: a compare-and-swap decides every claim, so a
// member the cache still shows free but someone claimed fails its
// Acquire with ErrClaimed and the picker tries the next one; a release
// the cache has not seen yet makes a claimant of a full pool hear "no
// free members" as if it had come a moment earlier.
type CachedLister interface {
	ListCached(ctx context.Context, kind, namespace, pool string) ([]Claim, error)
}

// Renew returns c renewed at now: Renewed now, Expires an hour later.
func Renew(c Claim, now time.Time) Claim {
	c.Renewed, c.Expires = now, now.Add(ClaimTTL)
	return c
}

// Reserved reports whether holder is an identity no user may claim as:
// none, or one of Corral's own (corral-vdi/..., the reconciler and the
// broker among them).
func Reserved(holder string) bool {
	return holder == "" || strings.HasPrefix(holder, "corral-vdi/")
}
