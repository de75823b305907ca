package backends_test

import (
	"context"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/corral-dev/corral/backends"
)

// TestProbeRDP runs the probe against servers that answer as an RDP
// server does, hang up, stay silent, or speak another protocol.
func TestProbeRDP(t *testing.T) {
	for _, tc := range []struct {
		name  string
		serve func(net.Conn)
		want  string // "" for RDP
	}{
		{"rdp", func(c net.Conn) {
			buf := make([]byte, 19)
			if _, err := io.ReadFull(c, buf); err != nil || buf[0] != 3 || buf[5] != 0xe0 {
				return // not a Connection Request: no answer
			}
			_, _ = c.Write([]byte{0x03, 0x00, 0x00, 0x13, 0x0e, 0xd0})
		}, ""},
		{"hangs up", func(c net.Conn) {}, "the connection was closed"},
		{"silent", func(c net.Conn) { time.Sleep(3 * time.Second) }, "no answer in time"},
		{"http", func(c net.Conn) { _, _ = io.WriteString(c, "HTTP/1.1 400 Bad Request\r\n\r\n") }, "not RDP"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			go func() {
				for {
					c, err := ln.Accept()
					if err != nil {
						return
					}
					go func() { defer c.Close(); tc.serve(c) }()
				}
			}()
			err = backends.ProbeRDP(context.Background(), ln.Addr().String(), func(ctx context.Context) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "tcp", ln.Addr().String())
			})
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("ProbeRDP = %v, want RDP to answer", err)
			case tc.want != "" && (err == nil || !strings.Contains(backends.SafeMessage(err), tc.want)):
				t.Fatalf("ProbeRDP = %v, want a reason with %q", err, tc.want)
			case tc.want != "" && !strings.Contains(backends.SafeMessage(err), ln.Addr().String()):
				t.Fatalf("reason %q names no address", backends.SafeMessage(err))
			}
		})
	}
	t.Run("nothing listens", func(t *testing.T) {
		err := backends.ProbeRDP(context.Background(), "127.0.0.1:1", func(ctx context.Context) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "tcp", "127.0.0.1:1")
		})
		if err == nil || !strings.Contains(backends.SafeMessage(err), "TCP 3389 did not answer at 127.0.0.1:1") {
			t.Fatalf("ProbeRDP = %v", err)
		}
	})
}
