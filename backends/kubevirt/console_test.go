package kubevirt_test

import (
	"bytes"
	"context"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/backends/kubevirt/kubelettest"
)

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
	k := kubelettest.Start()
	t.Cleanup(k.Close)
	node := e.ns + "-kubelet"
	if err := k.RegisterNode(ctx, e.kube, node); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.kube.CoreV1().Nodes().Delete(context.Background(), node, metav1.DeleteOptions{}) })

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

		if err := kubelettest.Run(ctx, e.kube, e.ns, name, node); err != nil {
			t.Fatal(err)
		}
		if kinds, err := b.Consoles(ctx, ct.Ref); err != nil || !slices.Equal(kinds, []backends.ConsoleKind{backends.ConsoleSerial}) {
			t.Fatalf("%s running: Consoles = %v, %v; want [serial]", name, kinds, err)
		}
		_, err = b.DialConsole(ctx, ct.Ref, backends.ConsoleVNC)
		wantKind(t, "a VNC console of a CT", err, backends.ErrUnsupported)

		c, err := b.DialConsole(ctx, ct.Ref, backends.ConsoleSerial)
		if err != nil {
			t.Fatalf("%s: DialConsole: %v", name, err)
		}
		readUntil(t, c, kubelettest.Prompt)
		if _, err := c.Write([]byte("uname -a\n")); err != nil {
			t.Fatal(err)
		}
		readUntil(t, c, "echo:uname -a\n")

		execs := k.Execs()
		path, q := execs[len(execs)-1].Path, execs[len(execs)-1].Query
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
		if n := k.Ends(); n != i+1 {
			t.Errorf("%s: after Close the kubelet saw %d ended execs, want %d", name, n, i+1)
		}
	}
	t.Logf("kubelet stream protocol negotiated by the API server: %s", k.Protocol())

	// A VM's console is refused with a remedy.
	vm, err := b.Create(ctx, backends.Spec{Name: "vm1", Namespace: e.ns, Image: "quay.io/containerdisks/fedora:42"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.Consoles(ctx, vm.Ref)
	wantKind(t, "the consoles of a KubeVirt VM", err, backends.ErrUnsupported)
}
