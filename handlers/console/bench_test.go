package console_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/go-chi/chi/v5"

	"github.com/corral-dev/corral/app/fleet"
	"github.com/corral-dev/corral/app/instances"
	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/backends/sim"
	"github.com/corral-dev/corral/handlers/console"
)

// BenchmarkBridge measures the VNC bridge against a direct loopback TCP
// connection with the same message sizes. The browser side is a
// coder/websocket client, the backend a TCP server on loopback reached
// through a test ConsoleDialer; all run in this process, so the client's
// masking and framing count against the bridge (a pessimistic figure).
//
//   - download, upload: MB/s through the bridge (the standard column),
//     raw-MB/s over plain TCP for the same bytes, ratio = bridge/raw, and
//     wsonly-MB/s, the same client against a WebSocket endpoint with no
//     backend hop: the client's own ceiling.
//   - rtt: ns/op is one round trip of a message through the bridge to an
//     echo server; raw-ns/rtt the same over TCP; added-µs/msg is the
//     difference per message and direction.
func BenchmarkBridge(b *testing.B) {
	for _, size := range []int{1 << 10, 32 << 10} {
		b.Run(fmt.Sprintf("download/%dKiB", size>>10), func(b *testing.B) { benchThroughput(b, size, false) })
		b.Run(fmt.Sprintf("upload/%dKiB", size>>10), func(b *testing.B) { benchThroughput(b, size, true) })
	}
	for _, size := range []int{16, 1 << 10} {
		b.Run(fmt.Sprintf("rtt/%dB", size), func(b *testing.B) { benchRTT(b, size) })
	}
}

// tcpBackend dials every console at one TCP address.
type tcpBackend struct {
	*sim.Backend
	addr string
}

func (t *tcpBackend) Consoles(context.Context, backends.InstanceRef) ([]backends.ConsoleKind, error) {
	return []backends.ConsoleKind{backends.ConsoleVNC}, nil
}

func (t *tcpBackend) DialConsole(ctx context.Context, _ backends.InstanceRef, _ backends.ConsoleKind) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, "tcp", t.addr)
}

// server is a loopback TCP server running serve on each connection.
func server(b *testing.B, serve func(net.Conn)) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); serve(c) }()
		}
	}()
	return ln.Addr().String()
}

// bridge serves the console routes for a backend at addr and returns a
// WebSocket client connected to its VNC bridge.
func bridge(b *testing.B, addr string) *websocket.Conn {
	ctx := context.Background()
	sb := sim.New(sim.Options{Context: "bench"})
	if _, err := sb.Create(ctx, backends.Spec{Name: "vm", Start: true}); err != nil {
		b.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	f := fleet.New(fleet.Options{Logger: log})
	if err := f.Add(&tcpBackend{Backend: sb, addr: addr}); err != nil {
		b.Fatal(err)
	}
	r := chi.NewRouter()
	console.Mount(r, console.Deps{Fleet: f, Instances: instances.New(f, nil, nil, log), Log: log})
	srv := httptest.NewServer(r)
	b.Cleanup(srv.Close)
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http")+"/ws/vnc/sim/bench/-/vm", nil)
	if err != nil {
		b.Fatal(err)
	}
	c.SetReadLimit(-1)
	b.Cleanup(func() { c.CloseNow() })
	return c
}

// wsConn adapts the client to io.ReadWriter: one message per Write, and
// Read across message boundaries.
type wsConn struct {
	c *websocket.Conn
	r io.Reader
}

func (w *wsConn) Write(p []byte) (int, error) {
	return len(p), w.c.Write(context.Background(), websocket.MessageBinary, p)
}

func (w *wsConn) Read(p []byte) (int, error) {
	for {
		if w.r == nil {
			_, r, err := w.c.Reader(context.Background())
			if err != nil {
				return 0, err
			}
			w.r = r
		}
		n, err := w.r.Read(p)
		if err == io.EOF {
			w.r = nil
			if n == 0 {
				continue
			}
			err = nil
		}
		return n, err
	}
}

func benchThroughput(b *testing.B, size int, upload bool) {
	var want atomic.Int64       // bytes the sink must see before it acks
	serve := func(c net.Conn) { // download: send size-byte chunks forever
		buf := make([]byte, size)
		for {
			if _, err := c.Write(buf); err != nil {
				return
			}
		}
	}
	if upload {
		serve = func(c net.Conn) { // count, and ack once want is reached
			buf := make([]byte, 64<<10)
			var got int64
			for {
				n, err := c.Read(buf)
				if err != nil {
					return
				}
				got += int64(n)
				if w := want.Load(); w > 0 && got >= w {
					got -= w
					if _, err := c.Write([]byte{1}); err != nil {
						return
					}
				}
			}
		}
	}
	addr := server(b, serve)
	ws := &wsConn{c: bridge(b, addr)}
	raw, err := net.Dial("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	defer raw.Close()

	run := func(rw io.ReadWriter, n int) time.Duration {
		total := int64(n) * int64(size)
		start := time.Now()
		if upload {
			want.Store(total)
			msg := make([]byte, size)
			for range n {
				if _, err := rw.Write(msg); err != nil {
					b.Fatal(err)
				}
			}
			if _, err := io.ReadFull(rw, make([]byte, 1)); err != nil {
				b.Fatal(err)
			}
		} else if err := drain(rw, total); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	b.SetBytes(int64(size))
	b.ResetTimer()
	viaBridge := run(ws, b.N)
	b.StopTimer()
	if !upload {
		// The source kept sending while the bridge ran: the direct
		// connection measures from a full pipe, as the bridge did.
		_ = drain(raw, int64(size))
	}
	direct := run(raw, b.N)
	wsOnly := run(&wsConn{c: wsEndpoint(b, size, upload, &want)}, b.N)
	mbs := func(d time.Duration) float64 { return float64(b.N) * float64(size) / d.Seconds() / 1e6 }
	b.ReportMetric(mbs(direct), "raw-MB/s")
	b.ReportMetric(mbs(viaBridge)/mbs(direct), "ratio")
	b.ReportMetric(mbs(wsOnly), "wsonly-MB/s")
}

// wsEndpoint is the ceiling of the WebSocket client itself: the same
// client against an endpoint that is the source or the sink, with no
// backend hop. The bridge cannot beat it; bridge/wsonly is the share of
// the client's own ceiling the bridge keeps.
func wsEndpoint(b *testing.B, size int, upload bool, want *atomic.Int64) *websocket.Conn {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer c.CloseNow()
		ctx := r.Context()
		if !upload {
			buf := make([]byte, size)
			for c.Write(ctx, websocket.MessageBinary, buf) == nil {
			}
			return
		}
		c.SetReadLimit(-1)
		rd := &wsConn{c: c}
		buf := make([]byte, 64<<10)
		var got int64
		for {
			n, err := rd.Read(buf)
			if err != nil {
				return
			}
			got += int64(n)
			if w := want.Load(); w > 0 && got >= w {
				got -= w
				if c.Write(ctx, websocket.MessageBinary, []byte{1}) != nil {
					return
				}
			}
		}
	}))
	b.Cleanup(srv.Close)
	c, _, err := websocket.Dial(context.Background(), "ws"+strings.TrimPrefix(srv.URL, "http"), nil)
	if err != nil {
		b.Fatal(err)
	}
	c.SetReadLimit(-1)
	b.Cleanup(func() { c.CloseNow() })
	return c
}

// drain reads n bytes from r through a 64 KiB buffer (io.Discard's own is
// 8 KiB, which would make the client, not the path, the bottleneck).
func drain(r io.Reader, n int64) error {
	buf := make([]byte, 64<<10)
	for n > 0 {
		m, err := r.Read(buf[:min(int64(len(buf)), n)])
		n -= int64(m)
		if err != nil && n > 0 {
			return err
		}
	}
	return nil
}

func benchRTT(b *testing.B, size int) {
	addr := server(b, func(c net.Conn) { _, _ = io.Copy(c, c) })
	ws := &wsConn{c: bridge(b, addr)}
	raw, err := net.Dial("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	defer raw.Close()
	msg, back := make([]byte, size), make([]byte, size)
	run := func(rw io.ReadWriter, n int) time.Duration {
		start := time.Now()
		for range n {
			if _, err := rw.Write(msg); err != nil {
				b.Fatal(err)
			}
			if _, err := io.ReadFull(rw, back); err != nil {
				b.Fatal(err)
			}
		}
		return time.Since(start)
	}
	b.ResetTimer()
	viaBridge := run(ws, b.N)
	b.StopTimer()
	direct := run(raw, b.N)
	perRTT := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / float64(b.N) }
	b.ReportMetric(perRTT(direct), "raw-ns/rtt")
	b.ReportMetric((perRTT(viaBridge)-perRTT(direct))/2/1e3, "added-µs/msg")
}
