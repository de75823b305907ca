package pve_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/internal/rfb"
)

// fakeDisplay gives a simulated context consoles: each VNC dial is a
// pipe to an RFB server without a password that echoes what follows the
// handshake. A fake for the ticket logic only; the real chain (a QEMU
// guest behind a second Corral) is backends/proxmox's TestConsoleRealGuest.
type fakeDisplay struct {
	backends.Backend
	mu    sync.Mutex
	dials int
}

func (f *fakeDisplay) Consoles(ctx context.Context, ref backends.InstanceRef) ([]backends.ConsoleKind, error) {
	return []backends.ConsoleKind{backends.ConsoleVNC, backends.ConsoleSerial}, nil
}

func (f *fakeDisplay) DialConsole(ctx context.Context, ref backends.InstanceRef, kind backends.ConsoleKind) (net.Conn, error) {
	f.mu.Lock()
	f.dials++
	f.mu.Unlock()
	a, b := net.Pipe()
	go func() {
		defer a.Close()
		if kind == backends.ConsoleSerial {
			_, _ = io.Copy(a, a) // a tty's echo
			return
		}
		if rfb.ServerHandshake(a, nil, "") == nil {
			_, _ = io.Copy(a, a)
		}
	}()
	return b, nil
}

func (f *fakeDisplay) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.dials
}

type grantAnswer struct {
	Data struct {
		Cert, Port, Ticket, UPID, User, Password string
	}
}

// TestVNCTickets: vncproxy's answer has PVE's shape; vncwebsocket refuses,
// before anything is dialled, a bad ticket, another guest's, another
// caller's, a used one and an expired one; the viewer must answer the VNC
// challenge with the ticket.
func TestVNCTickets(t *testing.T) {
	disp := &fakeDisplay{}
	var clockMu sync.Mutex
	now := time.Now()
	clock := func() time.Time { clockMu.Lock(); defer clockMu.Unlock(); return now }
	e := newEnv(t, envOpts{simSize: 5, now: clock, wrap: func(b backends.Backend) backends.Backend { disp.Backend = b; return disp }})
	root := e.token(t, "root@pam", "vnc")
	alice := e.token(t, "alice@pve", "vnc")
	srv := e.tls(t)
	// Guests 0 and 1 of the sim are running, 2 is stopped.
	vmids := map[string]int64{}
	_, body := e.call(t, root, "GET", "/api2/json/cluster/resources?type=vm", nil)
	var res struct {
		Data []struct {
			Name, Status string
			VMID         int64
		}
	}
	if err := json.Unmarshal([]byte(body), &res); err != nil {
		t.Fatal(err)
	}
	for _, r := range res.Data {
		vmids[r.Name] = r.VMID
	}
	a, b, off := vmids["web-lab-0000"], vmids["db-lab-0001"], vmids["cache-lab-0002"]

	proxy := func(t *testing.T, tok string, vmid int64, form url.Values) grantAnswer {
		t.Helper()
		code, body := e.call(t, tok, "POST", "/api2/json/nodes/sim-lab/qemu/"+strconv.FormatInt(vmid, 10)+"/vncproxy", form)
		if code != 200 {
			t.Fatalf("vncproxy: %d %s", code, body)
		}
		var g grantAnswer
		if err := json.Unmarshal([]byte(body), &g); err != nil {
			t.Fatalf("vncproxy answered %s: %v (port must be a string)", body, err)
		}
		return g
	}
	dial := func(tok string, vmid int64, port, ticket string) (net.Conn, int, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		u := strings.Replace(srv.URL, "https", "wss", 1) + "/api2/json/nodes/sim-lab/qemu/" + strconv.FormatInt(vmid, 10) +
			"/vncwebsocket?" + url.Values{"port": {port}, "vncticket": {ticket}}.Encode()
		c, res, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPClient: srv.Client(),
			HTTPHeader: http.Header{"Authorization": {"PVEAPIToken=" + tok}}, Subprotocols: []string{"binary"}})
		if err != nil {
			if res == nil {
				t.Fatalf("dial: %v", err)
			}
			b, _ := io.ReadAll(res.Body)
			return nil, res.StatusCode, res.Status + " " + string(b)
		}
		nc := websocket.NetConn(context.Background(), c, websocket.MessageBinary)
		_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
		t.Cleanup(func() { nc.Close() })
		return nc, 101, ""
	}

	g := proxy(t, root, a, url.Values{"websocket": {"1"}})
	if _, err := strconv.Atoi(g.Data.Port); err != nil || !strings.HasPrefix(g.Data.Ticket, "PVEVNC:") || g.Data.User != "root@pam!vnc" ||
		!strings.HasPrefix(g.Data.UPID, "UPID:sim-lab:") || !strings.Contains(g.Data.UPID, ":vncproxy:") || g.Data.Password != "" {
		t.Fatalf("vncproxy answer %+v", g.Data)
	}

	for _, tc := range []struct {
		name, tok, port, ticket string
		vmid                    int64
	}{
		{"bad ticket", root, g.Data.Port, "PVEVNC:00000000::bogus", a},
		{"another guest's path", root, g.Data.Port, g.Data.Ticket, b},
		{"another caller", alice, g.Data.Port, g.Data.Ticket, a},
		{"another port", root, "5999", g.Data.Ticket, a},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, code, msg := dial(tc.tok, tc.vmid, tc.port, tc.ticket)
			if code != 401 || !strings.Contains(msg, "invalid PVEVNC ticket") {
				t.Fatalf("%d %s; want 401 invalid PVEVNC ticket", code, msg)
			}
		})
	}
	if n := disp.count(); n != 0 {
		t.Fatalf("refused tickets dialled the display %d times", n)
	}

	// The refusals above did not use the grant up: the right caller opens it.
	c, code, msg := dial(root, a, g.Data.Port, g.Data.Ticket)
	if c == nil {
		t.Fatalf("the right ticket: %d %s", code, msg)
	}
	if err := rfb.ClientHandshake(c, g.Data.Ticket); err != nil {
		t.Fatalf("VNC password step with the ticket: %v", err)
	}
	if _, err := c.Write([]byte("client-init")); err != nil {
		t.Fatal(err)
	}
	echo := make([]byte, len("client-init"))
	if _, err := io.ReadFull(c, echo); err != nil || string(echo) != "client-init" {
		t.Fatalf("after the handshake the display echoed %q, %v", echo, err)
	}

	t.Run("reuse", func(t *testing.T) {
		_, code, msg := dial(root, a, g.Data.Port, g.Data.Ticket)
		if code != 401 {
			t.Fatalf("a used ticket: %d %s; want 401", code, msg)
		}
	})
	t.Run("wrong VNC password", func(t *testing.T) {
		g := proxy(t, root, a, url.Values{"websocket": {"1"}})
		c, code, msg := dial(root, a, g.Data.Port, g.Data.Ticket)
		if c == nil {
			t.Fatalf("%d %s", code, msg)
		}
		if err := rfb.ClientHandshake(c, "PVEVNC:X"); !errors.Is(err, rfb.ErrAuth) {
			t.Fatalf("a wrong VNC password: %v; want refused", err)
		}
	})
	t.Run("generated password", func(t *testing.T) {
		g := proxy(t, alice, b, url.Values{"websocket": {"1"}, "generate-password": {"1"}})
		if len(g.Data.Password) != 8 {
			t.Fatalf("password %q; want 8 characters", g.Data.Password)
		}
		c, code, msg := dial(alice, b, g.Data.Port, g.Data.Ticket)
		if c == nil {
			t.Fatalf("%d %s", code, msg)
		}
		if err := rfb.ClientHandshake(c, g.Data.Password); err != nil {
			t.Fatalf("VNC password step with the generated password: %v", err)
		}
	})
	t.Run("expired", func(t *testing.T) {
		g := proxy(t, root, a, url.Values{"websocket": {"1"}})
		clockMu.Lock()
		now = now.Add(41 * time.Second)
		clockMu.Unlock()
		_, code, msg := dial(root, a, g.Data.Port, g.Data.Ticket)
		if code != 401 {
			t.Fatalf("a ticket 41 s old: %d %s; want 401", code, msg)
		}
	})
	t.Run("stopped guest", func(t *testing.T) {
		code, body := e.call(t, root, "POST", "/api2/json/nodes/sim-lab/qemu/"+strconv.FormatInt(off, 10)+"/vncproxy", url.Values{"websocket": {"1"}})
		if code != 500 || !strings.Contains(body, "not running") {
			t.Fatalf("vncproxy of a stopped guest: %d %s", code, body)
		}
	})
	t.Run("termproxy", func(t *testing.T) {
		var g grantAnswer
		code, body := e.call(t, root, "POST", "/api2/json/nodes/sim-lab/qemu/"+strconv.FormatInt(a, 10)+"/termproxy", url.Values{"serial": {"serial0"}})
		if code != 200 {
			t.Fatalf("termproxy: %d %s", code, body)
		}
		if err := json.Unmarshal([]byte(body), &g); err != nil || g.Data.Ticket == "" || g.Data.Port == "" {
			t.Fatalf("termproxy answered %s", body)
		}
		c, code, msg := dial(root, a, g.Data.Port, g.Data.Ticket)
		if c == nil {
			t.Fatalf("%d %s", code, msg)
		}
		for _, m := range []string{"root@pam!vnc:" + g.Data.Ticket + "\n", "1:80:24:", "2", "0:5:hello"} {
			if _, err := c.Write([]byte(m)); err != nil {
				t.Fatal(err)
			}
		}
		got := make([]byte, len("OKhello"))
		if _, err := io.ReadFull(c, got); err != nil || string(got) != "OKhello" {
			t.Fatalf("termproxy answered %q, %v; want OK then the echo of the input frame", got, err)
		}

		var g2 grantAnswer
		_, body = e.call(t, root, "POST", "/api2/json/nodes/sim-lab/qemu/"+strconv.FormatInt(a, 10)+"/termproxy", nil)
		if err := json.Unmarshal([]byte(body), &g2); err != nil {
			t.Fatal(err)
		}
		c, code, msg = dial(root, a, g2.Data.Port, g2.Data.Ticket)
		if c == nil {
			t.Fatalf("%d %s", code, msg)
		}
		if _, err := c.Write([]byte("root@pam!vnc:PVEVNC:wrong\n")); err != nil {
			t.Fatal(err)
		}
		if n, err := c.Read(got); err == nil {
			t.Fatalf("a first line without the ticket got %q; want the socket closed", got[:n])
		}
	})
	t.Run("no credentials", func(t *testing.T) {
		_, code, _ := dial("", a, g.Data.Port, g.Data.Ticket)
		if code != 401 {
			t.Fatalf("%d; want 401", code)
		}
	})
}
