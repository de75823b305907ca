package ctpool_test

import (
	"errors"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/corral-dev/corral/app/auth"
	"github.com/corral-dev/corral/app/fleet"
	"github.com/corral-dev/corral/app/tasks"
	"github.com/corral-dev/corral/app/vdi"
	"github.com/corral-dev/corral/app/vdi/ctpool"
	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/store"
)

// TestBroker: the broker of app/vdi serves a CT pool through the seam:
// listed beside the VM pools, claimed by a user, hidden from another,
// released as a task that destroys and recreates the member.
func TestBroker(t *testing.T) {
	e := newEnv(t)
	e.apply("desk", ctpool.Spec{Image: "img:1", Size: 2})
	e.reconcile("desk")
	st, err := store.Open(e.ctx, filepath.Join(t.TempDir(), "c.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	tm := tasks.New(st, tasks.Options{})
	t.Cleanup(tm.Close)
	svc := vdi.New(vdi.Options{Fleet: fleet.New(fleet.Options{Timeout: time.Minute}), Tasks: tm, Store: st, Log: slog.New(slog.DiscardHandler),
		CT: &ctpool.Seam{Clusters: func() []ctpool.Cluster { return []ctpool.Cluster{{Context: "test", Kube: e.kube}} }}})
	alice := auth.Identity{Login: "alice@example.com"}
	bob := auth.Identity{Login: "bob@example.com"}
	id := "ct/" + e.ns + "/desk"
	ps, err := svc.BrokerPools(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(ps, func(p vdi.PoolSummary) bool { return p.ID == id })
	if i < 0 || ps[i].Members != 2 || ps[i].Free != 2 || !ps[i].Ephemeral {
		t.Fatalf("pools %+v, want %s with 2 free", ps, id)
	}
	d, err := svc.Claim(e.ctx, alice, "rest", id)
	if err != nil {
		t.Fatal(err)
	}
	if d.ID != "ct/"+e.ns+"/desk-1" || d.Owner != alice.Login || d.Phase != "Starting" || d.Ref != "kubevirt/test/"+e.ns+"/desk-1" {
		t.Errorf("desktop %+v", d)
	}
	if again, err := svc.Claim(e.ctx, alice, "rest", id); err != nil || again.ID != d.ID {
		t.Errorf("alice again: %+v %v", again, err)
	}
	if ds, _ := svc.Desktops(e.ctx, alice, false); len(ds) != 1 || ds[0].ID != d.ID {
		t.Errorf("alice's desktops %+v", ds)
	}
	if ds, _ := svc.Desktops(e.ctx, bob, false); len(ds) != 0 {
		t.Errorf("bob's desktops %+v", ds)
	}
	if _, err := svc.Desktop(e.ctx, bob, d.ID); !errors.Is(err, backends.ErrForbidden) {
		t.Errorf("bob reads alice's: %v", err)
	}
	if _, err := svc.Release(e.ctx, bob, "rest", d.ID); !errors.Is(err, backends.ErrForbidden) {
		t.Errorf("bob releases alice's: %v", err)
	}
	uid := e.pod("desk-1").UID
	tk, err := svc.Release(e.ctx, alice, "rest", d.ID)
	if err != nil {
		t.Fatal(err)
	}
	for range 1000 {
		if tk, _, err = tm.Get(e.ctx, tk.ID); err != nil || tk.Status != store.TaskRunning {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if tk.Status != store.TaskDone {
		t.Fatalf("release task %+v", tk)
	}
	if e.pod("desk-1").UID == uid {
		t.Errorf("the released member was not recreated")
	}
	if _, err := svc.Desktop(e.ctx, alice, d.ID); !errors.Is(err, backends.ErrNotFound) {
		t.Errorf("released desktop: %v, want NotFound", err)
	}
	rows, err := st.ListAudit(e.ctx, store.AuditFilter{})
	if err != nil {
		t.Fatal(err)
	}
	var acts []string
	for _, r := range rows {
		acts = append(acts, r.Action)
	}
	if all := strings.Join(acts, ","); !strings.Contains(all, "vdi claim") || !strings.Contains(all, "vdi release") {
		t.Errorf("audit actions %v", acts)
	}
}
