package console_test

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/asn1"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/corral-dev/corral/app/auth"
	"github.com/corral-dev/corral/backends"
)

// TestRDPProxy drives the proxy with a client written from the protocol
// against a fake TLS RDP server: the exchange, then bytes both ways
// through the proxy's TLS.
func TestRDPProxy(t *testing.T) {
	srv := newFakeRDP(t, connectionConfirm(1, false), true)
	g := newRDPRig(t, srv.addr, nil)
	tok := g.mustToken(t, refDesk, "alice@example.com")
	if tok.Socket != "/ws/rdp/"+refDesk || tok.Destination != "desk:3389" || tok.ExpiresIn != 60 {
		t.Fatalf("token answer = %+v", tok)
	}
	c := g.open(t, refDesk, "alice@example.com")
	cr := connectionRequest()
	resp := exchange(t, c, cleanPath{Destination: tok.Destination, ProxyAuth: tok.Token, X224: cr})

	if resp.Error != (cleanPathErr{}) {
		t.Fatalf("answer is an error: %+v", resp.Error)
	}
	if !bytes.Equal(resp.X224, connectionConfirm(1, false)) {
		t.Fatalf("x224 = %x, want the server's Confirm verbatim", resp.X224)
	}
	if len(resp.CertChain) != 1 || !bytes.Equal(resp.CertChain[0], srv.cert.Certificate[0]) {
		t.Fatalf("certificate chain = %d certificates, want the server's", len(resp.CertChain))
	}
	if _, err := x509.ParseCertificate(resp.CertChain[0]); err != nil {
		t.Fatal(err)
	}
	if resp.ServerAddr != srv.addr {
		t.Fatalf("server address = %q, want %q", resp.ServerAddr, srv.addr)
	}
	if got := srv.requests(); len(got) != 1 || !bytes.Equal(got[0], cr) {
		t.Fatalf("the server received %x, want the client's Connection Request verbatim", got)
	}
	eventually(t, "the tracked connection", func() bool { return g.track.count(refDesk) == 1 })

	// The stream: what the client writes reaches the server through TLS
	// and the server's echo comes back, in messages of any size.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	nc := websocket.NetConn(ctx, c, websocket.MessageBinary)
	big := bytes.Repeat([]byte("0123456789abcdef"), 20000) // 320 KB: several TLS records
	go func() { _, _ = nc.Write(big) }()
	got := make([]byte, len(big))
	if _, err := io.ReadFull(nc, got); err != nil || !bytes.Equal(got, big) {
		t.Fatalf("echo through the proxy: %v (equal %v)", err, bytes.Equal(got, big))
	}
	nc.Close()
	eventually(t, "the tracked connection ends", func() bool { return g.track.count(refDesk) == 0 })
}

// TestRDPProxyDialsTheTokensTarget: the client's destination is never
// dialed; a different one is only logged.
func TestRDPProxyDialsTheTokensTarget(t *testing.T) {
	srv := newFakeRDP(t, connectionConfirm(1, false), true)
	g := newRDPRig(t, srv.addr, nil)
	// Something that would notice a dial to the client's destination.
	trap, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer trap.Close()
	trapped := make(chan struct{}, 1)
	go func() {
		if c, err := trap.Accept(); err == nil {
			c.Close()
			trapped <- struct{}{}
		}
	}()
	tok := g.mustToken(t, refDesk, "")
	resp := exchange(t, g.open(t, refDesk, ""), cleanPath{Destination: trap.Addr().String(), ProxyAuth: tok.Token, X224: connectionRequest()})
	if resp.Error != (cleanPathErr{}) || resp.ServerAddr != srv.addr || len(srv.requests()) != 1 {
		t.Fatalf("answer = %+v; want the bound target's answer", resp)
	}
	select {
	case <-trapped:
		t.Fatal("the proxy dialed the client's destination")
	default:
	}
}

// TestRDPTokenRefusals: a token is required, single use, short-lived,
// and good only for its instance and its user.
func TestRDPTokenRefusals(t *testing.T) {
	srv := newFakeRDP(t, connectionConfirm(1, false), true)
	g := newRDPRig(t, srv.addr, nil)
	unauthorized := cleanPathErr{Code: 1, HTTP: http.StatusUnauthorized}
	forbidden := cleanPathErr{Code: 1, HTTP: http.StatusForbidden}
	try := func(ref, user, token string) cleanPath {
		return exchange(t, g.open(t, ref, user), cleanPath{Destination: "desk:3389", ProxyAuth: token, X224: connectionRequest()})
	}

	t.Run("missing", func(t *testing.T) {
		wantError(t, try(refDesk, "", ""), unauthorized)
	})
	t.Run("unknown", func(t *testing.T) {
		wantError(t, try(refDesk, "", "bm90LWEtdG9rZW4"), unauthorized)
	})
	t.Run("reused", func(t *testing.T) {
		tok := g.mustToken(t, refDesk, "")
		if resp := try(refDesk, "", tok.Token); resp.Error != (cleanPathErr{}) {
			t.Fatalf("first use: %+v", resp.Error)
		}
		wantError(t, try(refDesk, "", tok.Token), unauthorized)
	})
	t.Run("expired", func(t *testing.T) {
		tok := g.mustToken(t, refDesk, "")
		g.clock.add(61 * time.Second)
		wantError(t, try(refDesk, "", tok.Token), unauthorized)
	})
	t.Run("just before expiry", func(t *testing.T) {
		tok := g.mustToken(t, refDesk, "")
		g.clock.add(59 * time.Second)
		if resp := try(refDesk, "", tok.Token); resp.Error != (cleanPathErr{}) {
			t.Fatalf("a 59 s old token: %+v", resp.Error)
		}
	})
	t.Run("other ref", func(t *testing.T) {
		tok := g.mustToken(t, refDesk, "")
		wantError(t, try(refDesk2, "", tok.Token), forbidden)
		// Refused, and used up: the rightful instance cannot take it now.
		wantError(t, try(refDesk, "", tok.Token), unauthorized)
	})
	t.Run("other user", func(t *testing.T) {
		tok := g.mustToken(t, refDesk, "alice@example.com")
		wantError(t, try(refDesk, "bob@example.com", tok.Token), forbidden)
	})
	before := len(srv.requests())
	if before != 2 {
		t.Fatalf("the server saw %d connections; only the two good tokens may reach it", before)
	}
}

// TestRDPProxyServerAnswers: what the proxy does with each answer of the
// server, and with a server that is not there.
func TestRDPProxyServerAnswers(t *testing.T) {
	for _, tc := range []struct {
		name string
		// addr starts the server; what it returns beside the address
		// runs once the token is issued (nil: nothing).
		addr func(t *testing.T) (string, func())
		want cleanPath
	}{
		{"standard RDP security is refused", func(t *testing.T) (string, func()) {
			return newFakeRDP(t, connectionConfirm(0, false), false).addr, nil
		}, cleanPath{Error: cleanPathErr{Code: 1, HTTP: http.StatusBadGateway}}},
		{"negotiation failure is passed on", func(t *testing.T) (string, func()) {
			return newFakeRDP(t, connectionConfirm(5, true), false).addr, nil
		}, cleanPath{Error: cleanPathErr{Code: 2}, X224: connectionConfirm(5, true)}},
		{"nothing listens", func(t *testing.T) (string, func()) {
			// RDP answered when the token was issued (its probe) and
			// stopped before the client connected.
			return serveRDP(t, func(c net.Conn) { c.Close() })
		}, cleanPath{Error: cleanPathErr{Code: 1, WSA: 10061}}},
		{"the server hangs up", func(t *testing.T) (string, func()) {
			addr, _ := serveRDP(t, func(c net.Conn) { c.Close() })
			return addr, nil
		}, cleanPath{Error: cleanPathErr{Code: 1, WSA: 10054}}},
		{"TLS alert", func(t *testing.T) (string, func()) {
			// A server that selects SSL, then answers the ClientHello with
			// a fatal handshake_failure alert (40).
			addr, _ := serveRDP(t, func(c net.Conn) {
				defer c.Close()
				buf := make([]byte, 4096)
				_, _ = c.Write(connectionConfirm(1, false))
				_, _ = c.Read(buf) // the ClientHello
				_, _ = c.Write([]byte{0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 40})
				time.Sleep(time.Second)
			})
			return addr, nil
		}, cleanPath{Error: cleanPathErr{Code: 1, TLSAlert: 40}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr, afterToken := tc.addr(t)
			g := newRDPRig(t, addr, nil)
			tok := g.mustToken(t, refDesk, "")
			if afterToken != nil {
				afterToken()
			}
			resp := exchange(t, g.open(t, refDesk, ""), cleanPath{Destination: "desk:3389", ProxyAuth: tok.Token, X224: connectionRequest()})
			if resp.Error != tc.want.Error || !bytes.Equal(resp.X224, tc.want.X224) || len(resp.CertChain) != 0 {
				t.Fatalf("answer = %+v, want %+v", resp, tc.want)
			}
		})
	}
}

// serveRDP starts a server that answers RDP probes (the token's) as an
// RDP server does and hands every client's connection, its Connection
// Request read, to client; stop closes the listener.
func serveRDP(t *testing.T, client func(net.Conn)) (addr string, stop func()) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			if answerProbe(c) {
				c.Close()
				continue
			}
			_ = c.SetDeadline(time.Time{})
			go client(c)
		}
	}()
	return l.Addr().String(), func() { l.Close() }
}

// TestRDPProxyBadRequests: malformed requests are answered with a 400
// error PDU before anything is dialed.
func TestRDPProxyBadRequests(t *testing.T) {
	srv := newFakeRDP(t, connectionConfirm(1, false), true)
	g := newRDPRig(t, srv.addr, nil)
	good, err := asn1.Marshal(cleanPath{Version: 3390, Destination: "desk:3389", ProxyAuth: "x", X224: connectionRequest()})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		msg  []byte
	}{
		{"not DER", []byte("GET / HTTP/1.1\r\n\r\n")},
		{"bytes after the PDU", append(append([]byte{}, good...), 0x30, 0x00)},
		{"too large", append([]byte{0x30, 0x83, 0x01, 0x00, 0x01}, make([]byte, 100)...)},
		{"not TPKT", mustMarshal(t, cleanPath{Version: 3390, ProxyAuth: "x", X224: []byte("hello")})},
		{"wrong version", mustMarshal(t, cleanPath{Version: 3389, ProxyAuth: "x", X224: connectionRequest()})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantError(t, sendRaw(t, g.open(t, refDesk, ""), tc.msg), cleanPathErr{Code: 1, HTTP: http.StatusBadRequest})
		})
	}
	t.Run("request in two messages", func(t *testing.T) {
		tok := g.mustToken(t, refDesk, "")
		p := mustMarshal(t, cleanPath{Version: 3390, Destination: "desk:3389", ProxyAuth: tok.Token, X224: connectionRequest()})
		c := g.open(t, refDesk, "")
		if err := c.Write(context.Background(), websocket.MessageBinary, p[:1]); err != nil {
			t.Fatal(err)
		}
		if resp := sendRaw(t, c, p[1:]); resp.Error != (cleanPathErr{}) {
			t.Fatalf("a request split in two messages: %+v", resp.Error)
		}
	})
	if n := len(srv.requests()); n != 1 {
		t.Fatalf("the server saw %d connections, want only the good request's", n)
	}
}

func mustMarshal(t *testing.T, p cleanPath) []byte {
	t.Helper()
	b, err := asn1.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestRDPBeforeUpgrade: what is refused with a status before the socket
// opens, and the token route's refusals.
func TestRDPBeforeUpgrade(t *testing.T) {
	srv := newFakeRDP(t, connectionConfirm(1, false), true)
	var refused backends.InstanceRef
	allow := func(_ context.Context, id auth.Identity, ref backends.InstanceRef) error {
		if id.Login == "mallory@example.com" {
			refused = ref
			return backends.Forbiddenf("this desktop is claimed by someone else")
		}
		return nil
	}
	g := newRDPRig(t, srv.addr, allow)

	t.Run("plain http from another host", func(t *testing.T) {
		// The rig's server is on loopback, which counts as secure (a TLS
		// proxy on the same host); a remote client over http does not.
		req := httptest.NewRequest(http.MethodGet, "/ws/rdp/"+refDesk, nil)
		req.RemoteAddr = "192.0.2.7:40000"
		req.Header.Set("Connection", "Upgrade")
		req.Header.Set("Upgrade", "websocket")
		req.Header.Set("Sec-WebSocket-Version", "13")
		req.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
		rec := httptest.NewRecorder()
		g.srv.Config.Handler.ServeHTTP(rec, req)
		if rec.Code != http.StatusForbidden || !bytes.Contains(rec.Body.Bytes(), []byte("https")) {
			t.Fatalf("status %d %q, want 403 naming https", rec.Code, rec.Body.String())
		}
	})
	for _, tc := range []struct {
		name, path, origin, user string
		status                   int
	}{
		{"cross-origin socket", "/ws/rdp/" + refDesk, "https://evil.example", "", http.StatusForbidden},
		{"unknown instance", "/ws/rdp/sim/rdp/-/ghost", "", "", http.StatusNotFound},
		{"refused by Allow", "/ws/rdp/" + refDesk, "", "mallory@example.com", http.StatusForbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			if tc.origin != "" {
				h.Set("Origin", tc.origin)
			}
			if tc.user != "" {
				h.Set(userHeader, tc.user)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_, res, err := websocket.Dial(ctx, "ws"+g.srv.URL[len("http"):]+tc.path, &websocket.DialOptions{HTTPHeader: h})
			if err == nil || res == nil || res.StatusCode != tc.status {
				t.Fatalf("dial: %v (response %v), want status %d", err, res, tc.status)
			}
		})
	}
	for _, tc := range []struct {
		name, ref, user string
		header          http.Header
		status          int
	}{
		{"stopped instance", refDown, "", nil, http.StatusConflict},
		{"cross-site page", refDesk, "", http.Header{"Sec-Fetch-Site": {"cross-site"}, "Origin": {"https://evil.example"}}, http.StatusForbidden},
		{"refused by Allow", refDesk, "mallory@example.com", nil, http.StatusForbidden},
		{"unknown instance", "sim/rdp/-/ghost", "", nil, http.StatusNotFound},
	} {
		t.Run("token: "+tc.name, func(t *testing.T) {
			if status, _, body := g.token(t, tc.ref, tc.user, tc.header); status != tc.status {
				t.Fatalf("POST /rdp-token/%s: %d %s, want %d", tc.ref, status, body, tc.status)
			}
		})
	}
	if refused.String() != refDesk {
		t.Fatalf("Allow was asked about %q, want %s", refused.String(), refDesk)
	}
	if n := len(srv.requests()); n != 0 {
		t.Fatalf("the server saw %d connections, want none", n)
	}
}

// TestRDPConsolePage: an instance that offers only RDP gets the RDP
// element by default, with the token route and the viewer's files, and
// no link to kinds it does not offer.
func TestRDPConsolePage(t *testing.T) {
	g := newRDPRig(t, "127.0.0.1:1", nil)
	res, doc := get(t, g.srv.URL+"/console/"+refDesk, nil)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("status %d", res.StatusCode)
	}
	el := doc.Find("corral-rdp")
	if el.Length() != 1 {
		t.Fatalf("%d <corral-rdp> elements, want 1", el.Length())
	}
	if tok, _ := el.Attr("token"); tok != "/rdp-token/"+refDesk {
		t.Errorf("token = %q, want the token route of the instance", tok)
	}
	for _, attr := range []string{"script", "module", "backend"} {
		if v, _ := el.Attr(attr); !strings.HasPrefix(v, "/static/") {
			t.Errorf("%s = %q, want a hashed static URL", attr, v)
		}
	}
	if kind, _ := doc.Find(`[data-testid="console"]`).Attr("data-kind"); kind != "rdp" {
		t.Errorf("data-kind = %q, want rdp", kind)
	}
	if n := doc.Find(`[data-testid^="console-kind-"]`).Length(); n != 1 || doc.Find(`[data-testid="console-kind-rdp"]`).Length() != 1 {
		t.Errorf("%d kind links, want the RDP one only", n)
	}
	if res, _ := get(t, g.srv.URL+"/console/"+refDesk+"?kind=vnc", nil); res.StatusCode != http.StatusBadRequest {
		t.Errorf("vnc console of an RDP-only instance: %d, want 400", res.StatusCode)
	}
}

// TestRDPTokenProbe: the token is where RDP is asked whether it answers
// (the console list does not dial): a server that answers gets one probe
// and the token; one that does not gets a 503 that says so and what to do
// instead, within the probe's bound rather than the proxy's handshake.
func TestRDPTokenProbe(t *testing.T) {
	t.Run("answers", func(t *testing.T) {
		srv := newFakeRDP(t, connectionConfirm(1, false), true)
		g := newRDPRig(t, srv.addr, nil)
		g.mustToken(t, refDesk, "")
		if n := srv.probeCount(); n != 1 {
			t.Fatalf("the server saw %d probes for one token, want 1", n)
		}
		if n := len(srv.requests()); n != 0 {
			t.Fatalf("the server saw %d client connections before any client connected", n)
		}
	})
	silent := func(t *testing.T) string {
		// Accepts and never answers: qemu's forward to a guest port where
		// nothing listens.
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		// The accepted connections stay open (silent) until the listener
		// closes; the accept goroutine then closes them itself, since
		// t.Cleanup must not be called from another goroutine.
		done := make(chan struct{})
		t.Cleanup(func() { l.Close(); <-done })
		go func() {
			defer close(done)
			var conns []net.Conn
			for {
				c, err := l.Accept()
				if err != nil {
					for _, c := range conns {
						c.Close()
					}
					return
				}
				conns = append(conns, c)
			}
		}()
		return l.Addr().String()
	}
	closed := func(t *testing.T) string {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		return addr
	}
	for _, tc := range []struct {
		name   string
		addr   func(t *testing.T) string
		reason string
	}{
		{"nothing listens", closed, "TCP 3389 did not answer"},
		{"no answer", silent, "no answer in time"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newRDPRig(t, tc.addr(t), nil)
			status, _, body := g.token(t, refDesk, "", nil)
			if status != http.StatusServiceUnavailable {
				t.Fatalf("token: %d %s, want 503", status, body)
			}
			for _, want := range []string{"desk's RDP console does not answer", tc.reason, "open its VNC or serial console"} {
				if !strings.Contains(body, want) {
					t.Errorf("refusal %s does not say %q", body, want)
				}
			}
		})
	}
}
