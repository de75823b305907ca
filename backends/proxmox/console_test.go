package proxmox_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/backends/qemu"
	"github.com/corral-dev/corral/backends/qemu/qemutest"
)

// TestConsoleRealGuest dials the VNC console of a real QEMU guest through
// the whole chain: the proxmox backend asks a second Corral's /api2/json
// (over TLS, with an API token) for a vncproxy ticket, opens its
// vncwebsocket, answers the VNC password challenge with the ticket, and
// hands over an RFB server that asks for nothing; behind the second
// Corral, the local qemu backend's display. The test then speaks RFB as a
// viewer does, up to ServerInit and the guest's framebuffer size.
func TestConsoleRealGuest(t *testing.T) {
	kernel, initrd := qemutest.Guest(t)
	qb, err := qemu.New(qemu.Options{Dir: t.TempDir(), Accel: "tcg", Kernel: kernel, Initrd: initrd, Append: qemutest.Append,
		ShutdownTimeout: 30 * time.Second})
	if err != nil {
		t.Fatalf("qemu.New: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	qref := backends.InstanceRef{Backend: backends.KindQEMU, Context: "local", Name: "screen"}
	if _, err := qb.Create(ctx, backends.Spec{Name: "screen", CPUs: 1, MemoryMiB: 256, DiskMiB: 64, Start: true}); err != nil {
		t.Fatalf("create the guest: %v", err)
	}
	t.Cleanup(func() {
		sctx, scancel := context.WithTimeout(context.Background(), time.Minute)
		defer scancel()
		_ = qb.Power(sctx, qref, backends.ActionStop)
	})
	log, err := qb.SerialLog(qref)
	if err != nil {
		t.Fatal(err)
	}
	qemutest.WaitMarker(t, log, qemutest.Marker, 1, 90*time.Second)

	s := newServer(t, qb)
	b := s.backend("pve")
	ref := backends.InstanceRef{Backend: backends.KindProxmox, Context: "pve", Namespace: s.node, Name: "screen"}
	kinds, err := b.Consoles(ctx, ref)
	if err != nil || len(kinds) != 1 || kinds[0] != backends.ConsoleVNC {
		t.Fatalf("Consoles = %v, %v; want vnc", kinds, err)
	}
	_, err = b.DialConsole(ctx, ref, backends.ConsoleRDP)
	wantSafe(t, "DialConsole rdp", err, backends.ErrUnsupported, s.secret)

	c, err := b.DialConsole(ctx, ref, backends.ConsoleVNC)
	if err != nil {
		t.Fatalf("DialConsole vnc: %v", err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	hello := make([]byte, 12)
	if _, err := io.ReadFull(c, hello); err != nil || string(hello) != "RFB 003.008\n" {
		t.Fatalf("greeting %q, %v; want RFB 003.008", hello, err)
	}
	write(t, c, []byte("RFB 003.008\n"))
	n := read(t, c, 1)
	types := read(t, c, int(n[0]))
	if len(types) != 1 || types[0] != 1 {
		t.Fatalf("security types %v; want only None (PVE's password step is the backend's)", types)
	}
	write(t, c, []byte{1})
	if res := binary.BigEndian.Uint32(read(t, c, 4)); res != 0 {
		t.Fatalf("security result %d; want 0 (OK)", res)
	}
	write(t, c, []byte{1}) // ClientInit, shared
	init := read(t, c, 24)
	w, h := binary.BigEndian.Uint16(init[0:2]), binary.BigEndian.Uint16(init[2:4])
	name := read(t, c, int(binary.BigEndian.Uint32(init[20:24])))
	if w == 0 || h == 0 {
		t.Fatalf("ServerInit framebuffer %dx%d; want a screen", w, h)
	}
	t.Logf("guest display %dx%d %q through the proxmox backend and a second Corral", w, h, name)

	// The ticket is single use: the grant is gone, so a second console
	// takes a new one, and both can be open at once.
	c2, err := b.DialConsole(ctx, ref, backends.ConsoleVNC)
	if err != nil {
		t.Fatalf("second DialConsole: %v", err)
	}
	_ = c2.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.ReadFull(c2, hello); err != nil || string(hello) != "RFB 003.008\n" {
		t.Fatalf("second greeting %q, %v", hello, err)
	}
	c2.Close()

	// The serial port through PVE's termproxy on the same server: the
	// guest's shell evaluates what it is sent.
	t.Run("termproxy", func(t *testing.T) { termproxy(t, s, "screen") })
	t.Run("serial", func(t *testing.T) {
		c, err := b.DialConsole(ctx, ref, backends.ConsoleSerial)
		if err != nil {
			t.Fatalf("DialConsole serial: %v", err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(30 * time.Second))
		write(t, c, []byte("echo corral-$((6*9))\n"))
		var out []byte
		buf := make([]byte, 4096)
		for !strings.Contains(string(out), "corral-54") {
			n, err := c.Read(buf)
			if err != nil {
				t.Fatalf("read the serial console: %v; got %q", err, out)
			}
			out = append(out, buf[:n]...)
		}
	})

	// A stopped guest has no console.
	if err := qb.Power(ctx, qref, backends.ActionStop); err != nil {
		t.Fatal(err)
	}
	_, err = b.DialConsole(ctx, ref, backends.ConsoleVNC)
	wantSafe(t, "DialConsole of a stopped guest", err, backends.ErrConflict, s.secret)
}

func read(t *testing.T, c io.Reader, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if _, err := io.ReadFull(c, b); err != nil {
		t.Fatalf("read %d bytes: %v", n, err)
	}
	return b
}

func write(t *testing.T, c io.Writer, b []byte) {
	t.Helper()
	if _, err := c.Write(b); err != nil {
		t.Fatalf("write: %v", err)
	}
}

// termproxy speaks PVE's termproxy protocol to the server as PVE's
// xterm.js page does, and types a command into the guest's serial shell.
func termproxy(t *testing.T, s *server, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := pxclient(s)
	var rs []struct {
		VMID int64  `json:"vmid"`
		Name string `json:"name"`
	}
	if err := c.Get(ctx, "/cluster/resources?type=vm", &rs); err != nil {
		t.Fatal(err)
	}
	var vmid int64
	for _, r := range rs {
		if r.Name == name {
			vmid = r.VMID
		}
	}
	path := fmt.Sprintf("/nodes/%s/qemu/%d/", s.node, vmid)
	var g struct{ Port, Ticket, User string }
	if err := c.Post(ctx, path+"termproxy", map[string]any{"serial": "serial0"}, &g); err != nil {
		t.Fatalf("termproxy: %v", err)
	}
	u := strings.Replace(s.url, "https", "wss", 1) + path + "vncwebsocket?" + url.Values{"port": {g.Port}, "vncticket": {g.Ticket}}.Encode()
	ws, _, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPClient: s.httpClient(),
		HTTPHeader: http.Header{"Authorization": {"PVEAPIToken=" + s.tokenID + "=" + s.secret}}, Subprotocols: []string{"binary"}})
	if err != nil {
		t.Fatalf("vncwebsocket: %v", err)
	}
	conn := websocket.NetConn(ctx, ws, websocket.MessageBinary)
	defer conn.Close()
	cmd := "echo corral-$((6*7))\n"
	write(t, conn, []byte(g.User+":"+g.Ticket+"\n"))
	write(t, conn, []byte(fmt.Sprintf("0:%d:%s", len(cmd), cmd)))
	var out []byte
	buf := make([]byte, 4096)
	for !strings.Contains(string(out), "corral-42") {
		n, err := conn.Read(buf)
		if err != nil {
			t.Fatalf("read the serial console: %v; got %q", err, out)
		}
		out = append(out, buf[:n]...)
	}
	if !strings.HasPrefix(string(out), "OK") {
		t.Fatalf("termproxy output %q does not start with OK", out)
	}
}
