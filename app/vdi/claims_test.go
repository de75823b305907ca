package vdi_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/corral-dev/corral/app/vdi"
	"github.com/corral-dev/corral/app/vdi/claimtest"
	"github.com/corral-dev/corral/store"
)

func openStore(tb testing.TB) *store.Store {
	tb.Helper()
	st, err := store.Open(context.Background(), filepath.Join(tb.TempDir(), "c.db"), store.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { st.Close() })
	return st
}

func TestSQLClaims(t *testing.T) {
	claimtest.Run(t, "-", func(t *testing.T) vdi.ClaimStore { return vdi.NewSQLClaims(openStore(t)) })
}

// kubeClient connects to the test API server of hack/testenv.sh. Without
// one the test is skipped, or failed under CORRAL_REQUIRE_ENGINES=1. Tests
// read TEST_KUBECONFIG, never KUBECONFIG, so they cannot touch a real
// cluster.
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
	// The broker's own client settings, so the race measures them.
	return kubernetes.NewForConfigOrDie(vdi.ClientConfig(cfg, "corral-test"))
}

// namespace creates a fresh namespace for one test.
func namespace(tb testing.TB, kube kubernetes.Interface) string {
	tb.Helper()
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := "corral-vdi-" + hex.EncodeToString(b[:])
	ctx := context.Background()
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		tb.Fatalf("create namespace: %v", err)
	}
	tb.Cleanup(func() { _ = kube.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	return name
}

func TestLeaseClaims(t *testing.T) {
	kube := kubeClient(t)
	// Every case gets a namespace of its own, named by the suite.
	ns := namespace(t, kube)
	claimtest.Run(t, ns, func(t *testing.T) vdi.ClaimStore {
		list, err := kube.CoordinationV1().Leases(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range list.Items {
			if err := kube.CoordinationV1().Leases(ns).Delete(context.Background(), l.Name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		return vdi.NewLeaseClaims(kube, "test")
	})
}

// raceStores returns n claim stores over one backing state, standing
// for n broker processes, and the namespace to race in.
type raceStores func(tb testing.TB, n int) ([]vdi.ClaimStore, string)

func sqliteRace(tb testing.TB, n int) ([]vdi.ClaimStore, string) {
	path := filepath.Join(tb.TempDir(), "c.db")
	var out []vdi.ClaimStore
	for range n {
		st, err := store.Open(context.Background(), path, store.Options{})
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { st.Close() })
		out = append(out, vdi.NewSQLClaims(st))
	}
	return out, "-"
}

func leaseRace(tb testing.TB, n int) ([]vdi.ClaimStore, string) {
	kube := kubeClient(tb)
	ns := namespace(tb, kube)
	out := []vdi.ClaimStore{vdi.NewLeaseClaims(kube, "test")}
	for len(out) < n {
		out = append(out, vdi.NewLeaseClaims(kubeClient(tb), "test"))
	}
	return out, ns
}

// The claim race of DESIGN.md section 9: 200 concurrent claimants over
// 100 members give exactly 100 winners and no member twice, and the
// store holds exactly the winners' claims; through the broker's picker,
// and with naive claimants (the compare-and-swap alone keeps claims
// exclusive), each time from two processes at once. Naive claimants
// collide so often that on Leases the race runs 40 over 20 (200 over 100
// takes 20 s here; the outcome is the same).
func TestClaimRace(t *testing.T) {
	for _, tc := range []struct {
		name               string
		open               raceStores
		picker             bool
		claimants, members int
	}{
		{"sqlite/naive", sqliteRace, false, 200, 100},
		{"sqlite/picker", sqliteRace, true, 200, 100},
		{"lease/naive", leaseRace, false, 40, 20},
		{"lease/picker", leaseRace, true, 200, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stores, ns := tc.open(t, 2)
			r := claimtest.Race(t, stores, ns, "race", tc.claimants, tc.members, tc.picker)
			claimtest.CheckRace(t, r, tc.claimants, tc.members)
			stored, err := stores[0].List(context.Background(), "vm", ns, "race")
			if err != nil {
				t.Fatal(err)
			}
			if len(stored) != tc.members {
				t.Fatalf("%d claims stored, want %d", len(stored), tc.members)
			}
			for _, c := range stored {
				if r.Winners[c.Desktop.Member] != c.Holder {
					t.Errorf("%s is held by %s, but %s won it", c.Desktop, c.Holder, r.Winners[c.Desktop.Member])
				}
			}
			t.Logf("%s: p99 claim latency %v (max %v)", tc.name, r.P99(), r.Latencies[len(r.Latencies)-1])
		})
	}
}

// BenchmarkClaimRace measures the p99 latency of one claim in the race
// through the broker's picker (guest boot excluded: the claim only),
// reported as p99-ms: from one broker process, as spec/vdi.md says to
// run it, and from two at once.
func BenchmarkClaimRace(b *testing.B) {
	for _, tc := range []struct {
		name  string
		open  raceStores
		procs int
	}{
		{"sqlite/1proc", sqliteRace, 1},
		{"sqlite/2proc", sqliteRace, 2},
		{"lease/1proc", leaseRace, 1},
		{"lease/2proc", leaseRace, 2},
	} {
		b.Run(tc.name, func(b *testing.B) {
			var p99, worst float64
			n := 0
			for b.Loop() {
				b.StopTimer()
				stores, ns := tc.open(b, tc.procs)
				b.StartTimer()
				r := claimtest.Race(b, stores, ns, "race", 200, 100, true)
				claimtest.CheckRace(b, r, 200, 100)
				p99 += float64(r.P99().Microseconds()) / 1000
				n++
				worst = max(worst, float64(r.Latencies[len(r.Latencies)-1].Microseconds())/1000)
			}
			b.ReportMetric(p99/float64(n), "p99-ms") // the mean of each race's p99
			b.ReportMetric(worst, "max-ms")
		})
	}
}

// BenchmarkClaimOne measures one claim with no contention: the broker's
// path (one List of the pool's claims, one Acquire) into a pool of 100
// members of which the earlier iterations hold some.
func BenchmarkClaimOne(b *testing.B) {
	for _, tc := range []struct {
		name string
		open raceStores
	}{
		{"sqlite", sqliteRace},
		{"lease", leaseRace},
	} {
		b.Run(tc.name, func(b *testing.B) {
			stores, ns := tc.open(b, 1)
			p := vdi.NewPicker()
			pool := vdi.PoolID{Kind: "vm", Namespace: ns, Pool: "one"}
			var members []vdi.DesktopID
			i := 0
			for b.Loop() {
				if len(members) == 0 || i%100 == 0 {
					b.StopTimer()
					pool.Pool = fmt.Sprintf("one%d", i/100)
					members = members[:0]
					for m := range 100 {
						members = append(members, vdi.DesktopID{Kind: "vm", Namespace: ns, Member: fmt.Sprintf("%s-%d", pool.Pool, m+1)})
					}
					b.StartTimer()
				}
				if _, err := p.Pick(context.Background(), stores[0], pool, members, fmt.Sprintf("user%d", i), time.Now(), nil); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}
