package qemu_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/backends/backendtest"
	"github.com/corral-dev/corral/backends/qemu"
	"github.com/corral-dev/corral/backends/qemu/qemutest"
)

// bootTimeout bounds one boot of the test guest under TCG: 3-16 s here,
// more on a loaded machine.
const bootTimeout = 90 * time.Second

// newBackend returns a backend on a fresh Dir that boots the test guest
// under TCG, and stops every VM it left running when the test ends: a
// daemonized qemu would otherwise outlive a failed test.
func newBackend(t *testing.T, dir string) *qemu.Backend {
	t.Helper()
	kernel, initrd := qemutest.Guest(t)
	if dir == "" {
		dir = t.TempDir()
	}
	b, err := qemu.New(qemu.Options{Dir: dir, Accel: "tcg", Kernel: kernel, Initrd: initrd, Append: qemutest.Append,
		ShutdownTimeout: 30 * time.Second})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { stopAll(t, b) })
	return b
}

func stopAll(t *testing.T, b *qemu.Backend) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	list, err := b.List(ctx)
	if err != nil {
		t.Errorf("List at cleanup: %v", err)
		return
	}
	for _, in := range list {
		if in.State != backends.StateStopped {
			if err := b.Power(ctx, in.Ref, backends.ActionStop); err != nil {
				t.Errorf("stop %s at cleanup: %v", in.Ref.Name, err)
			}
		}
	}
}

func ref(name string) backends.InstanceRef {
	return backends.InstanceRef{Backend: backends.KindQEMU, Context: "local", Name: name}
}

func spec(name string) backends.Spec {
	return backends.Spec{Name: name, CPUs: 1, MemoryMiB: 256, DiskMiB: 64}
}

// readyWaiter waits for one more GUEST_READY than it saw last time for
// the same VM: after a restart the log still holds the first boot's.
type readyWaiter struct {
	mu   sync.Mutex
	seen map[backends.InstanceRef]int
}

func (w *readyWaiter) wait(t *testing.T, b backends.Backend, r backends.InstanceRef) {
	t.Helper()
	w.mu.Lock()
	n := w.seen[r] + 1
	w.seen[r] = n
	w.mu.Unlock()
	waitReady(t, b.(*qemu.Backend), r, n)
}

func waitReady(t *testing.T, b *qemu.Backend, r backends.InstanceRef, n int) {
	t.Helper()
	log, err := b.SerialLog(r)
	if err != nil {
		t.Fatalf("SerialLog: %v", err)
	}
	qemutest.WaitMarker(t, log, qemutest.Marker, n, bootTimeout)
}

func TestConformance(t *testing.T) {
	w := &readyWaiter{seen: map[backends.InstanceRef]int{}}
	backendtest.Run(t, backendtest.Harness{
		New:             func(t *testing.T) backends.Backend { return newBackend(t, "") },
		Spec:            func(_ *testing.T, name string) backends.Spec { return spec(name) },
		Settle:          bootTimeout,
		Ready:           w.wait,
		RunningSnapshot: "", // refused: qemu-img must not write a disk qemu has open
		Pause:           true,
	})
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func wantKind(t *testing.T, what string, err, kind error) {
	t.Helper()
	if !errors.Is(err, kind) {
		t.Fatalf("%s: %v (kind %v), want kind %v", what, err, backends.KindOf(err), kind)
	}
	if backends.SafeMessage(err) == "" {
		t.Fatalf("%s: %v has no safe message", what, err)
	}
}

// TestRunningGuest boots one guest and checks everything that needs it
// running: consoles, the refusals, and re-adoption by a second Backend.
func TestRunningGuest(t *testing.T) {
	dir := t.TempDir()
	b := newBackend(t, dir)
	ctx := ctxT(t)
	r := ref("live")
	ci := &backends.CloudInit{Password: `pa"ss: word`, SSHKeys: []string{"ssh-ed25519 AAAAC3Nz test@corral"}}
	if _, err := b.Create(ctx, backends.Spec{Name: "live", CPUs: 1, MemoryMiB: 256, DiskMiB: 64, Start: true, CloudInit: ci}); err != nil {
		t.Fatalf("Create with Start: %v", err)
	}
	waitReady(t, b, r, 1)

	t.Run("Facts", func(t *testing.T) {
		in, err := b.Get(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		port, _ := b.SSHPort(r)
		facts := map[string]string{}
		for _, f := range in.Facts {
			facts[f.Label] = f.Value
		}
		if !strings.Contains(facts["SSH"], fmt.Sprintf("ssh -p %d ", port)) || !strings.HasPrefix(facts["Accelerator"], "tcg: ") {
			t.Fatalf("facts of a running VM = %v, want the SSH forward on port %d and the accelerator", facts, port)
		}
	})
	t.Run("CloudInitSeed", func(t *testing.T) {
		// The guest's /init looks for a volume labelled cidata, mounts it
		// as ISO 9660 and prints what cloud-init would read: the seed has
		// the label, the Rock Ridge names and the generated documents.
		log, _ := b.SerialLog(r)
		data, err := os.ReadFile(log)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(data), "SEED_FOUND instance-id: live-") || !strings.Contains(string(data), "#cloud-config") {
			t.Fatalf("the guest did not find the NoCloud seed; serial log:\n%s", data)
		}
	})

	t.Run("Consoles", func(t *testing.T) {
		// The boot forwards a port to the guest's 3389, so RDP is listed
		// without asking the guest (no probe on every page); nothing
		// answers there yet, which the probe says.
		kinds, err := b.Consoles(ctx, r)
		if err != nil || !slices.Equal(kinds, []backends.ConsoleKind{backends.ConsoleVNC, backends.ConsoleSerial, backends.ConsoleRDP}) {
			t.Fatalf("Consoles = %v, %v; want vnc, serial and rdp (the forward)", kinds, err)
		}
		err = b.ProbeRDP(ctx, r)
		wantKind(t, "ProbeRDP without a server in the guest", err, backends.ErrUnavailable)
		if !strings.Contains(backends.SafeMessage(err), "127.0.0.1:") {
			t.Fatalf("the probe's reason %q names no address", backends.SafeMessage(err))
		}
	})
	t.Run("VNC", func(t *testing.T) {
		c, err := b.DialConsole(ctx, r, backends.ConsoleVNC)
		if err != nil {
			t.Fatalf("DialConsole vnc: %v", err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		hello := make([]byte, 12)
		if _, err := io.ReadFull(c, hello); err != nil || string(hello) != "RFB 003.008\n" {
			t.Fatalf("VNC greeting = %q, %v; want RFB 003.008", hello, err)
		}
	})
	t.Run("Serial", func(t *testing.T) {
		c, err := b.DialConsole(ctx, r, backends.ConsoleSerial)
		if err != nil {
			t.Fatalf("DialConsole serial: %v", err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(30 * time.Second))
		// The shell evaluates the arithmetic; the terminal's echo of the
		// line does not contain the answer.
		if _, err := io.WriteString(c, "echo corral-$((6*7))\n"); err != nil {
			t.Fatalf("write to the serial console: %v", err)
		}
		sc := bufio.NewScanner(c)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "corral-42") {
				return
			}
		}
		t.Fatalf("corral-42 never came back from the serial console: %v", sc.Err())
	})
	t.Run("RDPForward", func(t *testing.T) {
		// Something in the guest listens on 3389: the guest's shell brings
		// its network up and runs an echo server there. Echoing the probe's
		// Connection Request answers with TPKT bytes, so the probe passes,
		// and DialConsole reaches the guest through the forward.
		c, err := b.DialConsole(ctx, r, backends.ConsoleSerial)
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetDeadline(time.Now().Add(60 * time.Second))
		_, err = io.WriteString(c, "ip link set eth0 up && ip addr add 10.0.2.15/24 dev eth0 && (nc -ll -p 3389 -e /bin/cat &) ; echo rdp-setup-$?\n")
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(c)
		for sc.Scan() && !strings.HasPrefix(sc.Text(), "rdp-setup-") {
		}
		if line := sc.Text(); line != "rdp-setup-0" {
			t.Fatalf("the guest's network and listener: %q (%v)", line, sc.Err())
		}
		c.Close()
		deadline := time.Now().Add(90 * time.Second)
		for {
			err := b.ProbeRDP(ctx, r)
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("ProbeRDP = %v; want nil once the guest listens on 3389", err)
			}
			time.Sleep(500 * time.Millisecond)
		}
		rc, err := b.DialConsole(ctx, r, backends.ConsoleRDP)
		if err != nil {
			t.Fatalf("DialConsole rdp: %v", err)
		}
		defer rc.Close()
		_ = rc.SetDeadline(time.Now().Add(30 * time.Second))
		if _, err := io.WriteString(rc, "through-the-forward"); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, len("through-the-forward"))
		if _, err := io.ReadFull(rc, got); err != nil || string(got) != "through-the-forward" {
			t.Fatalf("echo from the guest's 3389 = %q, %v", got, err)
		}
		// The address a native client (corral vdi connect --open's
		// xfreerdp) is given reaches the same guest port.
		addr, err := b.RDPAddress(ctx, r)
		if err != nil || !strings.HasPrefix(addr, "127.0.0.1:") {
			t.Fatalf("RDPAddress = %q, %v", addr, err)
		}
		nc, err := net.DialTimeout("tcp", addr, 10*time.Second)
		if err != nil {
			t.Fatalf("dial the RDP address %s: %v", addr, err)
		}
		defer nc.Close()
		_ = nc.SetDeadline(time.Now().Add(30 * time.Second))
		if _, err := io.WriteString(nc, "native-client"); err != nil {
			t.Fatal(err)
		}
		got = make([]byte, len("native-client"))
		if _, err := io.ReadFull(nc, got); err != nil || string(got) != "native-client" {
			t.Fatalf("echo through the RDP address = %q, %v", got, err)
		}
	})
	t.Run("Scrollback", func(t *testing.T) {
		// What the guest printed before anyone connected, and what the
		// serial test typed, are in the scrollback; a small limit keeps
		// the end. The guest's shell may still write (a prompt), so the
		// tail is read first and must stand in the later, longer read.
		tail, err := b.SerialScrollback(ctx, r, 10)
		if err != nil || len(tail) != 10 {
			t.Fatalf("SerialScrollback(limit 10) = %q, %v; want 10 bytes", tail, err)
		}
		all, err := b.SerialScrollback(ctx, r, 1<<16)
		if err != nil || !strings.Contains(string(all), "GUEST_READY") || !strings.Contains(string(all), string(tail)) {
			t.Fatalf("SerialScrollback = %q, %v; want the boot marker and the earlier tail %q", all, err, tail)
		}
	})
	t.Run("Refusals", func(t *testing.T) {
		_, err := b.CreateSnapshot(ctx, r, "live")
		wantKind(t, "CreateSnapshot of a running VM", err, backends.ErrUnsupported)
		if msg := backends.SafeMessage(err); !strings.Contains(msg, "corral stop live") {
			t.Fatalf("refusal %q names no remedy", msg)
		}
		_, err = b.Export(ctx, r, "qcow2", io.Discard)
		wantKind(t, "Export of a running VM", err, backends.ErrUnsupported)
		_, err = b.Clone(ctx, r, "live-copy")
		wantKind(t, "Clone of a running VM", err, backends.ErrConflict)
		if snaps, err := b.Snapshots(ctx, r); err != nil || len(snaps) != 0 {
			t.Fatalf("Snapshots of a running VM = %v, %v; want an empty list", snaps, err)
		}
	})
	t.Run("Readopt", func(t *testing.T) {
		// A Corral restart: a new Backend on the same Dir finds the VM
		// still running and controls it.
		b2, err := qemu.New(qemu.Options{Dir: dir, Accel: "tcg"})
		if err != nil {
			t.Fatalf("New on the same Dir: %v", err)
		}
		list, err := b2.List(ctx)
		if err != nil || len(list) != 1 || list[0].Ref != r || list[0].State != backends.StateRunning {
			t.Fatalf("List after re-adoption = %+v, %v; want live running", list, err)
		}
		if list[0].IP != "127.0.0.1" {
			t.Fatalf("IP = %q, want 127.0.0.1", list[0].IP)
		}
		if err := b2.Power(ctx, r, backends.ActionPause); err != nil {
			t.Fatalf("pause through the new backend: %v", err)
		}
		if in, _ := b.Get(ctx, r); in.State != backends.StatePaused {
			t.Fatalf("the first backend sees %s, want paused", in.State)
		}
		if err := b2.Power(ctx, r, backends.ActionStop); err != nil {
			t.Fatalf("stop through the new backend: %v", err)
		}
		if in, err := b.Get(ctx, r); err != nil || in.State != backends.StateStopped {
			t.Fatalf("after stop: %+v, %v; want stopped", in, err)
		}
		if kinds, err := b.Consoles(ctx, r); err != nil || len(kinds) != 0 {
			t.Fatalf("Consoles of a stopped VM = %v, %v; want none", kinds, err)
		}
		_, err = b.DialConsole(ctx, r, backends.ConsoleSerial)
		wantKind(t, "DialConsole of a stopped VM", err, backends.ErrConflict)
	})
}

func TestCloneBoots(t *testing.T) {
	b := newBackend(t, "")
	ctx := ctxT(t)
	if _, err := b.Create(ctx, spec("src")); err != nil {
		t.Fatalf("Create: %v", err)
	}
	c, err := b.Clone(ctx, ref("src"), "dst")
	if err != nil {
		t.Fatalf("Clone: %v", err)
	}
	p1, _ := b.SSHPort(ref("src"))
	p2, _ := b.SSHPort(c.Ref)
	if p1 == 0 || p1 == p2 {
		t.Fatalf("SSH ports %d and %d: the clone needs its own", p1, p2)
	}
	if err := b.Power(ctx, c.Ref, backends.ActionStart); err != nil {
		t.Fatalf("start the clone: %v", err)
	}
	waitReady(t, b, c.Ref, 1)
	if err := b.Power(ctx, c.Ref, backends.ActionStop); err != nil {
		t.Fatalf("stop the clone: %v", err)
	}
}
