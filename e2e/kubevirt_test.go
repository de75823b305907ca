package e2e

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/corral-dev/corral/app"
	"github.com/corral-dev/corral/app/fleet"
)

// TestKubeVirtOnDashboard runs the whole server with a KubeVirt context
// from the test API server (hack/testenv.sh) beside simulated ones. The
// inventory's timer is set to an hour, so a VM that someone else creates
// can only reach the dashboard through the backend's watch.
func TestKubeVirtOnDashboard(t *testing.T) {
	kubeconfig := os.Getenv("TEST_KUBECONFIG")
	if kubeconfig == "" {
		requireEngine(t, "TEST_KUBECONFIG is not set: run the test through hack/testenv.sh")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	kube := kubernetes.NewForConfigOrDie(cfg)
	dyn := dynamic.NewForConfigOrDie(cfg)
	ns := fmt.Sprintf("corral-e2e-%d", time.Now().UnixNano()%1e6)
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	a, err := app.New(ctx, app.Config{DataDir: t.TempDir(), Demo: true, DemoSize: 9, Kubeconfig: kubeconfig,
		RefreshInterval: time.Hour, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	a.Start(ctx)
	srv := httptest.NewServer(a.Handler())
	defer srv.Close()

	// Wait for the first refresh of the KubeVirt context, so what follows
	// cannot be explained by it.
	key := ""
	waitFor(t, "the KubeVirt context's first refresh", func() bool {
		for _, c := range a.Fleet.Snapshot().Contexts {
			if c.Backend == "kubevirt" && c.Health == fleet.HealthOK {
				key = c.Key
				return true
			}
		}
		return false
	})

	vmGVR := schema.GroupVersionResource{Group: "kubevirt.io", Version: "v1", Resource: "virtualmachines"}
	vm := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
		"metadata": map[string]any{"name": "made-elsewhere", "namespace": ns},
		"spec": map[string]any{"runStrategy": "Halted", "template": map[string]any{"spec": map[string]any{
			"domain": map[string]any{"cpu": map[string]any{"cores": int64(2)}, "memory": map[string]any{"guest": "1Gi"}, "devices": map[string]any{}},
		}}},
	}}
	if _, err := dyn.Resource(vmGVR).Namespace(ns).Create(ctx, vm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	defer dyn.Resource(vmGVR).Namespace(ns).Delete(context.Background(), "made-elsewhere", metav1.DeleteOptions{})

	ref := "kubevirt/" + strings.TrimPrefix(key, "kubevirt/") + "/" + ns + "/made-elsewhere"
	var page string
	waitFor(t, "the VM on the dashboard", func() bool {
		resp, err := http.Get(srv.URL + "/?q=made-elsewhere")
		if err != nil {
			return false
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		page = string(b)
		return strings.Contains(page, "/vm/"+ref)
	})
	// Beside the other backends: the tree lists the simulated contexts too.
	for _, want := range []string{key, "sim/lab", "qemu/local"} {
		if !strings.Contains(page, want) {
			t.Errorf("the dashboard does not show the context %s beside the KubeVirt one", want)
		}
	}
	// The VM page reads it live from the API server.
	resp, err := http.Get(srv.URL + "/vm/" + ref)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "1Gi") {
		t.Fatalf("VM page = %d, want the VM with 1Gi of memory", resp.StatusCode)
	}
}

// waitFor polls cond until it holds, for at most 60 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
