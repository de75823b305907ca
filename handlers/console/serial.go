package console

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"net/http"
	"sync"

	"github.com/coder/websocket"

	"github.com/corral-dev/corral/backends"
)

// scrollbackMax is how much of the serial log a new viewer is sent first.
const scrollbackMax = 64 << 10

// viewerQueue is how many chunks of output wait for one viewer. A viewer
// that falls this far behind is disconnected (it reconnects and gets the
// scrollback) rather than slowing the console down for everyone.
const viewerQueue = 1024

// hubs holds one hub per instance whose serial console has viewers. One
// mutex guards the map and every hub's viewer set: membership changes are
// rare, and one lock makes "last viewer leaves" and "a viewer joins" unable
// to race into two backend connections.
type hubs struct {
	log *slog.Logger
	mu  sync.Mutex
	m   map[string]*hub
}

func newHubs(log *slog.Logger) *hubs { return &hubs{log: log, m: map[string]*hub{}} }

// hub is the one backend connection of an instance's serial console.
type hub struct {
	key     string
	ready   chan struct{} // closed when the dial ended; then conn or err is set
	conn    net.Conn
	cancel  context.CancelFunc
	err     error
	viewers map[*viewer]struct{} // guarded by hubs.mu
	closed  bool                 // guarded by hubs.mu

	wmu sync.Mutex // serializes input, so messages never interleave
}

// viewer is one browser on a hub.
type viewer struct {
	hub   *hub
	out   chan []byte
	ended chan struct{} // closed by finish
	why   end
}

// finish ends v with e; the caller holds hubs.mu.
func (v *viewer) finish(e end) {
	select {
	case <-v.ended:
	default:
		v.why = e
		close(v.ended)
	}
}

// write sends input from any viewer to the instance.
func (h *hub) write(p []byte) error {
	h.wmu.Lock()
	defer h.wmu.Unlock()
	_, err := h.conn.Write(p)
	return err
}

// join adds a viewer to t's hub, dialing the console when the instance has
// no hub yet. The dial outlives the request that made it (the hub serves
// later viewers too), so it runs on a context of its own, cancelled when
// the hub closes. A failed dial is returned to every viewer waiting on it.
func (hs *hubs) join(ctx context.Context, t target) (*viewer, error) {
	key := t.ref.String()
	v := &viewer{out: make(chan []byte, viewerQueue), ended: make(chan struct{})}
	for {
		hs.mu.Lock()
		h := hs.m[key]
		if h == nil {
			h = &hub{key: key, ready: make(chan struct{}), viewers: map[*viewer]struct{}{}}
			hs.m[key] = h
			hs.mu.Unlock()
			h.conn, h.cancel, h.err = dial(context.WithoutCancel(ctx), t, backends.ConsoleSerial)
			hs.mu.Lock()
			if h.err != nil {
				delete(hs.m, key)
				hs.mu.Unlock()
				close(h.ready)
				return nil, h.err
			}
			// Register before the reader starts, so a console that ends at
			// once still has a viewer to tell.
			v.hub = h
			h.viewers[v] = struct{}{}
			hs.mu.Unlock()
			close(h.ready)
			go hs.run(h)
			return v, nil
		}
		hs.mu.Unlock()
		select {
		case <-h.ready:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if h.err != nil {
			return nil, h.err
		}
		hs.mu.Lock()
		if !h.closed {
			v.hub = h
			h.viewers[v] = struct{}{}
			hs.mu.Unlock()
			return v, nil
		}
		hs.mu.Unlock() // closed meanwhile: dial a new one
	}
}

// leave removes v; the last viewer out closes the backend connection, so
// the port is free for other clients.
func (hs *hubs) leave(v *viewer) {
	hs.mu.Lock()
	h := v.hub
	if _, ok := h.viewers[v]; !ok {
		hs.mu.Unlock()
		return
	}
	v.finish(browserGone(nil))
	last := hs.removeLocked(v)
	hs.mu.Unlock()
	if last {
		h.shut()
	}
}

// removeLocked takes v off its hub and reports whether the hub has just
// closed because v was the last viewer.
func (hs *hubs) removeLocked(v *viewer) bool {
	h := v.hub
	delete(h.viewers, v)
	if len(h.viewers) > 0 || h.closed {
		return false
	}
	h.closed = true
	if hs.m[h.key] == h {
		delete(hs.m, h.key)
	}
	return true
}

func (h *hub) shut() {
	h.conn.Close()
	h.cancel()
}

// run fans the console's output out to every viewer until the connection
// ends. A viewer whose queue is full is dropped, never waited for.
func (hs *hubs) run(h *hub) {
	buf := make([]byte, bufSize)
	for {
		n, err := h.conn.Read(buf)
		if n > 0 {
			chunk := bytes.Clone(buf[:n])
			shut := false
			hs.mu.Lock()
			for v := range h.viewers {
				select {
				case v.out <- chunk:
				default:
					v.finish(end{code: websocket.StatusPolicyViolation, reason: reasonTooSlow})
					shut = hs.removeLocked(v) || shut
				}
			}
			hs.mu.Unlock()
			if shut {
				h.shut()
				return
			}
		}
		if err != nil {
			hs.mu.Lock()
			wasClosed := h.closed
			h.closed = true
			if hs.m[h.key] == h {
				delete(hs.m, h.key)
			}
			for v := range h.viewers {
				v.finish(backendGone(err))
				delete(h.viewers, v)
			}
			hs.mu.Unlock()
			h.shut()
			if !wasClosed {
				hs.log.Info("console: serial connection ended", "ref", h.key, "err", err)
			}
			return
		}
	}
}

// serial is GET /ws/serial/{ref}: a viewer of the instance's serial hub.
// A new viewer first receives the scrollback when the backend keeps one.
func (s *server) serial(w http.ResponseWriter, r *http.Request) error {
	if err := checkOrigin(r); err != nil {
		return err
	}
	t, err := s.resolve(r, "/ws/serial/")
	if err != nil {
		return err
	}
	v, err := s.hubs.join(r.Context(), t)
	if err != nil {
		return err
	}
	defer s.hubs.leave(v)
	// Joined first, read the log second: output arriving in between is
	// queued and may repeat the log's last bytes, but none is lost.
	var history []byte
	if sb, ok := t.b.(backends.Scrollback); ok {
		cctx, cancel := s.Fleet.CallContext(r.Context())
		history, err = sb.SerialScrollback(cctx, t.ref, scrollbackMax)
		cancel()
		if err != nil {
			s.Log.Warn("console: serial scrollback unavailable", "ref", t.ref.String(), "err", err)
			history = nil
		}
	}
	c, err := websocket.Accept(w, r, acceptOptions)
	if err != nil {
		return nil // Accept has answered
	}
	c.SetReadLimit(readLimit)
	if s.Track != nil {
		defer s.Track(t.ref, backends.ConsoleSerial)()
	}

	ctx, stop := context.WithCancel(r.Context())
	defer stop()
	done := make(chan end, 3)
	go func() { done <- fromBrowser(ctx, c, v.hub.write) }()
	go func() { done <- toViewer(ctx, c, v, history) }()
	go keepalive(ctx, c, done)
	e := <-done
	s.hubs.leave(v)
	e.close(c) // before stop: see vnc
	stop()
	s.Log.Debug("console: serial viewer disconnected", "ref", t.ref.String(), "reason", e.reason, "err", e.err)
	return nil
}

// toViewer sends the history as the first message, always, even empty (the
// page replaces its terminal's contents with a non-empty one, so a
// reconnect does not show the history twice), then the hub's output as it
// comes. When the hub ends the viewer, what was queued is still delivered.
func toViewer(ctx context.Context, c *websocket.Conn, v *viewer, history []byte) end {
	if err := c.Write(ctx, websocket.MessageBinary, history); err != nil {
		return browserGone(err)
	}
	for {
		select {
		case p := <-v.out:
			if err := c.Write(ctx, websocket.MessageBinary, p); err != nil {
				return browserGone(err)
			}
		case <-v.ended:
			for {
				select {
				case p := <-v.out:
					if err := c.Write(ctx, websocket.MessageBinary, p); err != nil {
						return browserGone(err)
					}
				default:
					return v.why
				}
			}
		case <-ctx.Done():
			return browserGone(ctx.Err())
		}
	}
}
