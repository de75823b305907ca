package console

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/coder/websocket"

	"github.com/corral-dev/corral/backends"
)

// Tunables of the bridges.
const (
	// bufSize is the largest message the bridge sends to the browser: one
	// read from the backend. 64 KiB moves a VNC framebuffer update in few
	// messages; both directions of a bridge hold one buffer each.
	bufSize = 64 << 10
	// readLimit bounds one message from the browser. Messages are streamed
	// to the backend, not buffered, so the limit only stops abuse; a large
	// paste into a terminal still fits.
	readLimit = 4 << 20
	// pingEvery and pingTimeout keep idle consoles open through proxies
	// and notice a browser that vanished without closing.
	pingEvery   = 25 * time.Second
	pingTimeout = 15 * time.Second
)

// Close reasons the browser shows. A WebSocket close reason is at most
// 123 bytes; these are constant, never a backend's error text.
const (
	reasonBackendClosed = "the console connection to the instance closed"
	reasonTooSlow       = "this viewer fell behind the console output"
	reasonBrowserGone   = "the browser went away"
)

// acceptOptions: the default origin check stays on (only an Origin whose
// host is the request's Host is accepted); noVNC may ask for the "binary"
// subprotocol, which Chrome requires the server to echo; compression is off
// because VNC data is compressed already and terminals send little.
var acceptOptions = &websocket.AcceptOptions{
	Subprotocols:    []string{"binary"},
	CompressionMode: websocket.CompressionDisabled,
}

// isUpgrade reports whether r asks for a WebSocket.
func isUpgrade(r *http.Request) bool {
	return strings.EqualFold(r.Header.Get("Upgrade"), "websocket")
}

// checkOrigin refuses a cross-origin request before anything is dialed,
// with the rule websocket.Accept applies again at the upgrade: a request
// without Origin (not from a browser) passes; a browser's must name this
// host.
func checkOrigin(r *http.Request) error {
	o := r.Header.Get("Origin")
	if o == "" {
		return nil
	}
	u, err := url.Parse(o)
	if err != nil || !strings.EqualFold(u.Host, r.Host) {
		return backends.Forbiddenf("consoles accept WebSocket connections from this site's own pages only")
	}
	return nil
}

// dial opens t's console of kind (backends.DialConsole).
func dial(ctx context.Context, t target, kind backends.ConsoleKind) (net.Conn, context.CancelFunc, error) {
	return backends.DialConsole(ctx, t.dialer, t.ref, kind)
}

// end says why one side of a bridge stopped and how to close the socket.
type end struct {
	code   websocket.StatusCode
	reason string
	// gone: the browser closed or vanished; there is nobody to tell.
	gone bool
	err  error
}

func browserGone(err error) end { return end{gone: true, reason: reasonBrowserGone, err: err} }

func backendGone(err error) end {
	return end{code: websocket.StatusGoingAway, reason: reasonBackendClosed, err: err}
}

// close finishes c as e says: a close handshake with a code and reason, or
// an immediate close when the browser is gone.
func (e end) close(c *websocket.Conn) {
	if e.gone {
		_ = c.CloseNow()
		return
	}
	_ = c.Close(e.code, e.reason)
}

// fromBrowser copies every message from the browser to write until either
// side fails. A message is streamed through one buffer, but the buffer is
// filled before it is written: a message arrives in several TCP reads, and
// one write per message (up to the buffer's size) instead of one per read
// halves the cost of an upload.
func fromBrowser(ctx context.Context, c *websocket.Conn, write func([]byte) error) end {
	buf := make([]byte, bufSize)
	for {
		_, rd, err := c.Reader(ctx)
		if err != nil {
			return browserGone(err)
		}
		for eof := false; !eof; {
			n := 0
			for n < len(buf) {
				m, rerr := rd.Read(buf[n:])
				n += m
				if rerr == io.EOF {
					eof = true
					break
				}
				if rerr != nil {
					return browserGone(rerr)
				}
			}
			if n > 0 {
				if werr := write(buf[:n]); werr != nil {
					return backendGone(werr)
				}
			}
		}
	}
}

// toBrowser sends what the backend writes to the browser, one binary
// message per read.
func toBrowser(ctx context.Context, c *websocket.Conn, conn net.Conn) end {
	buf := make([]byte, bufSize)
	for {
		n, err := conn.Read(buf)
		if n > 0 {
			if werr := c.Write(ctx, websocket.MessageBinary, buf[:n]); werr != nil {
				return browserGone(werr)
			}
		}
		if err != nil {
			return backendGone(err)
		}
	}
}

// keepalive pings the browser until ctx ends and reports a missing pong.
// A ping needs a concurrent reader, which every bridge has.
func keepalive(ctx context.Context, c *websocket.Conn, done chan<- end) {
	t := time.NewTicker(pingEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			pctx, cancel := context.WithTimeout(ctx, pingTimeout)
			err := c.Ping(pctx)
			cancel()
			if err != nil {
				done <- browserGone(err)
				return
			}
		}
	}
}

// vnc is GET /ws/vnc/{ref}: a bridge to a connection of the viewer's own.
// Everything that can be refused (origin, instance, capability, a stopped
// instance) is refused with a status before the upgrade.
func (s *server) vnc(w http.ResponseWriter, r *http.Request) error {
	if err := checkOrigin(r); err != nil {
		return err
	}
	t, err := s.resolve(r, "/ws/vnc/")
	if err != nil {
		return err
	}
	conn, cancel, err := dial(r.Context(), t, backends.ConsoleVNC)
	if err != nil {
		return err
	}
	defer cancel()
	defer conn.Close()
	c, err := websocket.Accept(w, r, acceptOptions)
	if err != nil {
		return nil // Accept has answered
	}
	c.SetReadLimit(readLimit)
	defer s.opened(t.ref)()
	s.Log.Debug("console: vnc viewer connected", "ref", t.ref.String())
	e := pump(r.Context(), c, conn)
	s.Log.Debug("console: vnc viewer disconnected", "ref", t.ref.String(), "reason", e.reason, "err", e.err)
	return nil
}

// pump copies bytes both ways between the browser's socket c and the
// console connection conn, with keepalives, until either side ends; it
// closes both and returns how it ended. The VNC bridge and the RDP proxy
// (after its handshake) both run it.
func pump(ctx context.Context, c *websocket.Conn, conn net.Conn) end {
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan end, 3)
	go func() { done <- fromBrowser(ctx, c, func(p []byte) error { _, err := conn.Write(p); return err }) }()
	go func() { done <- toBrowser(ctx, c, conn) }()
	go keepalive(ctx, c, done)
	e := <-done
	conn.Close()
	// Close before cancelling ctx: coder/websocket drops the connection
	// when a pending read's context ends, and the close frame with its
	// reason would be lost.
	e.close(c)
	stop()
	return e
}
