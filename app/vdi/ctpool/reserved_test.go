package ctpool_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/corral-dev/corral/app/vdi"
	"github.com/corral-dev/corral/app/vdi/ctpool"
	"github.com/corral-dev/corral/backends"
)

// TestClaimReservedIdentity: an empty or reserved identity cannot claim
// a CT member, through the manager or the broker's seam, with one
// message; the pool stays unclaimed.
func TestClaimReservedIdentity(t *testing.T) {
	e := newEnv(t) // skips without a test API server
	e.apply("desk", ctpool.Spec{Image: "img:1", Size: 1})
	e.reconcile("desk")
	seam := &ctpool.Seam{Clusters: func() []ctpool.Cluster { return []ctpool.Cluster{{Context: "test", Kube: e.kube}} }}
	want := "cannot claim a desktop: it is empty or a reserved identity (corral-vdi/...)"
	for _, who := range []string{"", vdi.ReconcilerIdentity} {
		if _, err := e.m.Claim(e.ctx, "desk", who); !errors.Is(err, backends.ErrInvalid) || !strings.Contains(err.Error(), want) {
			t.Errorf("manager claim as %q: %v, want %q", who, err, want)
		}
		if _, _, err := seam.Claim(e.ctx, vdi.PoolID{Kind: "ct", Namespace: e.ns, Pool: "desk"}, who); !errors.Is(err, backends.ErrInvalid) || !strings.Contains(err.Error(), want) {
			t.Errorf("seam claim as %q: %v, want %q", who, err, want)
		}
	}
	if st := e.status("desk"); st.Claimed != 0 {
		t.Errorf("claimed after the refusals: %+v", st)
	}
}
