package kubevirt_test

import (
	"bytes"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/apimachinery/pkg/util/httpstream/spdy"

	"github.com/corral-dev/corral/backends"
)

// fakeKubelet serves the kubelet's exec endpoint
// (/exec/NAMESPACE/POD/CONTAINER?command=...) over TLS with the stream
// protocol the API server speaks to kubelets: SPDY with the
// channel.k8s.io subprotocols (the API server translates a client's
// WebSocket into it). It plays a shell that greets, then echoes every
// input as "echo:INPUT", and reports success on the error stream when
// stdin ends.
type fakeKubelet struct {
	srv *httptest.Server
	mu  sync.Mutex
	// what the API server sent: the path and the query of each exec
	paths   []string
	queries []url.Values
	proto   string
	ends    int // execs whose stdin ended (the console closed) and that reported success
}

func startFakeKubelet(t *testing.T) *fakeKubelet {
	k := &fakeKubelet{}
	k.srv = httptest.NewTLSServer(k)
	t.Cleanup(k.srv.Close)
	return k
}

func (k *fakeKubelet) port() int32 {
	_, p, _ := net.SplitHostPort(k.srv.Listener.Addr().String())
	n, _ := strconv.Atoi(p)
	return int32(n)
}

func (k *fakeKubelet) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	proto, err := httpstream.Handshake(r, w, []string{"v5.channel.k8s.io", "v4.channel.k8s.io"})
	k.mu.Lock()
	k.paths = append(k.paths, r.URL.Path)
	k.queries = append(k.queries, r.URL.Query())
	k.proto = proto
	k.mu.Unlock()
	if err != nil {
		return // Handshake answered
	}
	type streamReply struct {
		s     httpstream.Stream
		reply <-chan struct{}
	}
	ch := make(chan streamReply, 8)
	conn := spdy.NewResponseUpgrader().UpgradeResponse(w, r, func(s httpstream.Stream, reply <-chan struct{}) error {
		ch <- streamReply{s, reply}
		return nil
	})
	if conn == nil {
		return
	}
	defer conn.Close()
	streams := map[string]httpstream.Stream{}
	timeout := time.After(20 * time.Second)
	for streams["error"] == nil || streams["stdin"] == nil || streams["stdout"] == nil {
		select {
		case sr := <-ch:
			<-sr.reply
			streams[sr.s.Headers().Get(corev1.StreamType)] = sr.s
		case <-timeout:
			return
		}
	}
	stdout := streams["stdout"]
	if _, err := stdout.Write([]byte("ct$ ")); err != nil {
		return
	}
	buf := make([]byte, 4096)
	for {
		n, err := streams["stdin"].Read(buf)
		if n > 0 {
			if _, werr := stdout.Write(append([]byte("echo:"), buf[:n]...)); werr != nil {
				return
			}
		}
		if err != nil {
			break
		}
	}
	k.mu.Lock()
	k.ends++
	k.mu.Unlock()
	st, _ := json.Marshal(metav1.Status{Status: metav1.StatusSuccess})
	_, _ = streams["error"].Write(st)
	stdout.Close()
	streams["error"].Close()
}

func (k *fakeKubelet) last() (string, url.Values) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(k.paths) == 0 {
		return "", nil
	}
	return k.paths[len(k.paths)-1], k.queries[len(k.queries)-1]
}

// registerNode makes a Node whose kubelet is k: its InternalIP is
// 127.0.0.1 and its kubelet port k's. The API server dials it for exec
// without checking its certificate (no --kubelet-certificate-authority).
func (e *env) registerNode(t *testing.T, name string, k *fakeKubelet) {
	t.Helper()
	ctx := ctxT(t)
	node, err := e.kube.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.kube.CoreV1().Nodes().Delete(ctxT(t), name, metav1.DeleteOptions{}) })
	node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}}
	node.Status.DaemonEndpoints.KubeletEndpoint.Port = k.port()
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	if _, err := e.kube.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// bind plays the scheduler and the kubelet: the pod goes to node and runs.
func (e *env) bind(t *testing.T, pod, node string) {
	t.Helper()
	b := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: pod}, Target: corev1.ObjectReference{Kind: "Node", Name: node}}
	if err := e.kube.CoreV1().Pods(e.ns).Bind(ctxT(t), b, metav1.CreateOptions{}); err != nil {
		t.Fatalf("bind %s to %s: %v", pod, node, err)
	}
	e.setPodPhase(t, pod, corev1.PodRunning)
}

// readUntil reads c until what it read contains want.
func readUntil(t *testing.T, c net.Conn, want string) string {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
	var got bytes.Buffer
	buf := make([]byte, 1024)
	for !strings.Contains(got.String(), want) {
		n, err := c.Read(buf)
		got.Write(buf[:n])
		if err != nil {
			t.Fatalf("console read %q, then %v; want %q", got.String(), err, want)
		}
	}
	return got.String()
}

// TestContainerConsoleExec opens a CT's serial console: an exec through
// the real API server to a kubelet the test plays. It checks the bytes
// both ways and the command the kubelet is asked to run: a login shell,
// under chroot /persist for a privileged CT.
func TestContainerConsoleExec(t *testing.T) {
	e := newEnv(t)
	b := e.backend(t)
	ctx := ctxT(t)
	k := startFakeKubelet(t)
	node := e.ns + "-kubelet"
	e.registerNode(t, node, k)

	for i, privileged := range []bool{false, true} {
		name := map[bool]string{false: "plain", true: "distro"}[privileged]
		ct, err := b.CreateContainer(ctx, backends.Spec{Name: name, Namespace: e.ns, CPUs: 1, MemoryMiB: 256}, "docker.io/library/debian:bookworm", privileged)
		if err != nil {
			t.Fatal(err)
		}
		// Not running yet: no console offered, a dial is a conflict.
		if kinds, err := b.Consoles(ctx, ct.Ref); err != nil || len(kinds) != 0 {
			t.Errorf("%s pending: Consoles = %v, %v; want none", name, kinds, err)
		}
		_, err = b.DialConsole(ctx, ct.Ref, backends.ConsoleSerial)
		wantKind(t, "dial a CT that is not running", err, backends.ErrConflict)

		e.bind(t, name, node)
		if kinds, err := b.Consoles(ctx, ct.Ref); err != nil || !slices.Equal(kinds, []backends.ConsoleKind{backends.ConsoleSerial}) {
			t.Fatalf("%s running: Consoles = %v, %v; want [serial]", name, kinds, err)
		}
		_, err = b.DialConsole(ctx, ct.Ref, backends.ConsoleVNC)
		wantKind(t, "a VNC console of a CT", err, backends.ErrUnsupported)

		c, err := b.DialConsole(ctx, ct.Ref, backends.ConsoleSerial)
		if err != nil {
			t.Fatalf("%s: DialConsole: %v", name, err)
		}
		readUntil(t, c, "ct$ ")
		if _, err := c.Write([]byte("uname -a\n")); err != nil {
			t.Fatal(err)
		}
		readUntil(t, c, "echo:uname -a\n")

		path, q := k.last()
		if want := "/exec/" + e.ns + "/" + name + "/ct"; path != want {
			t.Errorf("%s: kubelet asked for %s, want %s", name, path, want)
		}
		cmd := q["command"]
		wantPrefix := []string{"/bin/sh", "-c"}
		if privileged {
			wantPrefix = []string{"chroot", "/persist", "/bin/sh", "-c"}
		}
		if len(cmd) != len(wantPrefix)+1 || !slices.Equal(cmd[:len(wantPrefix)], wantPrefix) || !strings.Contains(cmd[len(cmd)-1], "sh -l") {
			t.Errorf("%s: command %q, want %q and a login shell", name, cmd, wantPrefix)
		}
		if q.Get("tty") != "1" && q.Get("tty") != "true" {
			t.Errorf("%s: exec without a TTY: %v", name, q)
		}
		if err := c.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
		// Close ends the shell's input, and the exec ends cleanly.
		k.mu.Lock()
		if k.ends != i+1 {
			t.Errorf("%s: after Close the kubelet saw %d ended execs, want %d", name, k.ends, i+1)
		}
		k.mu.Unlock()
	}
	k.mu.Lock()
	t.Logf("kubelet stream protocol negotiated by the API server: %s", k.proto)
	k.mu.Unlock()

	// A VM's console is refused with a remedy.
	vm, err := b.Create(ctx, backends.Spec{Name: "vm1", Namespace: e.ns, Image: "quay.io/containerdisks/fedora:42"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.Consoles(ctx, vm.Ref)
	wantKind(t, "the consoles of a KubeVirt VM", err, backends.ErrUnsupported)
}
