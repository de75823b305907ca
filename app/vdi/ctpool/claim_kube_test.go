package ctpool_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/corral-dev/corral/app/vdi"
	"github.com/corral-dev/corral/app/vdi/ctpool"
	"github.com/corral-dev/corral/backends"
)

// TestClaimAndRelease: the claim contract and an ephemeral release that
// destroys and recreates the member.
func TestClaimAndRelease(t *testing.T) {
	e := newEnv(t)
	e.apply("desk", ctpool.Spec{Image: "img:1", Size: 2})
	e.reconcile("desk")
	if _, err := e.m.Claim(e.ctx, "desk", vdi.ReconcilerIdentity); !errors.Is(err, backends.ErrInvalid) {
		t.Errorf("claim as the reconciler: %v, want Invalid", err)
	}
	a, err := e.m.Claim(e.ctx, "desk", "alice")
	if err != nil {
		t.Fatal(err)
	}
	again, err := e.m.Claim(e.ctx, "desk", "alice")
	if err != nil || again.Member != a.Member || !again.Again {
		t.Errorf("second claim by alice: %+v %v, want %s again", again, err, a.Member)
	}
	b, err := e.m.Claim(e.ctx, "desk", "bob")
	if err != nil || b.Member == a.Member {
		t.Fatalf("bob: %+v %v", b, err)
	}
	_, err = e.m.Claim(e.ctx, "desk", "carol")
	if !errors.Is(err, backends.ErrConflict) || !strings.Contains(err.Error(), "pool has no free members") || !strings.Contains(err.Error(), "2 desired, 2 claimed, 0 unschedulable") {
		t.Errorf("carol: %v", err)
	}
	if st := e.reconcile("desk").Status; !st.Exhausted || st.Claimed != 2 {
		t.Errorf("status %+v, want exhausted", st)
	}
	// Only the holder releases, or --force.
	if _, err := e.m.Release(e.ctx, "desk", a.Member, "bob", false); !errors.Is(err, backends.ErrForbidden) {
		t.Errorf("bob releases alice's: %v, want Forbidden", err)
	}
	pod, pvc := e.pod(a.Member).UID, e.pvc(a.Member).UID
	rel, err := e.m.Release(e.ctx, "desk", a.Member, "alice", false)
	if err != nil || !rel.Held || !rel.Recreated || rel.Holder != "alice" {
		t.Fatalf("release: %+v %v", rel, err)
	}
	if e.pod(a.Member).UID == pod || e.pvc(a.Member).UID == pvc {
		t.Errorf("the released member was not destroyed and made again")
	}
	if e.pvc(a.Member).Annotations[ctpool.AnnAssignedTo] != "" {
		t.Errorf("the new member carries the old assignment")
	}
	if _, err := e.m.Claims().Get(e.ctx, vdi.DesktopID{Kind: "ct", Namespace: e.ns, Member: a.Member}); !errors.Is(err, vdi.ErrNoClaim) {
		t.Errorf("the Lease is still there: %v", err)
	}
	// A release of a member without a claim does nothing.
	pod = e.pod(a.Member).UID
	if rel, err := e.m.Release(e.ctx, "desk", a.Member, "alice", false); err != nil || rel.Held || e.pod(a.Member).UID != pod {
		t.Errorf("release of a free member: %+v %v", rel, err)
	}
	// carol now gets the free member; an admin force-releases bob's.
	if c, err := e.m.Claim(e.ctx, "desk", "carol"); err != nil || c.Member != a.Member {
		t.Errorf("carol: %+v %v", c, err)
	}
	if rel, err := e.m.Release(e.ctx, "desk", b.Member, "admin", true); err != nil || rel.Holder != "bob" || !rel.Recreated {
		t.Errorf("force release: %+v %v", rel, err)
	}
	// An expired claim still protects its member, and a claim by the
	// same identity renews it.
	cl, err := e.m.Claims().Get(e.ctx, vdi.DesktopID{Kind: "ct", Namespace: e.ns, Member: a.Member})
	if err != nil {
		t.Fatal(err)
	}
	cl.Renewed, cl.Expires = time.Now().Add(-2*time.Hour), time.Now().Add(-time.Hour)
	if _, err := e.m.Claims().Update(e.ctx, cl); err != nil {
		t.Fatal(err)
	}
	if d, err := e.m.Claim(e.ctx, "desk", "dave"); err != nil || d.Member == a.Member {
		t.Errorf("dave: %+v %v, must not get carol's expired member", d, err)
	}
	if c, err := e.m.Claim(e.ctx, "desk", "carol"); err != nil || c.Member != a.Member || c.Claim.Expired(time.Now()) {
		t.Errorf("carol again: %+v %v, want her member renewed", c, err)
	}
}

// TestPersistentRefused: mode persistent fails at apply, reconcile,
// claim and release with the explicit error.
func TestPersistentRefused(t *testing.T) {
	e := newEnv(t)
	if _, err := e.m.Apply(e.ctx, "desk", ctpool.Spec{Image: "img:1", Size: 1, Mode: "persistent"}); !errors.Is(err, backends.ErrInvalid) || !strings.Contains(err.Error(), "use a VM pool") {
		t.Errorf("apply: %v", err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: ctpool.ConfigMapName("desk"), Labels: map[string]string{ctpool.LabelPool: "desk"}},
		Data: map[string]string{"spec": "image: img:1\nsize: 1\nmode: persistent\n"}}
	if _, err := e.kube.CoreV1().ConfigMaps(e.ns).Create(e.ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.Reconcile(e.ctx, "desk"); !errors.Is(err, backends.ErrInvalid) {
		t.Errorf("reconcile: %v", err)
	}
	if _, err := e.m.Claim(e.ctx, "desk", "alice"); !errors.Is(err, backends.ErrInvalid) {
		t.Errorf("claim: %v", err)
	}
	if _, err := e.m.Release(e.ctx, "desk", "desk-1", "alice", false); !errors.Is(err, backends.ErrInvalid) {
		t.Errorf("release: %v", err)
	}
	if got := e.members("desk"); len(got) != 0 {
		t.Errorf("members %v", got)
	}
	if err := e.m.Delete(e.ctx, "desk"); err != nil {
		t.Errorf("delete: %v", err)
	}
	if _, err := e.m.Get(e.ctx, "desk"); !errors.Is(err, backends.ErrNotFound) {
		t.Errorf("after delete: %v", err)
	}
}

// TestUnschedulableAndDelete: an unschedulable member shows the
// scheduler's message and is not free; delete keeps a pool with a
// claimed member and removes it all once it is released.
func TestUnschedulableAndDelete(t *testing.T) {
	e := newEnv(t)
	e.apply("desk", ctpool.Spec{Image: "img:1", Size: 2})
	e.reconcile("desk")
	e.setPhase("desk-2", corev1.PodPending, corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
		Reason: corev1.PodReasonUnschedulable, Message: "0/1 nodes are available: 1 Insufficient memory."})
	st := e.reconcile("desk").Status
	if r := row(st, "desk-2"); r.State != ctpool.Unschedulable || r.Message != "0/1 nodes are available: 1 Insufficient memory." {
		t.Errorf("desk-2 row %+v", r)
	}
	if st.Unschedulable != 1 || st.Free != 1 {
		t.Errorf("status %+v", st)
	}
	if _, err := e.m.Claim(e.ctx, "desk", "alice"); err != nil {
		t.Fatal(err)
	}
	_, err := e.m.Claim(e.ctx, "desk", "bob")
	if err == nil || !strings.Contains(err.Error(), "2 desired, 1 claimed, 1 unschedulable") {
		t.Errorf("bob: %v", err)
	}
	if err := e.m.Delete(e.ctx, "desk"); !errors.Is(err, backends.ErrConflict) || !strings.Contains(err.Error(), "desk-1") {
		t.Errorf("delete with a claimed member: %v", err)
	}
	if got := strings.Join(e.members("desk"), ","); got != "desk-1" {
		t.Errorf("members %s, want the claimed desk-1", got)
	}
	if _, err := e.m.Release(e.ctx, "desk", "desk-1", "root", true); err != nil {
		t.Fatal(err)
	}
	if err := e.m.Delete(e.ctx, "desk"); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if _, err := e.m.Get(e.ctx, "desk"); !errors.Is(err, backends.ErrNotFound) {
		t.Errorf("the definition is still there: %v", err)
	}
	for _, list := range []func() (int, error){
		func() (int, error) {
			l, err := e.kube.CoreV1().Pods(e.ns).List(e.ctx, metav1.ListOptions{})
			return len(l.Items), err
		},
		func() (int, error) {
			l, err := e.kube.CoreV1().PersistentVolumeClaims(e.ns).List(e.ctx, metav1.ListOptions{})
			return len(l.Items), err
		},
		func() (int, error) {
			l, err := e.kube.CoreV1().Services(e.ns).List(e.ctx, metav1.ListOptions{})
			return len(l.Items), err
		},
		func() (int, error) {
			l, err := e.kube.CoordinationV1().Leases(e.ns).List(e.ctx, metav1.ListOptions{})
			return len(l.Items), err
		},
	} {
		if n, err := list(); err != nil || n != 0 {
			t.Errorf("%d objects left (%v)", n, err)
		}
	}
}

// TestWatch: reconcile --watch replaces a member that fails, through
// the pod informer (the interval is an hour, so only the event can do it).
func TestWatch(t *testing.T) {
	e := newEnv(t)
	e.apply("desk", ctpool.Spec{Image: "img:1", Size: 1})
	ctx, cancel := context.WithCancel(e.ctx)
	passes := make(chan ctpool.Result, 100)
	done := make(chan error, 1)
	go func() {
		done <- e.m.Watch(ctx, "desk", time.Hour, func(r ctpool.Result, err error) {
			if err != nil {
				t.Errorf("pass: %v", err)
			}
			passes <- r
		})
	}()
	wait := func(step string) {
		t.Helper()
		deadline := time.After(time.Minute)
		for {
			select {
			case r := <-passes:
				if slices.Contains(r.Steps, step) {
					return
				}
			case <-deadline:
				t.Fatalf("no pass did %q within a minute", step)
			}
		}
	}
	wait("create desk-1")
	uid := e.pod("desk-1").UID
	e.setPhase("desk-1", corev1.PodFailed)
	wait("replace desk-1")
	if e.pod("desk-1").UID == uid {
		t.Errorf("desk-1 not replaced")
	}
	// The spec changes: the ConfigMap informer triggers a pass.
	patch := []byte(`{"data":{"spec":"{\"image\":\"img:1\",\"size\":2}"}}`)
	if _, err := e.kube.CoreV1().ConfigMaps(e.ns).Patch(e.ctx, ctpool.ConfigMapName("desk"), types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	wait("create desk-2")
	cancel()
	if err := <-done; err != nil {
		t.Errorf("watch: %v", err)
	}
}
