package ctpool_test

import (
	"fmt"
	"testing"

	"github.com/corral-dev/corral/app/vdi"
	"github.com/corral-dev/corral/app/vdi/ctpool"
)

// BenchmarkReconcileNoChange: one pass over a pool of 50 members that are
// in line (three lists, nothing written), against the real API server.
func BenchmarkReconcileNoChange(b *testing.B) {
	e := newEnv(b)
	if _, err := e.m.Apply(e.ctx, "desk", ctpool.Spec{Image: "img:1", Size: 50}); err != nil {
		b.Fatal(err)
	}
	if _, err := e.m.Reconcile(e.ctx, "desk"); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		res, err := e.m.Reconcile(e.ctx, "desk")
		if err != nil || len(res.Steps) != 0 {
			b.Fatalf("%v %v", res.Steps, err)
		}
	}
}

// BenchmarkReconcileCreate50: the first pass over a pool of 50: each
// member created under its Lease (Lease create, update and delete, PVC,
// Service, pod).
func BenchmarkReconcileCreate50(b *testing.B) {
	e := newEnv(b)
	n := 0
	for b.Loop() {
		n++
		pool := fmt.Sprintf("p%d", n)
		if _, err := e.m.Apply(e.ctx, pool, ctpool.Spec{Image: "img:1", Size: 50}); err != nil {
			b.Fatal(err)
		}
		if res, err := e.m.Reconcile(e.ctx, pool); err != nil || len(res.Steps) != 50 {
			b.Fatalf("%d steps, %v", len(res.Steps), err)
		}
		// Each member's Service takes a ClusterIP: give them back.
		b.StopTimer()
		if err := e.m.Delete(e.ctx, pool); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}

// BenchmarkClaimRelease: a claim and the ephemeral release that destroys
// the member and makes it again (no kubelet: pod deletion is immediate).
func BenchmarkClaimRelease(b *testing.B) {
	e := newEnv(b)
	if _, err := e.m.Apply(e.ctx, "desk", ctpool.Spec{Image: "img:1", Size: 3}); err != nil {
		b.Fatal(err)
	}
	if _, err := e.m.Reconcile(e.ctx, "desk"); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		c, err := e.m.Claim(e.ctx, "desk", "alice")
		if err != nil {
			b.Fatal(err)
		}
		if r, err := e.m.Release(e.ctx, "desk", c.Member, "alice", false); err != nil || !r.Recreated {
			b.Fatalf("%+v %v", r, err)
		}
	}
}

// BenchmarkSeamMembers: the members of 20 claimed desktops as the admin
// desktops page shows them, through the broker's seam, against the real
// API server: in one call (two lists), and one claim at a time (its PVC
// and pod: what each row cost, beside a read of its pool's ConfigMap,
// before the list).
func BenchmarkSeamMembers(b *testing.B) {
	e := newEnv(b)
	if _, err := e.m.Apply(e.ctx, "desk", ctpool.Spec{Image: "img:1", Size: 20}); err != nil {
		b.Fatal(err)
	}
	if _, err := e.m.Reconcile(e.ctx, "desk"); err != nil {
		b.Fatal(err)
	}
	seam := &ctpool.Seam{Clusters: func() []ctpool.Cluster { return []ctpool.Cluster{{Context: "test", Kube: e.kube}} }}
	var claims []vdi.Claim
	for i := range 20 {
		c, _, err := seam.Claim(e.ctx, vdi.PoolID{Kind: "ct", Namespace: e.ns, Pool: "desk"}, fmt.Sprintf("user%d@example.com", i))
		if err != nil {
			b.Fatal(err)
		}
		claims = append(claims, c)
	}
	b.Run("list", func(b *testing.B) {
		for b.Loop() {
			if vs := seam.Members(e.ctx, claims); len(vs) != 20 || vs[19].Ref == "" {
				b.Fatalf("%+v", vs)
			}
		}
	})
	b.Run("per-claim", func(b *testing.B) {
		for b.Loop() {
			for _, c := range claims {
				if vs := seam.Members(e.ctx, []vdi.Claim{c}); vs[0].Ref == "" {
					b.Fatalf("%+v", vs)
				}
			}
		}
	})
}
