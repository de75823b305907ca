package ctpool_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/corral-dev/corral/app/vdi"
	"github.com/corral-dev/corral/app/vdi/ctpool"
	"github.com/corral-dev/corral/backends"
)

// kubeClient connects to the API server of hack/testenv.sh; without one
// the test is skipped, or failed under CORRAL_REQUIRE_ENGINES=1. There is
// no kubelet and no scheduler: the tests set pod phases themselves.
func kubeClient(tb testing.TB) kubernetes.Interface {
	tb.Helper()
	path := os.Getenv("TEST_KUBECONFIG")
	if path == "" {
		if os.Getenv("CORRAL_REQUIRE_ENGINES") == "1" {
			tb.Fatalf("engine: TEST_KUBECONFIG is not set: run the test through hack/testenv.sh")
		}
		tb.Skipf("engine: TEST_KUBECONFIG is not set: run the test through hack/testenv.sh")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		tb.Fatalf("TEST_KUBECONFIG: %v", err)
	}
	cfg.QPS, cfg.Burst = 500, 500
	return kubernetes.NewForConfigOrDie(cfg)
}

// env is one test's namespace and manager.
type env struct {
	t    *testing.T
	kube kubernetes.Interface
	ns   string
	m    *ctpool.Manager
	ctx  context.Context
}

func newEnv(t *testing.T) *env {
	t.Helper()
	kube := kubeClient(t)
	var b [4]byte
	_, _ = rand.Read(b[:])
	ns := "corral-ctpool-" + hex.EncodeToString(b[:])
	ctx := context.Background()
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	t.Cleanup(func() { _ = kube.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	return &env{t: t, kube: kube, ns: ns, m: ctpool.New(kube, ctpool.Options{Context: "test", Namespace: ns, DeleteWait: 30 * time.Second}), ctx: ctx}
}

func (e *env) apply(pool string, s ctpool.Spec) {
	e.t.Helper()
	if _, err := e.m.Apply(e.ctx, pool, s); err != nil {
		e.t.Fatalf("apply %s: %v", pool, err)
	}
}

func (e *env) reconcile(pool string) ctpool.Result {
	e.t.Helper()
	res, err := e.m.Reconcile(e.ctx, pool)
	if err != nil {
		e.t.Fatalf("reconcile %s: %v", pool, err)
	}
	return res
}

func (e *env) pod(name string) *corev1.Pod {
	e.t.Helper()
	p, err := e.kube.CoreV1().Pods(e.ns).Get(e.ctx, name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatalf("pod %s: %v", name, err)
	}
	return p
}

func (e *env) pvc(member string) *corev1.PersistentVolumeClaim {
	e.t.Helper()
	p, err := e.kube.CoreV1().PersistentVolumeClaims(e.ns).Get(e.ctx, member+"-data", metav1.GetOptions{})
	if err != nil {
		e.t.Fatalf("pvc of %s: %v", member, err)
	}
	return p
}

// setPhase does what a kubelet would: it writes the pod's status.
func (e *env) setPhase(name string, phase corev1.PodPhase, conds ...corev1.PodCondition) {
	e.t.Helper()
	p := e.pod(name)
	p.Status.Phase = phase
	p.Status.Conditions = conds
	if phase == corev1.PodFailed {
		p.Status.Message = "the container was OOM-killed"
	}
	if _, err := e.kube.CoreV1().Pods(e.ns).UpdateStatus(e.ctx, p, metav1.UpdateOptions{}); err != nil {
		e.t.Fatalf("set the phase of %s: %v", name, err)
	}
}

// status reads the status the ConfigMap records.
func (e *env) status(pool string) ctpool.Status {
	e.t.Helper()
	cm, err := e.kube.CoreV1().ConfigMaps(e.ns).Get(e.ctx, ctpool.ConfigMapName(pool), metav1.GetOptions{})
	if err != nil {
		e.t.Fatalf("configmap: %v", err)
	}
	var st ctpool.Status
	if err := json.Unmarshal([]byte(cm.Data["status"]), &st); err != nil {
		e.t.Fatalf("status key %q: %v", cm.Data["status"], err)
	}
	return st
}

func row(st ctpool.Status, name string) ctpool.Member {
	for _, m := range st.Members {
		if m.Name == name {
			return m
		}
	}
	return ctpool.Member{}
}

func (e *env) members(pool string) []string {
	e.t.Helper()
	pods, err := e.kube.CoreV1().Pods(e.ns).List(e.ctx, metav1.ListOptions{LabelSelector: ctpool.LabelPool + "=" + pool})
	if err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for _, p := range pods.Items {
		out = append(out, p.Name)
	}
	slices.Sort(out)
	return out
}

// TestApplyCreatesMembers: a pool of 3 gets 3 members, each a pod, a
// data PVC and a Service with the pool's labels and its source; the
// ConfigMap records the status; a second reconcile does nothing.
func TestApplyCreatesMembers(t *testing.T) {
	e := newEnv(t)
	e.apply("desk", ctpool.Spec{Image: "ghcr.io/example/desktop:1", Size: 3, Memory: "2Gi", CPU: 2, StorageClass: "fast"})
	res := e.reconcile("desk")
	if got := strings.Join(res.Steps, ","); got != "create desk-1,create desk-2,create desk-3" {
		t.Errorf("steps %q", got)
	}
	d, err := e.m.Get(e.ctx, "desk")
	if err != nil {
		t.Fatal(err)
	}
	src := d.Spec.Source()
	for _, n := range []string{"desk-1", "desk-2", "desk-3"} {
		pod, pvc := e.pod(n), e.pvc(n)
		svc, err := e.kube.CoreV1().Services(e.ns).Get(e.ctx, n, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("service %s: %v", n, err)
		}
		for what, l := range map[string]map[string]string{"pod": pod.Labels, "pvc": pvc.Labels, "service": svc.Labels} {
			if l[ctpool.LabelPool] != "desk" || l[ctpool.LabelMember] != n || l[ctpool.LabelSource] != src || l["corral.dev/ct"] != n {
				t.Errorf("%s of %s: labels %v", what, n, l)
			}
		}
		c := pod.Spec.Containers[0]
		if c.Image != "ghcr.io/example/desktop:1" || strings.Join(c.Command, " ") != "sleep infinity" ||
			c.Resources.Limits.Memory().String() != "2Gi" || c.Resources.Limits.Cpu().String() != "2" {
			t.Errorf("pod %s: image %s command %v limits %v", n, c.Image, c.Command, c.Resources.Limits)
		}
		if pvc.Spec.StorageClassName == nil || *pvc.Spec.StorageClassName != "fast" || pvc.Spec.Resources.Requests.Storage().String() != "5Gi" {
			t.Errorf("pvc %s: class %v size %v", n, pvc.Spec.StorageClassName, pvc.Spec.Resources.Requests.Storage())
		}
		if pod.Spec.Volumes[0].PersistentVolumeClaim.ClaimName != n+"-data" {
			t.Errorf("pod %s mounts %v", n, pod.Spec.Volumes[0])
		}
	}
	st := e.status("desk")
	if st.Desired != 3 || st.Observed != 3 || st.Free != 3 || st.Ready != 0 || len(st.Members) != 3 || row(st, "desk-2").State != ctpool.Starting {
		t.Errorf("status %+v", st)
	}
	// The kubelet reports two pods running: the status follows.
	e.setPhase("desk-1", corev1.PodRunning)
	e.setPhase("desk-2", corev1.PodRunning, corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue})
	if res := e.reconcile("desk"); len(res.Steps) != 0 {
		t.Errorf("steps %v, want none", res.Steps)
	}
	if st := e.status("desk"); st.Ready != 2 || row(st, "desk-1").State != ctpool.Ready || row(st, "desk-3").State != ctpool.Starting {
		t.Errorf("status after the pods run: %+v", st)
	}
	// Nothing changed: a reconcile writes nothing.
	before, _ := e.kube.CoreV1().ConfigMaps(e.ns).Get(e.ctx, ctpool.ConfigMapName("desk"), metav1.GetOptions{})
	if res := e.reconcile("desk"); len(res.Steps) != 0 {
		t.Errorf("steps %v, want none", res.Steps)
	}
	after, _ := e.kube.CoreV1().ConfigMaps(e.ns).Get(e.ctx, ctpool.ConfigMapName("desk"), metav1.GetOptions{})
	if before.ResourceVersion != after.ResourceVersion {
		t.Errorf("a reconcile with no change wrote the ConfigMap")
	}
	if before.Labels[ctpool.LabelPool] != "desk" {
		t.Errorf("configmap labels %v", before.Labels)
	}
}

// TestFailedAndStoppedMembers: a failed unclaimed member is replaced
// (new pod and PVC), a stopped one started; a failed claimed member is
// left alone; a Lease another reconciler holds keeps the reconcile off
// its member until it expires.
func TestFailedAndStoppedMembers(t *testing.T) {
	e := newEnv(t)
	e.apply("desk", ctpool.Spec{Image: "img:1", Size: 3})
	e.reconcile("desk")
	e.setPhase("desk-1", corev1.PodRunning)
	c, err := e.m.Claim(e.ctx, "desk", "alice@example.com")
	if err != nil || c.Member != "desk-1" {
		t.Fatalf("claim: %+v %v (desk-1 is the only Ready member)", c, err)
	}
	oldPod, oldPVC := e.pod("desk-2").UID, e.pvc("desk-2").UID
	claimedPod := e.pod("desk-1").UID
	e.setPhase("desk-1", corev1.PodFailed)
	e.setPhase("desk-2", corev1.PodFailed)
	if err := e.kube.CoreV1().Pods(e.ns).Delete(e.ctx, "desk-3", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	res := e.reconcile("desk")
	if got := strings.Join(res.Steps, ","); got != "replace desk-2,start desk-3" {
		t.Errorf("steps %q, want replace desk-2,start desk-3", got)
	}
	// status changes nothing: a second read shows the same.
	_, st, err := e.m.Observe(e.ctx, "desk")
	if err != nil {
		t.Fatal(err)
	}
	if r := row(st, "desk-1"); r.State != ctpool.Failed || r.Holder != "alice@example.com" {
		t.Errorf("desk-1 row %+v", r)
	}
	if e.pod("desk-1").UID != claimedPod {
		t.Errorf("the claimed failed member was touched")
	}
	if e.pod("desk-2").UID == oldPod || e.pvc("desk-2").UID == oldPVC {
		t.Errorf("the failed unclaimed member was not replaced (pod and PVC)")
	}
	if p := e.pod("desk-2"); p.Status.Phase == corev1.PodFailed {
		t.Errorf("desk-2 still failed")
	}
	if _, err := e.kube.CoreV1().Pods(e.ns).Get(e.ctx, "desk-3", metav1.GetOptions{}); err != nil {
		t.Errorf("the stopped member was not started: %v", err)
	}
	if r := row(st, "desk-2"); r.State != ctpool.Starting {
		t.Errorf("desk-2 row %+v", r)
	}
	if st.Claimed != 1 || st.Free != 2 {
		t.Errorf("status %+v", st)
	}
	if lease, err := e.m.Claims().Get(e.ctx, vdi.DesktopID{Kind: "ct", Namespace: e.ns, Member: "desk-2"}); !errors.Is(err, vdi.ErrNoClaim) {
		t.Errorf("the reconciler left its Lease: %+v %v", lease, err)
	}

	// Another reconciler holds desk-3's Lease (it stopped mid-step).
	e.setPhase("desk-3", corev1.PodFailed)
	d3 := vdi.DesktopID{Kind: "ct", Namespace: e.ns, Member: "desk-3"}
	other, err := e.m.Claims().Acquire(e.ctx, d3, "desk", vdi.ReconcilerIdentity, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	uid := e.pod("desk-3").UID
	res = e.reconcile("desk")
	if len(res.Steps) != 0 || e.pod("desk-3").UID != uid {
		t.Errorf("a member under another reconciler's Lease was touched: %v", res.Steps)
	}
	if r := row(e.status("desk"), "desk-3"); !r.Maintenance || r.State != ctpool.Failed {
		t.Errorf("desk-3 row %+v", r)
	}
	// Its Lease expired: the next reconcile takes it over.
	other.Renewed, other.Expires = time.Now().Add(-20*time.Minute), time.Now().Add(-10*time.Minute)
	if _, err := e.m.Claims().Update(e.ctx, other); err != nil {
		t.Fatal(err)
	}
	if res := e.reconcile("desk"); strings.Join(res.Steps, ",") != "replace desk-3" {
		t.Errorf("steps %v, want replace desk-3", res.Steps)
	}
	if _, err := e.m.Claims().Get(e.ctx, d3); !errors.Is(err, vdi.ErrNoClaim) {
		t.Errorf("the taken-over Lease is still there: %v", err)
	}
}

// TestDriftAndScaleDown: a new image replaces every unclaimed member and
// leaves the claimed one (drift shown in its row); size 3→1 removes only
// unclaimed members; the claimed member above the size goes at release.
func TestDriftAndScaleDown(t *testing.T) {
	e := newEnv(t)
	e.apply("desk", ctpool.Spec{Image: "img:1", Size: 3})
	e.reconcile("desk")
	e.setPhase("desk-3", corev1.PodRunning)
	c, err := e.m.Claim(e.ctx, "desk", "alice")
	if err != nil || c.Member != "desk-3" {
		t.Fatalf("claim %+v %v, want desk-3 (the Ready member)", c, err)
	}
	if e.pvc("desk-3").Annotations[ctpool.AnnAssignedTo] != "alice" {
		t.Errorf("assignment annotation %v", e.pvc("desk-3").Annotations)
	}
	oldSrc := e.pod("desk-3").Labels[ctpool.LabelSource]
	claimedUID := e.pod("desk-3").UID
	e.apply("desk", ctpool.Spec{Image: "img:2", Size: 3})
	res := e.reconcile("desk")
	if got := strings.Join(res.Steps, ","); got != "replace desk-1,replace desk-2" {
		t.Errorf("steps %q, want replace desk-1,replace desk-2", got)
	}
	if p := e.pod("desk-3"); p.UID != claimedUID || p.Labels[ctpool.LabelSource] != oldSrc || p.Spec.Containers[0].Image != "img:1" {
		t.Errorf("the claimed drifted member was touched")
	}
	if p := e.pod("desk-1"); p.Spec.Containers[0].Image != "img:2" || p.Labels[ctpool.LabelSource] == oldSrc {
		t.Errorf("desk-1 not replaced from the new source: %s", p.Spec.Containers[0].Image)
	}
	st := e.status("desk")
	if r := row(st, "desk-3"); !r.Drift || r.Holder != "alice" {
		t.Errorf("desk-3 row %+v", r)
	}

	// Scale down to 1.
	e.apply("desk", ctpool.Spec{Image: "img:2", Size: 1})
	res = e.reconcile("desk")
	if got := strings.Join(res.Steps, ","); got != "delete desk-2" {
		t.Errorf("steps %q, want delete desk-2", got)
	}
	if got := strings.Join(e.members("desk"), ","); got != "desk-1,desk-3" {
		t.Errorf("members %s, want desk-1,desk-3", got)
	}
	if _, err := e.kube.CoreV1().PersistentVolumeClaims(e.ns).Get(e.ctx, "desk-2-data", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("desk-2's PVC: %v", err)
	}
	if r := row(e.status("desk"), "desk-3"); !r.Surplus || r.Holder != "alice" {
		t.Errorf("desk-3 row %+v", r)
	}
	// Released, the member above the size is not made again.
	rel, err := e.m.Release(e.ctx, "desk", "desk-3", "alice", false)
	if err != nil || !rel.Held || rel.Recreated {
		t.Fatalf("release: %+v %v", rel, err)
	}
	if got := strings.Join(e.members("desk"), ","); got != "desk-1" {
		t.Errorf("members %s, want desk-1", got)
	}
}

// TestTwoReconcilers: reconcilers run at once; each member is made once.
func TestTwoReconcilers(t *testing.T) {
	e := newEnv(t)
	e.apply("desk", ctpool.Spec{Image: "img:1", Size: 6})
	const n = 4
	var wg sync.WaitGroup
	results := make([]ctpool.Result, n)
	errs := make([]error, n)
	for i := range n {
		m := ctpool.New(e.kube, ctpool.Options{Context: "test", Namespace: e.ns})
		wg.Go(func() { results[i], errs[i] = m.Reconcile(e.ctx, "desk") })
	}
	wg.Wait()
	made := map[string]int{}
	for i := range n {
		if errs[i] != nil {
			t.Errorf("reconciler %d: %v", i, errs[i])
		}
		for _, s := range results[i].Steps {
			made[s]++
		}
	}
	if len(made) != 6 {
		t.Errorf("steps %v, want create of each of 6 members", made)
	}
	for s, k := range made {
		if k != 1 || !strings.HasPrefix(s, "create ") {
			t.Errorf("%s done %d times", s, k)
		}
	}
	if got := len(e.members("desk")); got != 6 {
		t.Errorf("%d members, want 6", got)
	}
	leases, _ := e.kube.CoordinationV1().Leases(e.ns).List(e.ctx, metav1.ListOptions{})
	if len(leases.Items) != 0 {
		t.Errorf("%d Leases left", len(leases.Items))
	}
}

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
