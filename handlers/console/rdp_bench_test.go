package console_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// BenchmarkRDPProxy measures the stream through the RDP proxy once the
// RDCleanPath exchange is done: a coder/websocket client, the proxy (WS
// to TLS) and a TLS echo server on loopback, all in this process, against
// the same client talking TLS to the echo server directly (raw). ns/op is
// one round trip of a message; raw-ns/rtt the same without the proxy;
// added-µs/msg the difference per message and direction.
func BenchmarkRDPProxy(b *testing.B) {
	for _, size := range []int{16, 1 << 10, 16 << 10} {
		b.Run(fmt.Sprintf("rtt/%dB", size), func(b *testing.B) {
			srv := newFakeRDP(b, connectionConfirm(1, false), true)
			g := newRDPRig(b, srv.addr, nil)
			tok := g.mustToken(b, refDesk, "")
			c := g.open(b, refDesk, "")
			if resp := exchange(b, c, cleanPath{Destination: tok.Destination, ProxyAuth: tok.Token, X224: connectionRequest()}); resp.Error != (cleanPathErr{}) {
				b.Fatalf("exchange: %+v", resp.Error)
			}
			c.SetReadLimit(-1)
			nc := websocket.NetConn(context.Background(), c, websocket.MessageBinary)
			raw := directTLS(b, srv.addr)
			msg := make([]byte, size)
			buf := make([]byte, size)
			roundTrip := func(rw io.ReadWriter) {
				if _, err := rw.Write(msg); err != nil {
					b.Fatal(err)
				}
				if _, err := io.ReadFull(rw, buf); err != nil {
					b.Fatal(err)
				}
			}
			const rawN = 2000
			start := time.Now()
			for range rawN {
				roundTrip(raw)
			}
			rawNs := float64(time.Since(start).Nanoseconds()) / rawN
			b.SetBytes(int64(2 * size))
			b.ResetTimer()
			for b.Loop() {
				roundTrip(nc)
			}
			b.StopTimer()
			perOp := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
			b.ReportMetric(rawNs, "raw-ns/rtt")
			b.ReportMetric((perOp-rawNs)/2/1000, "added-µs/msg")
		})
	}
}

// directTLS does what the proxy does, from the client's side: the X.224
// request, the Confirm, then TLS to the server.
func directTLS(b *testing.B, addr string) net.Conn {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	if _, err := c.Write(connectionRequest()); err != nil {
		b.Fatal(err)
	}
	cc := make([]byte, len(connectionConfirm(1, false)))
	if _, err := io.ReadFull(c, cc); err != nil {
		b.Fatal(err)
	}
	tc := tls.Client(c, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // a test server's self-signed certificate
	if err := tc.Handshake(); err != nil {
		b.Fatal(err)
	}
	return tc
}
