package ctpool_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/corral-dev/corral/app/vdi"
	"github.com/corral-dev/corral/app/vdi/ctpool"
	"github.com/corral-dev/corral/backends"
)

// TestMembersUnread: the seam's members of claims it could not read
// carry the reason (a list the identity may not make: the failure with
// the permissions to grant; an unreachable cluster: the context) and are
// never taken for Missing; a member its namespace's list lacks is.
func TestMembersUnread(t *testing.T) {
	e := newEnv(t) // skips without a test API server
	e.apply("desk", ctpool.Spec{Image: "img:1", Size: 1})
	e.reconcile("desk")
	// An identity that may read pods and PVCs in e.ns only.
	user := "corral-members-" + e.ns
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "members", Namespace: e.ns},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods", "persistentvolumeclaims"}, Verbs: []string{"get", "list"}}}}
	if _, err := e.kube.RbacV1().Roles(e.ns).Create(e.ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "members", Namespace: e.ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "members"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: user}}}
	if _, err := e.kube.RbacV1().RoleBindings(e.ns).Create(e.ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", os.Getenv("TEST_KUBECONFIG"))
	if err != nil {
		t.Fatal(err)
	}
	cfg = rest.CopyConfig(cfg)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}}
	cfg.QPS, cfg.Burst = 500, 500
	seam := &ctpool.Seam{Clusters: func() []ctpool.Cluster {
		return []ctpool.Cluster{{Context: "test", Kube: kubernetes.NewForConfigOrDie(cfg)}}
	}}
	claim := func(ns, member string) vdi.Claim {
		return vdi.Claim{Desktop: vdi.DesktopID{Kind: "ct", Namespace: ns, Member: member}, Pool: "desk", Holder: "alice@example.com"}
	}
	listed, absent, refused := claim(e.ns, "desk-1"), claim(e.ns, "desk-9"), claim("kube-system", "desk-1")

	// The binding takes a moment to reach the authorizer: the listed
	// namespace's member is read once it has.
	var views []vdi.MemberView
	for range 100 {
		views = seam.Members(e.ctx, []vdi.Claim{listed, absent, refused})
		if views[0].Err == nil {
			break
		}
	}
	if v := views[0]; v.Err != nil || v.Ref != "kubevirt/test/"+e.ns+"/desk-1" || v.Phase == "Unknown" {
		t.Errorf("the listed member = %+v, want its ref and state", v)
	}
	if v := views[1]; v.Err != nil || v.Phase != "Missing" {
		t.Errorf("a member its namespace's list lacks = %+v, want Missing", v)
	}
	if v := views[2]; !errors.Is(v.Err, backends.ErrFailed) || !strings.Contains(backends.SafeMessage(v.Err), "rbac.yaml") || v.Ref != "" || v.Phase != "Unknown" {
		t.Errorf("a member in a namespace the identity may not list = %+v, want its error naming the permissions and no ref", v)
	}
	if v := seam.Members(e.ctx, []vdi.Claim{refused})[0]; !errors.Is(v.Err, backends.ErrFailed) || v.Ref != "" {
		t.Errorf("one member the identity may not read = %+v, want its error", v)
	}

	// An unreachable cluster (here: a cancelled call).
	gone, cancel := context.WithCancel(e.ctx)
	cancel()
	for n, cs := range map[string][]vdi.Claim{"one": {listed}, "several": {listed, absent}} {
		for _, v := range seam.Members(gone, cs) {
			if !errors.Is(v.Err, backends.ErrUnavailable) || !strings.Contains(backends.SafeMessage(v.Err), "context test is unreachable") || v.Phase != "Unknown" {
				t.Errorf("%s member(s) of an unreachable cluster: %+v, want Unavailable naming the context", n, v)
			}
		}
	}
}
