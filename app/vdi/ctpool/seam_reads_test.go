package ctpool_test

import (
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/corral-dev/corral/app/vdi"
	"github.com/corral-dev/corral/app/vdi/ctpool"
)

// recorder keeps the requests a client sends ("GET /api/v1/...").
type recorder struct {
	rt   http.RoundTripper
	mu   sync.Mutex
	reqs []string
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	r.mu.Lock()
	r.reqs = append(r.reqs, req.Method+" "+req.URL.Path)
	r.mu.Unlock()
	return r.rt.RoundTrip(req)
}

// take returns the requests since the last take.
func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.reqs
	r.reqs = nil
	return out
}

// recordingClient is kubeClient with its requests recorded.
func recordingClient(t *testing.T) (kubernetes.Interface, *recorder) {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", os.Getenv("TEST_KUBECONFIG"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.QPS, cfg.Burst = 500, 500
	rec := &recorder{}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { rec.rt = rt; return rec })
	return kubernetes.NewForConfigOrDie(cfg), rec
}

func count(reqs []string, what string) int {
	n := 0
	for _, r := range reqs {
		if strings.Contains(r, what) {
			n++
		}
	}
	return n
}

// TestSeamReads: what the broker's CT seam asks the API server. An
// operation reads its pool's ConfigMap once; a desktop's member is its
// PVC and pod; a list of desktops is two lists per namespace, whatever
// the number of claims; a session mark on one cluster is one update.
func TestSeamReads(t *testing.T) {
	e := newEnv(t) // skips without a test API server
	e.apply("desk", ctpool.Spec{Image: "img:1", Size: 3})
	e.reconcile("desk")
	kube, rec := recordingClient(t)
	seam := &ctpool.Seam{Clusters: func() []ctpool.Cluster { return []ctpool.Cluster{{Context: "test", Kube: kube}} }}
	pool := vdi.PoolID{Kind: "ct", Namespace: e.ns, Pool: "desk"}

	var claims []vdi.Claim
	for _, who := range []string{"alice@example.com", "bob@example.com", "carol@example.com"} {
		c, _, err := seam.Claim(e.ctx, pool, who)
		if err != nil {
			t.Fatalf("claim for %s: %v", who, err)
		}
		claims = append(claims, c)
		if reqs := rec.take(); count(reqs, "GET /api/v1/namespaces/"+e.ns+"/configmaps/") != 1 {
			t.Errorf("a claim read the pool's ConfigMap %d times, want once: %q", count(reqs, "/configmaps/"), reqs)
		}
	}

	views := seam.Members(e.ctx, claims)
	if reqs := rec.take(); len(reqs) != 2 || count(reqs, "/configmaps") != 0 {
		t.Errorf("the members of 3 claims took %d requests, want 2 lists: %q", len(reqs), reqs)
	}
	for i, v := range views {
		want := "kubevirt/test/" + e.ns + "/" + claims[i].Desktop.Member
		if v.Ref != want || v.Phase == "Unknown" || v.Phase == "" {
			t.Errorf("member of %s = %+v, want ref %s and its state", claims[i].Desktop, v, want)
		}
	}
	one := seam.Members(e.ctx, claims[:1])
	if reqs := rec.take(); len(reqs) != 2 || count(reqs, "/configmaps") != 0 {
		t.Errorf("the member of one claim took %q, want its PVC and pod", reqs)
	}
	if one[0] != views[0] {
		t.Errorf("one claim's member %+v, in a list %+v", one[0], views[0])
	}

	if err := seam.Start(e.ctx, claims[0]); err != nil {
		t.Fatal(err)
	}
	if reqs := rec.take(); count(reqs, "/configmaps/") != 1 {
		t.Errorf("a start read the pool's ConfigMap %d times, want once: %q", count(reqs, "/configmaps/"), reqs)
	}

	c := claims[0]
	c.Connected = time.Now().Truncate(time.Second)
	if _, err := seam.Update(e.ctx, c); err != nil {
		t.Fatal(err)
	}
	if reqs := rec.take(); len(reqs) != 1 || !strings.HasPrefix(reqs[0], "PATCH ") {
		t.Errorf("a session mark took %q, want one update", reqs)
	}
	if _, err := seam.Update(e.ctx, c); err != vdi.ErrChanged {
		t.Errorf("a stale update: %v, want ErrChanged", err)
	}
}
