package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// TestCTPoolCommands drives `corral vdi ct-pool` against the API server
// of hack/testenv.sh as kubectl's current context: apply (which
// reconciles once), status, claim twice, a refused release, a release,
// delete.
func TestCTPoolCommands(t *testing.T) {
	path := os.Getenv("TEST_KUBECONFIG")
	if path == "" {
		if os.Getenv("CORRAL_REQUIRE_ENGINES") == "1" {
			t.Fatalf("engine: TEST_KUBECONFIG is not set: run the test through hack/testenv.sh")
		}
		t.Skipf("engine: TEST_KUBECONFIG is not set: run the test through hack/testenv.sh")
	}
	t.Setenv("KUBECONFIG", path)
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatal(err)
	}
	kube := kubernetes.NewForConfigOrDie(cfg)
	var b [4]byte
	_, _ = rand.Read(b[:])
	ns := "corral-ctcli-" + hex.EncodeToString(b[:])
	ctx := context.Background()
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kube.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	corral := func(wantErr string, args ...string) string {
		t.Helper()
		var out bytes.Buffer
		err := run(ctx, append([]string{"vdi", "ct-pool"}, args...), &out)
		switch {
		case wantErr == "" && err != nil:
			t.Fatalf("corral vdi ct-pool %s: %v\n%s", strings.Join(args, " "), err, out.String())
		case wantErr != "" && (err == nil || !strings.Contains(err.Error(), wantErr)):
			t.Fatalf("corral vdi ct-pool %s: %v, want an error with %q", strings.Join(args, " "), err, wantErr)
		}
		return out.String()
	}
	has := func(out string, want ...string) {
		t.Helper()
		for _, w := range want {
			if !strings.Contains(out, w) {
				t.Fatalf("output lacks %q:\n%s", w, out)
			}
		}
	}
	has(corral("", "apply", "desk", "-n", ns, "--image", "ghcr.io/example/desktop:1", "--size", "2", "--mem", "2Gi"),
		"CT pool "+ns+"/desk applied: image ghcr.io/example/desktop:1, size 2", "create desk-1\ncreate desk-2", "desired 2, observed 2")
	has(corral("", "status", "desk", "-n", ns), "desk-1", "Starting", "free 2")
	has(corral("", "claim", "-n", ns, "desk", "alice@example.com"), "alice@example.com claimed desk-1")
	has(corral("", "claim", "-n", ns, "desk", "alice@example.com"), "alice@example.com already holds desk-1")
	corral("reserved identity", "claim", "-n", ns, "desk", "corral-vdi/reconciler")
	corral("only its holder may release it", "release", "-n", ns, "desk", "desk-1", "bob")
	has(corral("", "apply", "desk", "-n", ns, "--image", "ghcr.io/example/desktop:2"), "image ghcr.io/example/desktop:2, size 2", "replace desk-2")
	has(corral("", "status", "desk", "-n", ns), "alice@example.com", "drift")
	has(corral("", "list", "-n", ns), "desk", "image ghcr.io/example/desktop:2, size 2")
	has(corral("", "release", "-n", ns, "desk", "desk-1", "alice@example.com"), "released desk-1 (held by alice@example.com): destroyed and made again")
	has(corral("", "reconcile", "desk", "-n", ns), "no change", "free 2")
	corral("mode persistent", "apply", "desk", "-n", ns, "--mode", "persistent")
	has(corral("", "delete", "-n", ns, "desk"), "deleted")
	corral("does not exist", "status", "desk", "-n", ns)
}
