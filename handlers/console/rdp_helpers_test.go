package console_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/binary"
	"encoding/json"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/go-chi/chi/v5"

	"github.com/corral-dev/corral/app/auth"
	"github.com/corral-dev/corral/app/fleet"
	"github.com/corral-dev/corral/app/instances"
	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/backends/sim"
	"github.com/corral-dev/corral/handlers/console"
	"github.com/corral-dev/corral/handlers/middleware"
	"github.com/corral-dev/corral/static"
)

// cleanPath is the RDCleanPath PDU as a client writes and reads it,
// declared here again rather than borrowed from the package: the test
// speaks the protocol as IronRDP does, from the ASN.1.
type cleanPath struct {
	Version     int64        `asn1:"explicit,tag:0"`
	Error       cleanPathErr `asn1:"explicit,tag:1,optional"`
	Destination string       `asn1:"explicit,tag:2,optional,utf8"`
	ProxyAuth   string       `asn1:"explicit,tag:3,optional,utf8"`
	ServerAuth  string       `asn1:"explicit,tag:4,optional,utf8"`
	PCB         string       `asn1:"explicit,tag:5,optional,utf8"`
	X224        []byte       `asn1:"explicit,tag:6,optional"`
	CertChain   [][]byte     `asn1:"explicit,tag:7,optional"`
	ServerAddr  string       `asn1:"explicit,tag:9,optional,utf8"`
}

type cleanPathErr struct {
	Code     int64 `asn1:"explicit,tag:0"`
	HTTP     int64 `asn1:"explicit,tag:1,optional"`
	WSA      int64 `asn1:"explicit,tag:2,optional"`
	TLSAlert int64 `asn1:"explicit,tag:3,optional"`
}

// connectionRequest is an X.224 Connection Request as IronRDP sends it:
// a mstshash cookie and RDP_NEG_REQ for SSL|HYBRID|HYBRID_EX.
func connectionRequest() []byte {
	body := append([]byte{0x00, 0xe0, 0, 0, 0, 0, 0}, "Cookie: mstshash=user\r\n"...)
	body = append(body, 0x01, 0x00, 0x08, 0x00, 0x0b, 0x00, 0x00, 0x00)
	body[0] = byte(len(body) - 1) // LI: the header's length after itself
	return tpkt(body)
}

func tpkt(body []byte) []byte {
	p := make([]byte, 4, 4+len(body))
	p[0] = 0x03
	binary.BigEndian.PutUint16(p[2:], uint16(4+len(body)))
	return append(p, body...)
}

// connectionConfirm is a server's answer selecting protocol, or
// RDP_NEG_FAILURE when failure is set.
func connectionConfirm(protocol uint32, failure bool) []byte {
	neg := []byte{0x02, 0x00, 0x08, 0x00, 0, 0, 0, 0}
	if failure {
		neg[0] = 0x03
	}
	binary.LittleEndian.PutUint32(neg[4:], protocol)
	body := append([]byte{0x0e, 0xd0, 0, 0, 0x12, 0x34, 0}, neg...)
	return tpkt(body)
}

// fakeRDP is an RDP server for the proxy's logic: it reads the
// Connection Request, answers with a configured Confirm, does TLS with a
// self-signed certificate when the Confirm selects it, then echoes.
type fakeRDP struct {
	addr    string
	cert    tls.Certificate
	confirm []byte
	tls     bool
	mu      sync.Mutex
	got     [][]byte // the Connection Requests received from clients
	probes  int      // the RDP probes received (backends.ProbeRDP)
}

// isProbe reports whether a Connection Request is backends.ProbeRDP's
// (no cookie, 19 bytes) rather than a client's (IronRDP sends a cookie).
func isProbe(cr []byte) bool {
	return len(cr) == 19 && !bytes.Contains(cr, []byte("Cookie:"))
}

// answerProbe reads a Connection Request from c and, when it is
// backends.ProbeRDP's, answers it as an RDP server would; it reports
// whether it did (the caller closes c then).
func answerProbe(c net.Conn) bool {
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	hdr := make([]byte, 4)
	if _, err := io.ReadFull(c, hdr); err != nil {
		return false
	}
	cr := make([]byte, binary.BigEndian.Uint16(hdr[2:]))
	copy(cr, hdr)
	if _, err := io.ReadFull(c, cr[4:]); err != nil || !isProbe(cr) {
		return false
	}
	_, _ = c.Write(connectionConfirm(1, false))
	return true
}

// probeCount returns how many RDP probes reached the server.
func (f *fakeRDP) probeCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.probes
}

func newFakeRDP(t testing.TB, confirm []byte, withTLS bool) *fakeRDP {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	f := &fakeRDP{addr: ln.Addr().String(), cert: selfSigned(t), confirm: confirm, tls: withTLS}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go f.serve(c)
		}
	}()
	return f
}

func (f *fakeRDP) serve(c net.Conn) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	hdr := make([]byte, 4)
	if _, err := io.ReadFull(c, hdr); err != nil {
		return
	}
	cr := make([]byte, binary.BigEndian.Uint16(hdr[2:]))
	copy(cr, hdr)
	if _, err := io.ReadFull(c, cr[4:]); err != nil {
		return
	}
	f.mu.Lock()
	if isProbe(cr) {
		f.probes++
	} else {
		f.got = append(f.got, cr)
	}
	f.mu.Unlock()
	if _, err := c.Write(f.confirm); err != nil || !f.tls {
		return
	}
	tc := tls.Server(c, &tls.Config{Certificates: []tls.Certificate{f.cert}})
	if err := tc.Handshake(); err != nil {
		return
	}
	_ = c.SetDeadline(time.Time{})
	_, _ = io.Copy(tc, tc)
}

func (f *fakeRDP) requests() [][]byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([][]byte(nil), f.got...)
}

func selfSigned(t testing.TB) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "fake-rdp"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// clock is the tokens' injected clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// The refs of the RDP rig: two running instances, a stopped one.
const (
	refDesk  = "sim/rdp/-/desk"
	refDesk2 = "sim/rdp/-/desk2"
	refDown  = "sim/rdp/-/down"
)

// rdpRig is a console server whose instances' RDP consoles are at addr.
type rdpRig struct {
	srv   *httptest.Server
	clock *clock
	track *tracker
}

// tracker counts the open consoles the Deps.Sessions hook is told of.
type tracker struct {
	mu   sync.Mutex
	open map[string]int
}

func (k *tracker) ConsoleOpened(ref backends.InstanceRef) {
	k.mu.Lock()
	k.open[ref.String()]++
	k.mu.Unlock()
}

func (k *tracker) ConsoleClosed(ref backends.InstanceRef) {
	k.mu.Lock()
	k.open[ref.String()]--
	k.mu.Unlock()
}

func (k *tracker) count(key string) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.open[key]
}

// userHeader names the caller of a test request; the rig's Authorize puts
// it in the request's identity as the pipeline would.
const userHeader = "X-Test-User"

func newRDPRig(t testing.TB, addr string, allow func(context.Context, auth.Identity, backends.InstanceRef) error) *rdpRig {
	t.Helper()
	ctx := context.Background()
	b := sim.NewRDP(sim.Options{Context: "rdp", RDPAddr: addr})
	for _, s := range []backends.Spec{{Name: "desk", Start: true}, {Name: "desk2", Start: true}, {Name: "down"}} {
		if _, err := b.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	log := slog.New(slog.DiscardHandler)
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	f := fleet.New(fleet.Options{Logger: log})
	if err := f.Add(b); err != nil {
		t.Fatal(err)
	}
	f.Refresh(ctx)
	a, err := assets()
	if err != nil {
		t.Fatal(err)
	}
	clk := &clock{t: time.Date(2026, 11, 30, 6, 0, 0, 0, time.UTC)}
	trk := &tracker{open: map[string]int{}}
	identify := func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			id := auth.Identity{Via: auth.ViaAnonymous}
			if u := r.Header.Get(userHeader); u != "" {
				id = auth.Identity{Login: u, Via: auth.ViaOIDC, Admin: true}
			}
			h.ServeHTTP(w, r.WithContext(middleware.WithIdentity(r.Context(), id)))
		})
	}
	r := chi.NewRouter()
	r.Handle(static.Prefix+"*", a.Handler())
	console.Mount(r, console.Deps{Fleet: f, Instances: instances.New(f, nil, nil, log), Assets: a, Log: log,
		Authorize: identify, Allow: allow, Sessions: trk, Now: clk.now})
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	return &rdpRig{srv: srv, clock: clk, track: trk}
}

type tokenAnswer struct {
	Token       string `json:"token"`
	Socket      string `json:"socket"`
	Destination string `json:"destination"`
	ExpiresIn   int    `json:"expiresIn"`
}

// token asks for an RDP token for ref as user; it returns the answer's
// status and, on 200, the token.
func (g *rdpRig) token(t testing.TB, ref, user string, h http.Header) (int, tokenAnswer, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, g.srv.URL+"/rdp-token/"+ref, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/json")
	for k, v := range h {
		req.Header[k] = v
	}
	if user != "" {
		req.Header.Set(userHeader, user)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	var a tokenAnswer
	if res.StatusCode == http.StatusOK {
		if err := json.Unmarshal(body, &a); err != nil {
			t.Fatalf("token answer %q: %v", body, err)
		}
	} else {
		var e struct{ Error string }
		if err := json.Unmarshal(body, &e); err != nil || e.Error == "" || res.Header.Get("Content-Type") != "application/json" {
			t.Fatalf("refusal %d %q is not {\"error\": ...}", res.StatusCode, body)
		}
	}
	return res.StatusCode, a, string(body)
}

func (g *rdpRig) mustToken(t testing.TB, ref, user string) tokenAnswer {
	t.Helper()
	status, a, body := g.token(t, ref, user, nil)
	if status != http.StatusOK || a.Token == "" {
		t.Fatalf("POST /rdp-token/%s: %d %s", ref, status, body)
	}
	return a
}

// open dials the proxy of ref as user.
func (g *rdpRig) open(t testing.TB, ref, user string) *websocket.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	h := http.Header{}
	if user != "" {
		h.Set(userHeader, user)
	}
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(g.srv.URL, "http")+"/ws/rdp/"+ref, &websocket.DialOptions{HTTPHeader: h})
	if err != nil {
		t.Fatalf("dial the RDP proxy of %s: %v", ref, err)
	}
	t.Cleanup(func() { c.CloseNow() })
	return c
}

// exchange sends req on c and returns the proxy's answer PDU.
func exchange(t testing.TB, c *websocket.Conn, req cleanPath) cleanPath {
	t.Helper()
	req.Version = 3390
	p, err := asn1.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	return sendRaw(t, c, p)
}

// sendRaw sends p as one message and decodes the answer PDU.
func sendRaw(t testing.TB, c *websocket.Conn, p []byte) cleanPath {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.Write(ctx, websocket.MessageBinary, p); err != nil {
		t.Fatal(err)
	}
	_, msg, err := c.Read(ctx)
	if err != nil {
		t.Fatalf("reading the proxy's answer: %v", err)
	}
	var resp cleanPath
	rest, err := asn1.Unmarshal(msg, &resp)
	if err != nil || len(rest) != 0 || resp.Version != 3390 {
		t.Fatalf("the answer %x is not one RDCleanPath PDU: %v", msg, err)
	}
	return resp
}

// wantError checks that resp is a general error with the given codes.
func wantError(t testing.TB, resp cleanPath, want cleanPathErr) {
	t.Helper()
	if resp.Error != want || len(resp.CertChain) != 0 {
		t.Fatalf("answer = %+v, want the error %+v", resp, want)
	}
}
