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
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/corral-dev/corral/app/vdi"
	"github.com/corral-dev/corral/app/vdi/ctpool"
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
	t    testing.TB
	kube kubernetes.Interface
	ns   string
	m    *ctpool.Manager
	ctx  context.Context
}

func newEnv(t testing.TB) *env {
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
