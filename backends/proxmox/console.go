package proxmox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
	proxmox "github.com/luthermonson/go-proxmox"

	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/internal/rfb"
)

// handshakeTimeout bounds PVE's VNC password step.
const handshakeTimeout = 15 * time.Second

// Consoles implements backends.ConsoleDialer: a running qemu guest offers
// its VNC display, and its first serial port when its config has one
// (serial0). The consoles of lxc guests are not offered.
func (b *Backend) Consoles(ctx context.Context, ref backends.InstanceRef) ([]backends.ConsoleKind, error) {
	g, err := b.lookup(ctx, ref)
	if err != nil {
		return nil, err
	}
	if g.kind != "qemu" || g.state() != backends.StateRunning {
		return []backends.ConsoleKind{}, nil
	}
	var conf map[string]any
	if err := b.c.Get(ctx, g.path("config"), &conf); err != nil {
		return nil, b.fail("read the configuration of", ref.Name, err)
	}
	if _, ok := conf["serial0"]; ok {
		return []backends.ConsoleKind{backends.ConsoleVNC, backends.ConsoleSerial}, nil
	}
	return []backends.ConsoleKind{backends.ConsoleVNC}, nil
}

// DialConsole implements backends.ConsoleDialer for VNC, in PVE's two
// steps: POST .../vncproxy with websocket=1 answers a port and a ticket,
// and GET .../vncwebsocket?port=&vncticket= (authenticated with the API
// token, over the backend's TLS configuration) upgrades to a websocket of
// binary frames carrying the display's RFB stream. PVE guards that stream
// with VNC Authentication whose password is the ticket; the backend
// answers it and hands the caller a connection to an RFB server that asks
// for no password (security type None), which is what the console bridge
// and noVNC expect. The ticket never leaves the backend.
//
// Serial is PVE's termproxy for serial0 on the same websocket: after its
// opening line, what the caller writes is sent as input frames and what it
// reads is the terminal's output.
func (b *Backend) DialConsole(ctx context.Context, ref backends.InstanceRef, kind backends.ConsoleKind) (net.Conn, error) {
	switch kind {
	case backends.ConsoleVNC, backends.ConsoleSerial:
	case backends.ConsoleRDP:
		return nil, backends.Refuse(backends.KindProxmox, "RDP console", "use the VNC console, or RDP to the guest over its network")
	default:
		return nil, backends.Invalidf("console kind %q is not accepted: use vnc", kind)
	}
	g, err := b.lookup(ctx, ref)
	if err != nil {
		return nil, err
	}
	if g.kind != "qemu" {
		return nil, backends.Refuse(backends.KindProxmox, "the console of a container", "open the container's console in PVE's web UI")
	}
	if g.state() != backends.StateRunning {
		return nil, backends.Conflictf("%s is %s: start it first", ref.Name, g.state())
	}
	var vnc proxmox.VNC
	if kind == backends.ConsoleSerial {
		err = b.c.Post(ctx, g.path("termproxy"), map[string]any{"serial": "serial0"}, &vnc)
	} else {
		err = b.c.Post(ctx, g.path("vncproxy"), map[string]any{"websocket": 1}, &vnc)
	}
	if err != nil {
		return nil, b.fail("open the console of", ref.Name, err)
	}
	if vnc.Ticket == "" || vnc.Port == 0 {
		return nil, backends.Failed("Proxmox VE answered the console request of "+ref.Name+" without a ticket", errors.New("vncproxy: empty ticket or port"))
	}
	u, err := url.Parse(b.opts.URL)
	if err != nil {
		return nil, backends.Invalidf("the URL of context %s is not valid", b.opts.Context)
	}
	u.Scheme = map[string]string{"https": "wss", "http": "ws"}[u.Scheme]
	u.Path = strings.TrimSuffix(u.Path, "/") + g.path("vncwebsocket")
	u.RawQuery = url.Values{"port": {fmt.Sprint(int(vnc.Port))}, "vncticket": {vnc.Ticket}}.Encode()
	ws, res, err := websocket.Dial(ctx, u.String(), &websocket.DialOptions{
		HTTPClient:      b.hc,
		HTTPHeader:      http.Header{"Authorization": {"PVEAPIToken=" + b.opts.TokenID + "=" + b.opts.Secret}},
		Subprotocols:    []string{"binary"},
		CompressionMode: websocket.CompressionDisabled,
	})
	if err != nil {
		return nil, b.wsFail(ref.Name, res, err)
	}
	// NetConn disables the read limit; the stream lives as long as ctx.
	up := websocket.NetConn(ctx, ws, websocket.MessageBinary)
	if kind == backends.ConsoleSerial {
		return termOpen(up, vnc.User, vnc.Ticket, ref.Name)
	}
	clear := rfb.Deadline(up, handshakeTimeout)
	if err := rfb.ClientHandshake(up, vnc.Ticket); err != nil {
		up.Close()
		if errors.Is(err, rfb.ErrAuth) {
			return nil, &backends.Error{Kind: backends.ErrForbidden, Msg: fmt.Sprintf("Proxmox VE did not accept the VNC ticket for %s in context %s", ref.Name, b.opts.Context), Err: err}
		}
		return nil, backends.Failed("the VNC handshake with the display of "+ref.Name+" failed", err)
	}
	clear()
	return front(up), nil
}

// wsFail maps a failed websocket dial: an HTTP answer is an API error like
// any other (the body is PVE's JSON error), no answer is unreachable.
func (b *Backend) wsFail(name string, res *http.Response, err error) error {
	if res == nil {
		return backends.Unavailable(b.opts.Context, err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(res.Body, 4<<10))
	api := &proxmox.APIError{StatusCode: res.StatusCode, Status: res.Status, Message: strings.TrimSpace(string(body))}
	return mapError(b.opts.Context, "open the console of", name, api)
}

// front returns the caller's end of a pipe whose other end plays an RFB
// server without authentication and then relays to up, which stands past
// PVE's security handshake (at ClientInit). Closing either side closes
// both.
func front(up net.Conn) net.Conn {
	mine, theirs := net.Pipe()
	go func() {
		defer up.Close()
		defer mine.Close()
		if err := rfb.ServerHandshake(mine, nil, ""); err != nil {
			return
		}
		done := make(chan struct{}, 2)
		go func() { _, _ = io.Copy(up, mine); done <- struct{}{} }()
		go func() { _, _ = io.Copy(mine, up); done <- struct{}{} }()
		<-done
	}()
	return theirs
}

// termOpen performs termproxy's opening on up ("USER:TICKET\n", answered
// "OK") and returns a connection whose writes become input frames.
func termOpen(up net.Conn, user, ticket, name string) (net.Conn, error) {
	clear := rfb.Deadline(up, handshakeTimeout)
	_, err := up.Write([]byte(user + ":" + ticket + "\n"))
	ok := make([]byte, 2)
	if err == nil {
		_, err = io.ReadFull(up, ok)
	}
	if err != nil || string(ok) != "OK" {
		up.Close()
		return nil, backends.Failed("the serial console of "+name+" did not accept its ticket", fmt.Errorf("termproxy: %q, %v", ok, err))
	}
	clear()
	return &termConn{Conn: up}, nil
}

// termConn is a termproxy stream: reads are the terminal's output as it
// comes, each write one input frame "0:LEN:DATA".
type termConn struct {
	net.Conn
	mu sync.Mutex
}

func (c *termConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	frame := append(fmt.Appendf(nil, "0:%d:", len(p)), p...)
	if _, err := c.Conn.Write(frame); err != nil {
		return 0, err
	}
	return len(p), nil
}
