package ctpool_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/corral-dev/corral/app/auth"
	"github.com/corral-dev/corral/app/vdi"
	"github.com/corral-dev/corral/app/vdi/ctpool"
	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/store"
)

// TestCTConnect: Connect of spec/vdi.md on a CT desktop, against the
// real API server: the holder (and an admin) get the member's terminal
// as the only target once its pod is ready; another user gets 403; a
// member not yet running, and an expired claim, a 409 with the action to
// take; a released desktop a 404. The CLI's name lookup finds the CT
// desktop by its member name, or by --kind ct.
func TestCTConnect(t *testing.T) {
	e := newSessEnv(t)
	svc := e.broker(ctPolicy)
	e.claim(t, svc)
	if _, err := svc.Connect(e.ctx, ctAlice, e.desk); !errors.Is(err, backends.ErrConflict) || !strings.Contains(err.Error(), "Ready") {
		t.Fatalf("connect to a starting member: %v, want a Conflict to wait until it is Ready", err)
	}
	e.setPhase("desk-1", corev1.PodRunning)
	want := "/console/kubevirt/test/" + e.ns + "/desk-1?kind=serial"
	for _, who := range []auth.Identity{ctAlice, {Login: "root@example.com", Admin: true}} {
		c, err := svc.Connect(e.ctx, who, e.desk)
		if err != nil {
			t.Fatalf("connect as %s: %v", who.Login, err)
		}
		if c.Desktop != e.desk || c.Owner != ctAlice.Login || c.Ref != e.ref.String() ||
			c.Target != (vdi.ConnectOption{Protocol: vdi.ProtoTerminal, Kind: "serial", URL: want}) || len(c.Fallbacks) != 0 || len(c.Skipped) != 0 {
			t.Fatalf("connect as %s = %+v, want the terminal %s only", who.Login, c, want)
		}
	}
	if _, err := svc.Connect(e.ctx, ctBob, e.desk); !errors.Is(err, backends.ErrForbidden) {
		t.Fatalf("connect as another user: %v, want Forbidden", err)
	}
	// The CLI's lookup of a bare member name (a pool name no other test
	// of this API server uses: every namespace's claims are searched).
	e.apply("lookup", ctpool.Spec{Image: "img:1", Size: 1})
	e.reconcile("lookup")
	if _, err := svc.Claim(e.ctx, ctAlice, "rest", "ct/"+e.ns+"/lookup"); err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{"", "ct"} {
		if got, err := svc.ResolveDesktopKind(e.ctx, kind, "lookup-1"); err != nil || got != "ct/"+e.ns+"/lookup-1" {
			t.Errorf("resolve lookup-1 (kind %q) = %q, %v", kind, got, err)
		}
	}
	if _, err := svc.ResolveDesktopKind(e.ctx, "vm", "lookup-1"); !errors.Is(err, backends.ErrNotFound) {
		t.Errorf("resolve lookup-1 as a VM desktop: %v, want NotFound", err)
	}
	// Nobody renews the Lease (no pass): past its hour it expired.
	e.clock.At(2 * time.Hour)
	if _, err := svc.Connect(e.ctx, ctAlice, e.desk); !errors.Is(err, backends.ErrConflict) || !strings.Contains(err.Error(), "claim the pool ct/"+e.ns+"/desk again") {
		t.Fatalf("connect with an expired claim: %v, want a Conflict to claim again", err)
	}
	e.clock.At(0)
	tk, err := svc.Release(e.ctx, ctAlice, "rest", e.desk)
	if err != nil {
		t.Fatal(err)
	}
	e.waitTask(t, tk.ID)
	if _, err := svc.Connect(e.ctx, ctAlice, e.desk); !errors.Is(err, backends.ErrNotFound) {
		t.Fatalf("connect after the release: %v, want NotFound", err)
	}
}

// waitTask waits for task id to end and fails unless it ended done.
func (e *sessEnv) waitTask(t *testing.T, id string) {
	t.Helper()
	for range 3000 {
		tk, _, err := e.tm.Get(e.ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if tk.Status != store.TaskRunning {
			if tk.Status != store.TaskDone {
				t.Fatalf("task %+v", tk)
			}
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("task %s did not end", id)
}
