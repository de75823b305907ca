package schedule_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/corral-dev/corral/app/fleet"
	"github.com/corral-dev/corral/app/folders"
	"github.com/corral-dev/corral/app/instances"
	"github.com/corral-dev/corral/app/schedule"
	"github.com/corral-dev/corral/app/tasks"
	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/backends/kubevirt"
	"github.com/corral-dev/corral/store"
)

// requireKube returns TEST_KUBECONFIG, set by hack/testenv.sh, or skips
// (fails under CORRAL_REQUIRE_ENGINES=1). Never KUBECONFIG: a test must
// not touch a real cluster.
func requireKube(t *testing.T) string {
	t.Helper()
	path := os.Getenv("TEST_KUBECONFIG")
	if path == "" {
		if os.Getenv("CORRAL_REQUIRE_ENGINES") == "1" {
			t.Fatalf("engine: TEST_KUBECONFIG is not set: run the test through hack/testenv.sh")
		}
		t.Skipf("engine: TEST_KUBECONFIG is not set: run the test through hack/testenv.sh")
	}
	return path
}

// TestInClusterCronJob: an in-cluster schedule of a KubeVirt VM is a
// CronJob the real kube-apiserver accepts, with the schedule's cron
// expression, time zone and labels, run as a ServiceAccount that may only
// patch VirtualMachines; disabling suspends it, deleting the schedule
// deletes it, and the local tick never runs it.
func TestInClusterCronJob(t *testing.T) {
	path := requireKube(t)
	ctx := context.Background()
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatal(err)
	}
	kc := kubernetes.NewForConfigOrDie(cfg)
	var b [4]byte
	_, _ = rand.Read(b[:])
	ns := "corral-sched-" + hex.EncodeToString(b[:])
	if _, err := kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { kc.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })

	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "c.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	kv, err := kubevirt.New(kubevirt.Options{Context: "test", Kubeconfig: path})
	if err != nil {
		t.Fatal(err)
	}
	f := fleet.New(fleet.Options{Logger: log})
	if err := f.Add(kv); err != nil {
		t.Fatal(err)
	}
	tm := tasks.New(st, tasks.Options{Logger: log})
	defer tm.Close()
	in := instances.New(f, tm, st, log)
	svc := schedule.New(st, f, tm, folders.New(st, f, tm, in, folders.Options{}), in, schedule.Options{Logger: log,
		CronJobs: &schedule.KubeCronJobs{Clients: func(string) (kubernetes.Interface, error) { return kc, nil }}})

	ref := "kubevirt/test/" + ns + "/web"
	_, sc, err := svc.Create(ctx, admin, schedule.Request{Ref: ref, Kind: "power", Action: "start", Cron: "0 8 * * 1-5", TZ: "Europe/Berlin", InCluster: true})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	cj, err := kc.BatchV1().CronJobs(ns).Get(ctx, schedule.CronJobName(sc.ID), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the CronJob was not made: %v", err)
	}
	if cj.Spec.Schedule != "0 8 * * 1-5" || cj.Spec.TimeZone == nil || *cj.Spec.TimeZone != "Europe/Berlin" || cj.Spec.Suspend == nil || *cj.Spec.Suspend {
		t.Errorf("spec: schedule %q, timeZone %v, suspend %v", cj.Spec.Schedule, cj.Spec.TimeZone, cj.Spec.Suspend)
	}
	if cj.Labels[schedule.LabelVM] != "web" || cj.Labels[schedule.LabelSchedule] != itoa(sc.ID) || cj.Labels[schedule.LabelManagedBy] != "corral" {
		t.Errorf("labels %v", cj.Labels)
	}
	pod := cj.Spec.JobTemplate.Spec.Template.Spec
	env := map[string]string{}
	for _, e := range pod.Containers[0].Env {
		env[e.Name] = e.Value
	}
	if pod.ServiceAccountName != schedule.SchedulerAccount || env["RUN_STRATEGY"] != "Always" || env["VM_NAME"] != "web" || env["VM_NAMESPACE"] != ns {
		t.Errorf("pod: account %q, env %v", pod.ServiceAccountName, env)
	}
	role, err := kc.RbacV1().Roles(ns).Get(ctx, schedule.SchedulerAccount, metav1.GetOptions{})
	if err != nil || len(role.Rules) != 1 || role.Rules[0].Resources[0] != "virtualmachines" || len(role.Rules[0].Verbs) != 2 {
		t.Errorf("role: %+v, %v", role, err)
	}
	if _, err := kc.RbacV1().RoleBindings(ns).Get(ctx, schedule.SchedulerAccount, metav1.GetOptions{}); err != nil {
		t.Errorf("rolebinding: %v", err)
	}

	// A second schedule in the namespace shares the account; stop halts.
	_, sc2, err := svc.Create(ctx, admin, schedule.Request{Ref: ref, Kind: "power", Action: "stop", Cron: "30 18 * * 1-5", TZ: "UTC", InCluster: true})
	if err != nil {
		t.Fatalf("second create: %v", err)
	}
	cj2, err := kc.BatchV1().CronJobs(ns).Get(ctx, schedule.CronJobName(sc2.ID), metav1.GetOptions{})
	if err != nil || cj2.Spec.JobTemplate.Spec.Template.Spec.Containers[0].Env[2].Value != "Halted" || *cj2.Spec.TimeZone != "UTC" {
		t.Fatalf("second CronJob: %v", err)
	}

	// The local tick leaves in-cluster schedules to the cluster.
	if fired, err := svc.Tick(ctx, time.Now().Add(48*time.Hour)); err != nil || len(fired) != 0 {
		t.Fatalf("the local tick ran in-cluster schedules: %+v, %v", fired, err)
	}

	if _, err := svc.SetEnabled(ctx, admin, sc.ID, false); err != nil {
		t.Fatal(err)
	}
	cj, _ = kc.BatchV1().CronJobs(ns).Get(ctx, schedule.CronJobName(sc.ID), metav1.GetOptions{})
	if cj.Spec.Suspend == nil || !*cj.Spec.Suspend {
		t.Errorf("a disabled schedule's CronJob is not suspended")
	}
	if _, err := svc.Delete(ctx, admin, sc.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := kc.BatchV1().CronJobs(ns).Get(ctx, schedule.CronJobName(sc.ID), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("after delete the CronJob: %v", err)
	}
	if _, err := kc.BatchV1().CronJobs(ns).Get(ctx, schedule.CronJobName(sc2.ID), metav1.GetOptions{}); err != nil {
		t.Errorf("the other schedule's CronJob went too: %v", err)
	}

	// A namespace that does not exist: 400, and nothing is stored.
	_, _, err = svc.Create(ctx, admin, schedule.Request{Ref: "kubevirt/test/no-such-ns-" + hex.EncodeToString(b[:]) + "/web", Kind: "power", Action: "start", Cron: "0 8 * * *", InCluster: true})
	if !errors.Is(err, backends.ErrInvalid) {
		t.Errorf("missing namespace: %v", err)
	}
	if list, _ := svc.List(ctx); len(list) != 1 {
		t.Errorf("schedules after a failed in-cluster create: %d, want 1", len(list))
	}
}

// TestInClusterRBAC: the ClusterRole of deploy/kubernetes/rbac.yaml lets
// Corral's ServiceAccount make and delete an in-cluster schedule's
// CronJob, ServiceAccount, Role and RoleBinding (the API server's
// escalation check included), and a ServiceAccount without it is a 403.
func TestInClusterRBAC(t *testing.T) {
	path := requireKube(t)
	ctx := context.Background()
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatal(err)
	}
	kc := kubernetes.NewForConfigOrDie(cfg)
	var b [4]byte
	_, _ = rand.Read(b[:])
	suffix := hex.EncodeToString(b[:])
	ns := "corral-rbac-" + suffix
	if _, err := kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { kc.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })

	// The ClusterRole as deploy/kubernetes/rbac.yaml has it, bound under a
	// name of this test's own to a ServiceAccount of this test's own.
	data, err := os.ReadFile("../../deploy/kubernetes/rbac.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var role rbacv1.ClusterRole
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var doc map[string]any
		if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if doc["kind"] == "ClusterRole" {
			j, _ := json.Marshal(doc)
			if err := json.Unmarshal(j, &role); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(role.Rules) == 0 {
		t.Fatal("deploy/kubernetes/rbac.yaml has no ClusterRole")
	}
	role.ObjectMeta = metav1.ObjectMeta{Name: "corral-sched-" + suffix}
	if _, err := kc.RbacV1().ClusterRoles().Create(ctx, &role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	sa := "corral-" + suffix
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: "corral"}}}
	if _, err := kc.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		kc.RbacV1().ClusterRoleBindings().Delete(context.Background(), role.Name, metav1.DeleteOptions{})
		kc.RbacV1().ClusterRoles().Delete(context.Background(), role.Name, metav1.DeleteOptions{})
	})
	as := func(user string) *schedule.KubeCronJobs {
		c := rest.CopyConfig(cfg)
		c.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:serviceaccounts", "system:authenticated"}}
		k := kubernetes.NewForConfigOrDie(c)
		return &schedule.KubeCronJobs{Clients: func(string) (kubernetes.Interface, error) { return k, nil }}
	}
	sc := store.Schedule{ID: 7, TargetKind: schedule.TargetInstance, Kind: schedule.KindPower, Action: "stop", Cron: "0 19 * * 1-5", TZ: "Europe/Berlin", Enabled: true}
	ref := backends.InstanceRef{Backend: backends.KindKubeVirt, Context: "test", Namespace: ns, Name: "web"}

	err = as("system:serviceaccount:corral:nobody").Apply(ctx, sc, ref)
	if !errors.Is(err, backends.ErrForbidden) {
		t.Fatalf("without the binding: %v, want Forbidden", err)
	}
	k := as("system:serviceaccount:corral:" + sa)
	if err := k.Apply(ctx, sc, ref); err != nil {
		t.Fatalf("Apply as Corral's ServiceAccount: %v", err)
	}
	sc.Enabled = false
	if err := k.Apply(ctx, sc, ref); err != nil {
		t.Fatalf("Apply (suspend) as Corral's ServiceAccount: %v", err)
	}
	if cj, err := kc.BatchV1().CronJobs(ns).Get(ctx, schedule.CronJobName(7), metav1.GetOptions{}); err != nil || !*cj.Spec.Suspend {
		t.Fatalf("after the update: %v", err)
	}
	if err := k.Delete(ctx, sc, ref); err != nil {
		t.Fatalf("Delete as Corral's ServiceAccount: %v", err)
	}
	if _, err := kc.BatchV1().CronJobs(ns).Get(ctx, schedule.CronJobName(7), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("after Delete: %v", err)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
