package ctpool

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/corral-dev/corral/app/vdi"
)

func TestPlan(t *testing.T) {
	for _, tc := range []struct {
		name string
		m    Member
		want Action
	}{
		{"missing", Member{State: Missing}, Create},
		{"stopped", Member{State: Stopped}, Start},
		{"starting", Member{State: Starting}, None},
		{"ready", Member{State: Ready}, None},
		{"unschedulable waits for the scheduler", Member{State: Unschedulable}, None},
		{"failed", Member{State: Failed}, Replace},
		{"drifted", Member{State: Ready, Drift: true}, Replace},
		{"drifted and stopped", Member{State: Stopped, Drift: true}, Replace},
		{"terminating", Member{State: Terminating}, None},
		{"surplus", Member{State: Ready, Surplus: true}, Delete},
		{"surplus failed", Member{State: Failed, Surplus: true}, Delete},
		{"surplus missing", Member{State: Missing, Surplus: true}, None},
		{"claimed failed", Member{State: Failed, Holder: "alice"}, None},
		{"claimed drifted", Member{State: Ready, Drift: true, Holder: "alice"}, None},
		{"claimed surplus", Member{State: Ready, Surplus: true, Holder: "alice"}, None},
		{"claimed missing", Member{State: Missing, Holder: "alice"}, None},
		{"expired claim still protects", Member{State: Failed, Holder: "alice", Expired: true}, None},
		{"another reconciler works on it", Member{State: Missing, Maintenance: true}, None},
		{"a reconciler's Lease expired: taken over", Member{State: Missing, Maintenance: true, Expired: true}, Create},
	} {
		if got := plan(tc.m); got != tc.want {
			t.Errorf("%s: plan = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestFree(t *testing.T) {
	for _, tc := range []struct {
		m    Member
		want bool
	}{
		{Member{State: Ready}, true},
		{Member{State: Starting}, true},
		{Member{State: Stopped}, true},
		{Member{State: Unschedulable}, false},
		{Member{State: Failed}, false},
		{Member{State: Missing}, false},
		{Member{State: Terminating}, false},
		{Member{State: Ready, Holder: "a"}, false},
		{Member{State: Ready, Maintenance: true}, false},
		{Member{State: Ready, Drift: true}, false},
		{Member{State: Ready, Surplus: true}, false},
	} {
		if got := tc.m.Free(); got != tc.want {
			t.Errorf("%+v: Free = %v, want %v", tc.m, got, tc.want)
		}
	}
}

func TestMemberState(t *testing.T) {
	now := metav1.Now()
	pvc := &corev1.PersistentVolumeClaim{}
	pod := func(phase corev1.PodPhase, conds ...corev1.PodCondition) *corev1.Pod {
		return &corev1.Pod{Status: corev1.PodStatus{Phase: phase, Conditions: conds, Message: "boom"}}
	}
	deleting := pod(corev1.PodRunning)
	deleting.DeletionTimestamp = &now
	goingPVC := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &now}}
	for _, tc := range []struct {
		name string
		o    observed
		want State
		msg  string
	}{
		{"nothing", observed{}, Missing, ""},
		{"pvc only", observed{pvc: pvc}, Stopped, ""},
		{"pending", observed{pvc, pod(corev1.PodPending)}, Starting, ""},
		{"no phase yet", observed{pvc, pod("")}, Starting, ""},
		{"unschedulable", observed{pvc, pod(corev1.PodPending, corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
			Reason: corev1.PodReasonUnschedulable, Message: "0/3 nodes are available: insufficient memory"})}, Unschedulable, "0/3 nodes are available: insufficient memory"},
		{"running", observed{pvc, pod(corev1.PodRunning)}, Ready, ""},
		{"running, not ready", observed{pvc, pod(corev1.PodRunning, corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionFalse})}, Starting, ""},
		{"running, ready", observed{pvc, pod(corev1.PodRunning, corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue})}, Ready, ""},
		{"failed", observed{pvc, pod(corev1.PodFailed)}, Failed, "boom"},
		{"ended", observed{pvc, pod(corev1.PodSucceeded)}, Stopped, "the pod ended"},
		{"pod deleting", observed{pvc, deleting}, Terminating, ""},
		{"pvc deleting", observed{pvc: goingPVC}, Terminating, ""},
		{"pod without pvc", observed{pod: pod(corev1.PodRunning)}, Failed, "the member's data volume is missing"},
	} {
		got, msg := memberState(tc.o)
		if got != tc.want || msg != tc.msg {
			t.Errorf("%s: state %s %q, want %s %q", tc.name, got, msg, tc.want, tc.msg)
		}
	}
}

func TestObserve(t *testing.T) {
	spec := Spec{Image: "img:1", Size: 3}.WithDefaults()
	src := spec.Source()
	lbl := func(source string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Labels: map[string]string{LabelSource: source}}
	}
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	objs := map[string]observed{
		"desk-1": {pvc: &corev1.PersistentVolumeClaim{ObjectMeta: lbl(src)}, pod: &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodRunning}}},
		"desk-2": {pvc: &corev1.PersistentVolumeClaim{ObjectMeta: lbl("old")}},
		"desk-5": {pvc: &corev1.PersistentVolumeClaim{ObjectMeta: lbl(src)}},
	}
	claims := []vdi.Claim{
		{Desktop: vdi.DesktopID{Kind: "ct", Member: "desk-2"}, Holder: "alice", Expires: now.Add(-time.Minute)},
		{Desktop: vdi.DesktopID{Kind: "ct", Member: "desk-3"}, Holder: vdi.ReconcilerIdentity, Expires: now.Add(time.Minute)},
	}
	rows := observe("desk", spec, objs, claims, now)
	var names []string
	for _, r := range rows {
		names = append(names, r.Name)
	}
	if got := strings.Join(names, ","); got != "desk-1,desk-2,desk-3,desk-5" {
		t.Fatalf("rows %s, want desk-1,desk-2,desk-3,desk-5", got)
	}
	want := []Member{
		{Name: "desk-1", Index: 1, State: Ready},
		{Name: "desk-2", Index: 2, State: Stopped, Holder: "alice", Expired: true, Drift: true},
		{Name: "desk-3", Index: 3, State: Missing, Maintenance: true},
		{Name: "desk-5", Index: 5, State: Stopped, Surplus: true},
	}
	for i := range want {
		if rows[i] != want[i] {
			t.Errorf("row %d = %+v, want %+v", i, rows[i], want[i])
		}
	}
	st := summarize(spec, rows, nil)
	if st.Desired != 3 || st.Observed != 3 || st.Ready != 1 || st.Claimed != 1 || st.Free != 1 || st.Exhausted {
		t.Errorf("status %+v", st)
	}
	rows[0].Holder = "bob"
	if st := summarize(spec, rows, nil); !st.Exhausted || st.Free != 0 {
		t.Errorf("no free member: exhausted %v free %d, want true 0", st.Exhausted, st.Free)
	}
}

func TestSpec(t *testing.T) {
	a := Spec{Image: "img:1", Memory: "1Gi", Disk: "5Gi"}.WithDefaults()
	b := Spec{Image: "img:1", Memory: "1024Mi", Disk: "5120Mi", Size: 7}.WithDefaults()
	if a.Source() != b.Source() {
		t.Errorf("1Gi and 1024Mi (and another size) are different sources")
	}
	for _, c := range []Spec{{Image: "img:2"}, {Image: "img:1", CPU: 2}, {Image: "img:1", Memory: "2Gi"}, {Image: "img:1", Disk: "6Gi"},
		{Image: "img:1", StorageClass: "fast"}, {Image: "img:1", Privileged: true}, {Image: "img:1", Init: true}} {
		if c.WithDefaults().Source() == a.Source() {
			t.Errorf("%+v: same source as %+v", c, a)
		}
	}
	for _, tc := range []struct {
		s    Spec
		want string
	}{
		{Spec{}, "image is required"},
		{Spec{Image: "http://x/y"}, "not an OCI image reference"},
		{Spec{Image: "i", Size: -1}, "accepted is 0 to 1000"},
		{Spec{Image: "i", Memory: "lots"}, "memory \"lots\": accepted is a size"},
		{Spec{Image: "i", Disk: "-1Gi"}, "disk \"-1Gi\""},
		{Spec{Image: "i", Mode: "persistent"}, "mode persistent, which CT pools do not support"},
		{Spec{Image: "i", Mode: "other"}, "accepted is ephemeral"},
	} {
		err := tc.s.WithDefaults().Validate("desk")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.s, err, tc.want)
		}
	}
	if _, err := ParseSpec([]byte("image: x\nsize: 2\nreplicas: 3\n")); err == nil || !strings.Contains(err.Error(), "accepted fields") {
		t.Errorf("unknown field: %v", err)
	}
	s, err := ParseSpec([]byte("image: x\nsize: 2\nmemory: 2Gi\nprivileged: true\n"))
	if err != nil || s.Image != "x" || s.Size != 2 || s.Memory != "2Gi" || !s.Privileged {
		t.Errorf("ParseSpec = %+v, %v", s, err)
	}
	for name, want := range map[string]int{"desk-1": 1, "desk-12": 12, "desk-0": 0, "desk-01": 0, "desk-x": 0, "other-1": 0, "desk-": 0} {
		if got := memberIndex("desk", name); got != want {
			t.Errorf("memberIndex(%s) = %d, want %d", name, got, want)
		}
	}
	if err := ValidatePoolName(strings.Repeat("a", 51)); err == nil {
		t.Errorf("a 51-character pool name was accepted")
	}
}
