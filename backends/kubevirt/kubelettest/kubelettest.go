// Package kubelettest is a kubelet's exec endpoint for tests: the test
// API server (hack/testenv.sh) runs no kubelet, so a test registers a Node
// whose kubelet is a Server and binds a pod to it; the real API server
// then proxies pods/exec to it as it would to a kubelet.
package kubelettest

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/apimachinery/pkg/util/httpstream/spdy"
	"k8s.io/client-go/kubernetes"
)

// Prompt is what the played shell prints first.
const Prompt = "ct$ "

// Exec is one exec the API server asked for.
type Exec struct {
	Path  string     // /exec/NAMESPACE/POD/CONTAINER
	Query url.Values // command (repeated), input, output, tty, ...
}

// Server serves /exec/... over TLS with the stream protocol the API
// server speaks to kubelets: SPDY with the channel.k8s.io subprotocols
// (the API server translates a client's WebSocket into it). It plays a
// shell that prints Prompt, then echoes every input as "echo:INPUT", and
// reports success on the error stream when its stdin ends.
type Server struct {
	srv   *httptest.Server
	mu    sync.Mutex
	execs []Exec
	proto string
	ends  int
}

// Start starts a Server; Close stops it.
func Start() *Server {
	k := &Server{}
	k.srv = httptest.NewTLSServer(k)
	return k
}

// Close stops the server.
func (k *Server) Close() { k.srv.Close() }

// Port is the kubelet port to put in the Node's status.
func (k *Server) Port() int32 {
	_, p, _ := net.SplitHostPort(k.srv.Listener.Addr().String())
	n, _ := strconv.Atoi(p)
	return int32(n)
}

// Execs returns what the API server asked for, in order.
func (k *Server) Execs() []Exec {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]Exec(nil), k.execs...)
}

// Protocol is the stream protocol last negotiated.
func (k *Server) Protocol() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.proto
}

// Ends counts the execs whose stdin ended and that reported success.
func (k *Server) Ends() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.ends
}

// ServeHTTP implements the exec endpoint.
func (k *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	proto, err := httpstream.Handshake(r, w, []string{"v5.channel.k8s.io", "v4.channel.k8s.io"})
	k.mu.Lock()
	k.execs = append(k.execs, Exec{Path: r.URL.Path, Query: r.URL.Query()})
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
	for streams[corev1.StreamTypeError] == nil || streams[corev1.StreamTypeStdin] == nil || streams[corev1.StreamTypeStdout] == nil {
		select {
		case sr := <-ch:
			<-sr.reply
			streams[sr.s.Headers().Get(corev1.StreamType)] = sr.s
		case <-timeout:
			return
		}
	}
	stdout := streams[corev1.StreamTypeStdout]
	if _, err := stdout.Write([]byte(Prompt)); err != nil {
		return
	}
	buf := make([]byte, 4096)
	for {
		n, err := streams[corev1.StreamTypeStdin].Read(buf)
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
	_, _ = streams[corev1.StreamTypeError].Write(st)
	stdout.Close()
	streams[corev1.StreamTypeError].Close()
}

// RegisterNode makes a Node named name whose kubelet is k: InternalIP
// 127.0.0.1 and k's port. The API server dials it for exec without
// checking its certificate (it runs without
// --kubelet-certificate-authority). The caller deletes the Node.
func (k *Server) RegisterNode(ctx context.Context, kube kubernetes.Interface, name string) error {
	node, err := kube.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}}
	node.Status.DaemonEndpoints.KubeletEndpoint.Port = k.Port()
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	_, err = kube.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
	return err
}

// Run plays the scheduler and the kubelet for a pod: it binds it to node
// and reports it Running and Ready.
func Run(ctx context.Context, kube kubernetes.Interface, ns, pod, node string) error {
	b := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: pod}, Target: corev1.ObjectReference{Kind: "Node", Name: node}}
	if err := kube.CoreV1().Pods(ns).Bind(ctx, b, metav1.CreateOptions{}); err != nil {
		return err
	}
	p, err := kube.CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{})
	if err != nil {
		return err
	}
	p.Status.Phase = corev1.PodRunning
	p.Status.PodIP = "10.244.0.9"
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	_, err = kube.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{})
	return err
}
