package ctpool_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/corral-dev/corral/app/vdi/ctpool"
	"github.com/corral-dev/corral/backends"
)

// TestRBAC: the ClusterRole of deploy/kubernetes/rbac.yaml is enough for
// every ct-pool operation (apply, reconcile, claim, release, watch,
// delete), and an identity without it gets an error that names the
// permissions.
func TestRBAC(t *testing.T) {
	e := newEnv(t)
	cfg, err := clientcmd.BuildConfigFromFlags("", os.Getenv("TEST_KUBECONFIG"))
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile("../../../deploy/kubernetes/rbac.yaml")
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
	role.ObjectMeta = metav1.ObjectMeta{Name: e.ns}
	if _, err := e.kube.RbacV1().ClusterRoles().Create(e.ctx, &role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "corral", Namespace: e.ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "corral", Namespace: "corral"}}}
	if _, err := e.kube.RbacV1().RoleBindings(e.ns).Create(e.ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = e.kube.RbacV1().ClusterRoles().Delete(context.Background(), role.Name, metav1.DeleteOptions{})
	})
	as := func(user string) *ctpool.Manager {
		c := rest.CopyConfig(cfg)
		c.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:serviceaccounts", "system:authenticated"}}
		c.QPS, c.Burst = 500, 500 // client-go's default of 5 a second would measure its own limiter
		return ctpool.New(kubernetes.NewForConfigOrDie(c), ctpool.Options{Context: "test", Namespace: e.ns})
	}
	if _, err := as("system:serviceaccount:corral:nobody").Apply(e.ctx, "desk", ctpool.Spec{Image: "img:1", Size: 1}); !errors.Is(err, backends.ErrFailed) || !strings.Contains(err.Error(), "rbac.yaml") {
		t.Errorf("without the role: %v, want an error naming the permissions", err)
	}
	m := as("system:serviceaccount:corral:corral")
	if _, err := m.Apply(e.ctx, "desk", ctpool.Spec{Image: "img:1", Size: 1}); err != nil {
		t.Fatalf("apply: %v", err)
	}
	ctx, cancel := context.WithCancel(e.ctx)
	passes := make(chan ctpool.Result, 100)
	done := make(chan error, 1)
	go func() {
		done <- m.Watch(ctx, "desk", time.Hour, func(r ctpool.Result, err error) {
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
	e.setPhase("desk-1", corev1.PodFailed) // seen through the pod informer
	wait("replace desk-1")
	cancel()
	<-done
	c, err := m.Claim(e.ctx, "desk", "alice")
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	if e.pvc(c.Member).Annotations[ctpool.AnnAssignedTo] != "alice" {
		t.Errorf("the holder's copy on the PVC was not written")
	}
	if _, err := m.Release(e.ctx, "desk", c.Member, "alice", false); err != nil {
		t.Fatalf("release: %v", err)
	}
	patch := []byte(`{"data":{"spec":"{\"image\":\"img:1\",\"size\":2}"}}`)
	if _, err := e.kube.CoreV1().ConfigMaps(e.ns).Patch(e.ctx, ctpool.ConfigMapName("desk"), types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Reconcile(e.ctx, "desk"); err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	if err := m.Delete(e.ctx, "desk"); err != nil {
		t.Fatalf("delete: %v", err)
	}
}
