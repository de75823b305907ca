package vdi_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/corral-dev/corral/app/vdi"
	"github.com/corral-dev/corral/backends"
)

// unreadCT is a CT seam holding one claim whose member it reads as view:
// only the claim lookups and the member read are used by Connect and the
// name lookup.
type unreadCT struct {
	vdi.CTPools // nil: any other call panics
	claim       vdi.Claim
	view        vdi.MemberView
	claimsErr   error // what Claims answers
}

func (u unreadCT) Claims(context.Context) ([]vdi.Claim, error) {
	if u.claimsErr != nil {
		return nil, u.claimsErr
	}
	return []vdi.Claim{u.claim}, nil
}

func (u unreadCT) Get(_ context.Context, d vdi.DesktopID) (vdi.Claim, error) {
	if d != u.claim.Desktop {
		return vdi.Claim{}, vdi.ErrNoClaim
	}
	return u.claim, nil
}

func (u unreadCT) Members(_ context.Context, cs []vdi.Claim) []vdi.MemberView {
	out := make([]vdi.MemberView, len(cs))
	for i := range cs {
		out[i] = u.view
	}
	return out
}

// TestConnectCTMemberUnread: Connect on a CT desktop whose member could
// not be read answers why (the cluster unreachable: a 503 naming the
// context), not that its pool is gone; a member no cluster has is a 404
// that says the member was not found.
func TestConnectCTMemberUnread(t *testing.T) {
	claim := vdi.Claim{Desktop: vdi.DesktopID{Kind: "ct", Namespace: "ns", Member: "desk-1"}, Pool: "desk", Holder: alice.Login,
		Acquired: t0, Renewed: t0, Expires: t0.Add(time.Hour), Version: "1"}
	for _, tc := range []struct {
		name string
		view vdi.MemberView
		kind error
		has  string
	}{
		{"unreachable", vdi.MemberView{Phase: "Unknown", Err: backends.Unavailable("edge", errors.New("dial tcp: refused"))},
			backends.ErrUnavailable, "context edge is unreachable"},
		{"not found", vdi.MemberView{Phase: "Unknown"}, backends.ErrNotFound, "desktop ct/ns/desk-1: member not found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, vdi.Options{CT: unreadCT{claim: claim, view: tc.view}})
			_, err := e.svc.Connect(context.Background(), alice, "ct/ns/desk-1")
			if !errors.Is(err, tc.kind) || !strings.Contains(backends.SafeMessage(err), tc.has) || strings.Contains(err.Error(), "is gone") {
				t.Fatalf("connect = %v, want kind %v saying %q", err, tc.kind, tc.has)
			}
		})
	}
}

// TestResolveDesktopCTUnreadable: a member name looked up while the CT
// claims cannot be read is that error (503 naming the context), not "no
// desktop named X", unless a VM desktop has the name.
func TestResolveDesktopCTUnreadable(t *testing.T) {
	down := backends.Unavailable("edge", errors.New("dial tcp: refused"))
	e := newEnv(t, vdi.Options{CT: unreadCT{claimsErr: down}})
	e.pool(t, 1, false)
	ctx := context.Background()
	for _, tc := range []struct{ kind, name, want string }{{"", "desk-1", "vm/-/desk-1"}, {"vm", "desk-1", "vm/-/desk-1"}} {
		if got, err := e.svc.ResolveDesktopKind(ctx, tc.kind, tc.name); err != nil || got != tc.want {
			t.Errorf("resolve %s (kind %q) = %q, %v; want %s", tc.name, tc.kind, got, err, tc.want)
		}
	}
	for _, tc := range []struct{ kind, name string }{{"", "lab-1"}, {"ct", "lab-1"}, {"ct", "desk-1"}} {
		if got, err := e.svc.ResolveDesktopKind(ctx, tc.kind, tc.name); !errors.Is(err, backends.ErrUnavailable) || !strings.Contains(err.Error(), "context edge is unreachable") {
			t.Errorf("resolve %s (kind %q) with the CT claims unreadable = %q, %v; want Unavailable naming the context", tc.name, tc.kind, got, err)
		}
	}
}
