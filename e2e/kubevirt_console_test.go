package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/corral-dev/corral/backends/kubevirt/kubelettest"
)

// TestKubeVirtCTConsole opens a privileged CT's console the way a browser
// does, through the whole server: the console page picks the serial
// console, and the WebSocket bridge round-trips bytes through an exec
// that the real API server proxies to a kubelet the test plays.
func TestKubeVirtCTConsole(t *testing.T) {
	k := newKVServer(t)
	ctx := context.Background()
	kl := kubelettest.Start()
	t.Cleanup(kl.Close)
	node := k.ns + "-kubelet"
	if err := kl.RegisterNode(ctx, k.kube, node); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.kube.CoreV1().Nodes().Delete(context.Background(), node, metav1.DeleteOptions{}) })

	var acc errJSON
	body := fmt.Sprintf(`{"context": %q, "name": "shell", "namespace": %q, "image": "docker.io/library/debian:bookworm", "privileged": true}`, k.key, k.ns)
	if st := k.call(t, http.MethodPost, "/api/cts", body, &acc); st != http.StatusAccepted {
		t.Fatalf("create CT: %d %+v", st, acc)
	}
	if tk := k.task(t, acc.Task); tk.Status != "done" {
		t.Fatalf("create CT task: %+v", tk)
	}
	if err := kubelettest.Run(ctx, k.kube, k.ns, "shell", node); err != nil {
		t.Fatal(err)
	}
	ref := k.ref("shell")
	waitFor(t, "the CT running", func() bool {
		var vm struct{ State string }
		return k.call(t, http.MethodGet, "/api/vms/"+ref, "", &vm) == http.StatusOK && vm.State == "running"
	})

	resp, err := http.Get(k.srv.URL + "/console/" + ref)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(page), "/ws/serial/"+ref) {
		t.Fatalf("console page of a CT: %d, want the serial console (/ws/serial/%s)", resp.StatusCode, ref)
	}

	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(dctx, "ws"+strings.TrimPrefix(k.srv.URL, "http")+"/ws/serial/"+ref, nil)
	if err != nil {
		t.Fatalf("dial the serial bridge: %v", err)
	}
	defer c.CloseNow()
	read := func(want string) {
		t.Helper()
		var got strings.Builder
		for !strings.Contains(got.String(), want) {
			_, p, err := c.Read(dctx)
			if err != nil {
				t.Fatalf("waiting for %q (got %q): %v", want, got.String(), err)
			}
			got.Write(p)
		}
	}
	read(kubelettest.Prompt)
	if err := c.Write(dctx, websocket.MessageBinary, []byte("apt list --installed\n")); err != nil {
		t.Fatal(err)
	}
	read("echo:apt list --installed\n")
	execs := kl.Execs()
	if len(execs) == 0 || !strings.Contains(strings.Join(execs[len(execs)-1].Query["command"], " "), "chroot /persist") {
		t.Errorf("the console of a privileged CT did not enter its persistent root: %v", execs)
	}
}
