package kubevirt

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"

	"github.com/corral-dev/corral/backends"
)

var _ backends.ConsoleDialer = (*Backend)(nil)

// ctShell is the command a CT's console runs: a login shell, bash when
// the image has it. For a privileged CT it runs under chroot /persist: an
// exec joins the container's namespaces but starts from the image's own
// root, not the chroot the pod's main process entered, so the console
// enters the persistent root itself (spec/CONTEXT.md, "Console").
func ctShell(privileged bool) []string {
	sh := []string{"/bin/sh", "-c", "if command -v bash >/dev/null 2>&1; then exec bash -l; fi; exec sh -l"}
	if privileged {
		return append([]string{"chroot", ctPersist}, sh...)
	}
	return sh
}

// Consoles implements backends.ConsoleDialer: a running CT offers its
// shell as a serial console; a stopped one offers none yet. A VM's
// consoles go through KubeVirt's virt-api (VNC and serial websockets),
// which Corral does not bridge yet: refused with virtctl as the remedy.
// Two reads: the CT's PVC and pod, or the PVC and the VM.
func (b *Backend) Consoles(ctx context.Context, ref backends.InstanceRef) ([]backends.ConsoleKind, error) {
	_, pod, err := b.ctOrRefuse(ctx, ref)
	if err != nil {
		return nil, err
	}
	return ctConsoles(pod), nil
}

var _ backends.InstanceConsoles = (*Backend)(nil)

// ConsolesOf implements backends.InstanceConsoles: Consoles for an
// instance the caller holds, whose type decides without a read: a VM is
// refused at once, a CT's pod is the one read (is it running now).
func (b *Backend) ConsolesOf(ctx context.Context, in backends.Instance) ([]backends.ConsoleKind, error) {
	ref := in.Ref
	if err := b.check(ref); err != nil {
		return nil, err
	}
	switch in.Type {
	case backends.TypeVM:
		return nil, vmConsoleRefusal(ref)
	case backends.TypeCT:
		pod, err := b.ctPodOf(ctx, ref.Namespace, ref.Name)
		if err != nil {
			return nil, err
		}
		return ctConsoles(pod), nil
	}
	return b.Consoles(ctx, ref)
}

// ctConsoles are the consoles of a CT whose pod is pod (nil: none).
func ctConsoles(pod *corev1.Pod) []backends.ConsoleKind {
	if ctState(pod) != backends.StateRunning {
		return nil
	}
	return []backends.ConsoleKind{backends.ConsoleSerial}
}

// vmConsoleRefusal is the refusal of a VM's consoles.
func vmConsoleRefusal(ref backends.InstanceRef) error {
	return backends.Refuse(backends.KindKubeVirt, "console", "the consoles of KubeVirt VMs are not bridged by Corral yet; use virtctl vnc "+ref.Name+" -n "+ref.Namespace+" or virtctl console")
}

// ctOrRefuse returns the CT ref names, or the refusal for a VM (whose
// existence is one read of the VM object: its instance does not matter).
func (b *Backend) ctOrRefuse(ctx context.Context, ref backends.InstanceRef) (*corev1.PersistentVolumeClaim, *corev1.Pod, error) {
	pvc, pod, err := b.getCT(ctx, ref)
	if errors.Is(err, backends.ErrNotFound) {
		if _, verr := b.dyn.Resource(gvrVM).Namespace(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{}); verr == nil {
			return nil, nil, vmConsoleRefusal(ref)
		}
	}
	return pvc, pod, err
}

// DialConsole implements backends.ConsoleDialer for CTs: an exec of
// ctShell in the CT's container with a TTY, through the API server
// (pods/exec), which the kubelet serves. client-go's WebSocket executor
// (protocol v5.channel.k8s.io) is tried first, SPDY when the server
// refuses the upgrade (an API server older than 1.30, or a proxy).
//
// The connection returned is one end of an in-memory pipe: what the
// console bridge writes is the shell's stdin, what it reads is the TTY's
// output. DialConsole returns once the exec stream is established (the
// executor starts reading stdin only then), so a refusal (the pod is not
// running, the credentials may not exec) comes back as an error rather
// than as a connection that closes at once. Closing the connection ends
// the stream; the shell gets EOF.
func (b *Backend) DialConsole(ctx context.Context, ref backends.InstanceRef, kind backends.ConsoleKind) (net.Conn, error) {
	if kind != backends.ConsoleSerial {
		return nil, backends.Refuse(backends.KindKubeVirt, string(kind)+" console", "a container has no screen: open its serial console (a shell)")
	}
	pvc, pod, err := b.ctOrRefuse(ctx, ref)
	if err != nil {
		return nil, err
	}
	what := "CT " + ref.Namespace + "/" + ref.Name
	if ctState(pod) != backends.StateRunning || pod.Spec.NodeName == "" {
		return nil, backends.Conflictf("%s is not running; start it to open its console", what)
	}
	cs, err := readCTSpec(pvc)
	if err != nil {
		return nil, err
	}
	u := b.kube.CoreV1().RESTClient().Post().
		Resource("pods").Namespace(ref.Namespace).Name(pod.Name).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: "ct", Command: ctShell(cs.Privileged), Stdin: true, Stdout: true, TTY: true}, scheme.ParameterCodec).
		URL()
	ws, err := remotecommand.NewWebSocketExecutor(b.cfg, "GET", u.String())
	if err != nil {
		return nil, b.fail("open the console of", what, err)
	}
	sp, err := remotecommand.NewSPDYExecutor(b.cfg, "POST", u)
	if err != nil {
		return nil, b.fail("open the console of", what, err)
	}
	exec, err := remotecommand.NewFallbackExecutor(ws, sp, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
	if err != nil {
		return nil, b.fail("open the console of", what, err)
	}
	ours, theirs := net.Pipe()
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stdin := &firstRead{Reader: ours, ready: make(chan struct{})}
	done := make(chan error, 1)
	go func() {
		err := exec.StreamWithContext(sctx, remotecommand.StreamOptions{Stdin: stdin, Stdout: ours, Tty: true})
		ours.Close()
		done <- err
	}()
	select {
	case <-stdin.ready:
	case err := <-done:
		cancel()
		theirs.Close()
		if err == nil { // the shell ended before reading anything
			err = errors.New("kubevirt: the exec stream ended at once")
		}
		return nil, b.fail("open the console of", what, err)
	case <-ctx.Done():
		cancel()
		theirs.Close()
		return nil, b.fail("open the console of", what, ctx.Err())
	}
	ended := make(chan struct{})
	go func() { // the bridge's dial context no longer bounds the stream
		if err := <-done; err != nil && sctx.Err() == nil {
			b.opts.Logger.Info("kubevirt: a CT console ended", "ct", ref.String(), "err", err)
		}
		cancel()
		close(ended)
	}()
	return &execConn{Conn: theirs, cancel: cancel, ended: ended}, nil
}

// firstRead signals ready on its first Read: the executors read stdin
// only once the stream is established.
type firstRead struct {
	Reader io.Reader
	once   sync.Once
	ready  chan struct{}
}

func (f *firstRead) Read(p []byte) (int, error) {
	f.once.Do(func() { close(f.ready) })
	return f.Reader.Read(p)
}

// execConn ends the exec stream when the bridge closes its side.
type execConn struct {
	net.Conn
	cancel context.CancelFunc
	ended  chan struct{}
}

// execCloseWait is how long Close lets the shell see the end of its input
// and the stream end cleanly before it is cut.
const execCloseWait = 2 * time.Second

// Close ends the shell's stdin (the executor then closes its side of the
// stream, and the kubelet ends the exec), waits a moment for the stream
// to end, then cuts it.
func (c *execConn) Close() error {
	err := c.Conn.Close()
	select {
	case <-c.ended:
	case <-time.After(execCloseWait):
	}
	c.cancel()
	return err
}
