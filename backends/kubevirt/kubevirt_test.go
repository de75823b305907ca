package kubevirt_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/backends/backendtest"
	"github.com/corral-dev/corral/backends/kubevirt"
)

// testContext is the context name hack/testenv.sh writes into its
// kubeconfig.
const testContext = "test"

// env is a real API server (hack/testenv.sh) and a fresh namespace with
// the fake KubeVirt controllers running in it.
type env struct {
	kubeconfig string
	cfg        *rest.Config
	dyn        dynamic.Interface
	kube       kubernetes.Interface
	ns         string
}

// requireEngine skips the test when no test API server is configured, or
// fails it when CORRAL_REQUIRE_ENGINES=1 says it must be there. Tests read
// TEST_KUBECONFIG, never KUBECONFIG, so they cannot touch a real cluster.
func requireEngine(t *testing.T) string {
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

// newEnv connects to the test API server and makes a namespace of its own
// for the test, with fake KubeVirt controllers watching it. The namespace
// is deleted afterwards; with no namespace controller it only ever
// reaches Terminating, which is harmless on a throwaway server.
func newEnv(t *testing.T) *env {
	t.Helper()
	path := requireEngine(t)
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatalf("TEST_KUBECONFIG: %v", err)
	}
	cfg.QPS, cfg.Burst = 100, 200
	e := &env{kubeconfig: path, cfg: cfg, dyn: dynamic.NewForConfigOrDie(cfg), kube: kubernetes.NewForConfigOrDie(cfg)}
	e.ns = e.namespace(t, "corral-t")
	startFakeKubeVirt(t, e.dyn, e.ns)
	return e
}

// namespace creates a namespace named prefix-RANDOM for the test.
func (e *env) namespace(t *testing.T, prefix string) string {
	t.Helper()
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := prefix + "-" + hex.EncodeToString(b[:])
	ctx := context.Background()
	if _, err := e.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	t.Cleanup(func() { _ = e.kube.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	return name
}

// backend returns a backend on the test server whose default namespace
// is the env's.
func (e *env) backend(t *testing.T) *kubevirt.Backend {
	t.Helper()
	b, err := kubevirt.New(kubevirt.Options{Context: testContext, Kubeconfig: e.kubeconfig, Namespace: e.ns, Wait: 30 * time.Second})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return b
}

func (e *env) ref(name string) backends.InstanceRef {
	return backends.InstanceRef{Backend: backends.KindKubeVirt, Context: testContext, Namespace: e.ns, Name: name}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func jsonPatch(v any) ([]byte, error) { return json.Marshal(v) }

// TestConformance runs the shared suite. Pause is refused: the test
// server does not serve KubeVirt's aggregated subresources API, which is
// what pause calls (TestPauseSubresource covers a server that does).
// A live snapshot is crash-consistent: the fake VMIs have no guest agent.
func TestConformance(t *testing.T) {
	e := newEnv(t)
	backendtest.Run(t, backendtest.Harness{
		New: func(t *testing.T) backends.Backend { return e.backend(t) },
		Spec: func(_ *testing.T, name string) backends.Spec {
			return backends.Spec{Name: name, Namespace: e.ns, CPUs: 2, MemoryMiB: 512, Image: "quay.io/containerdisks/fedora:42"}
		},
		Settle:          15 * time.Second,
		RunningSnapshot: backends.ConsistencyCrash,
		Pause:           false,
	})
}

func TestKubeconfigContexts(t *testing.T) {
	path := requireEngine(t)
	got, err := kubevirt.ContextsFromKubeconfig(path)
	if err != nil || len(got) != 1 || got[0] != testContext {
		t.Fatalf("ContextsFromKubeconfig = %v, %v; want [%s]", got, err, testContext)
	}
}
