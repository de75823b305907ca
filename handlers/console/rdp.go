package console

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"time"

	"github.com/coder/websocket"

	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/handlers/middleware"
)

// handshakeTimeout bounds each phase of an RDP connection before the
// stream flows: the client's request, and the server's Connection Confirm
// with the TLS handshake. The dial has backends.ConsoleDialTimeout.
const handshakeTimeout = 10 * time.Second

// rdp is GET /ws/rdp/{ref}: the RDCleanPath proxy of IronRDP's web client.
// What can be refused before the upgrade is (transport, origin, instance);
// the rest is answered in the protocol, as RDCleanPath error PDUs the web
// client shows. The proxy dials only the instance its token is bound to,
// through the instance's backend, never the client's destination.
//
// The proxy terminates the TLS of the RDP server, so it sees the RDP stream
// in the clear, including the password of a server that does not use
// CredSSP (xrdp): the browser's leg must be wss (secureTransport).
func (s *server) rdp(w http.ResponseWriter, r *http.Request) error {
	if err := checkOrigin(r); err != nil {
		return err
	}
	t, err := s.resolve(r, "/ws/rdp/")
	if err != nil {
		return err
	}
	// A canonical ref resolves without the backend: ask it whether the
	// instance exists while a status can still say so.
	cctx, cancel := s.Fleet.CallContext(r.Context())
	_, err = t.b.Get(cctx, t.ref)
	cancel()
	if err != nil {
		return err
	}
	if err := s.secureTransport(r); err != nil {
		return err
	}
	c, err := websocket.Accept(w, r, acceptOptions)
	if err != nil {
		return nil // Accept has answered
	}
	actor := middleware.IdentityFrom(r.Context()).Actor()
	log := s.Log.With("ref", t.ref.String(), "actor", actor, "request_id", middleware.RequestIDFrom(r.Context()))
	s.proxyRDP(r.Context(), c, t, actor, log)
	return nil
}

// rdpFailure is a refused or failed RDP connection: the error PDU to send
// and the cause to log.
type rdpFailure struct {
	pdu   rdcleanpathPDU
	cause error
}

func httpFailure(status int, cause error) *rdpFailure {
	return &rdpFailure{pdu: rdcleanpathPDU{Error: rdcleanpathErr{ErrorCode: errCodeGeneral, HTTPStatusCode: int64(status)}}, cause: cause}
}

// proxyRDP runs one RDP connection on c, from the client's request to the
// end of the stream.
func (s *server) proxyRDP(ctx context.Context, c *websocket.Conn, t target, actor string, log *slog.Logger) {
	conn, release, resp, fail := s.rdpHandshake(ctx, c, t, actor, log)
	if fail != nil {
		log.Info("console: rdp connection refused", "err", fail.cause)
		if err := c.Write(ctx, websocket.MessageBinary, marshalPDU(fail.pdu)); err == nil {
			_ = c.Close(websocket.StatusNormalClosure, "the RDP connection was refused")
		} else {
			_ = c.CloseNow()
		}
		return
	}
	defer release()
	defer conn.Close()
	if err := c.Write(ctx, websocket.MessageBinary, marshalPDU(resp)); err != nil {
		_ = c.CloseNow()
		return
	}
	c.SetReadLimit(readLimit)
	defer s.opened(t.ref)()
	log.Debug("console: rdp viewer connected")
	e := pump(ctx, c, conn)
	log.Debug("console: rdp viewer disconnected", "reason", e.reason, "err", e.err)
}

// rdpHandshake reads and checks the client's request, dials the bound
// target and does the server side of RDCleanPath up to the response: the
// TLS connection to the server, the function that releases the dial's
// context once the connection is closed, and the response PDU; or the
// failure to report.
func (s *server) rdpHandshake(ctx context.Context, c *websocket.Conn, t target, actor string, log *slog.Logger) (_ *tls.Conn, release context.CancelFunc, _ rdcleanpathPDU, fail *rdpFailure) {
	hctx, cancel := context.WithTimeout(ctx, handshakeTimeout)
	defer cancel()
	req, err := readRequest(hctx, c)
	if err != nil {
		return nil, nil, rdcleanpathPDU{}, httpFailure(http.StatusBadRequest, err)
	}
	if req.ProxyAuth == "" {
		return nil, nil, rdcleanpathPDU{}, httpFailure(http.StatusUnauthorized, errors.New("console: the RDCleanPath request has no token"))
	}
	g, ok := s.tokens.take(req.ProxyAuth)
	switch {
	case !ok:
		return nil, nil, rdcleanpathPDU{}, httpFailure(http.StatusUnauthorized, errors.New("console: unknown, used or expired RDP token"))
	case g.ref != t.ref:
		return nil, nil, rdcleanpathPDU{}, httpFailure(http.StatusForbidden, fmt.Errorf("console: the RDP token is for %s", g.ref))
	case g.actor != actor:
		return nil, nil, rdcleanpathPDU{}, httpFailure(http.StatusForbidden, fmt.Errorf("console: the RDP token was issued to %s", g.actor))
	}
	if req.Destination != g.label {
		// The destination is the client's word; the token's target is
		// dialed whatever it says.
		log.Warn("console: rdp destination differs from the token's target; dialing the token's", "destination", req.Destination, "target", g.label)
	}

	conn, cancelDial, err := dial(ctx, t, backends.ConsoleRDP)
	if err != nil {
		return nil, nil, rdcleanpathPDU{}, ioFailure(err)
	}
	defer func() {
		if fail != nil {
			conn.Close()
			cancelDial()
		}
	}()
	deadline, _ := hctx.Deadline()
	_ = conn.SetDeadline(deadline)
	if req.PreconnectionBlob != "" {
		if _, err := io.WriteString(conn, req.PreconnectionBlob); err != nil {
			return nil, nil, rdcleanpathPDU{}, ioFailure(err)
		}
	}
	if _, err := conn.Write(req.X224); err != nil {
		return nil, nil, rdcleanpathPDU{}, ioFailure(err)
	}
	cc, err := readConfirm(conn)
	if err != nil {
		return nil, nil, rdcleanpathPDU{}, ioFailure(err)
	}
	neg, err := parseConfirm(cc)
	switch {
	case err != nil:
		return nil, nil, rdcleanpathPDU{}, httpFailure(http.StatusBadGateway, err)
	case neg.failed:
		return nil, nil, rdcleanpathPDU{}, &rdpFailure{
			pdu:   rdcleanpathPDU{Error: rdcleanpathErr{ErrorCode: errCodeNegotiation}, X224: cc},
			cause: errors.New("console: the RDP server refused the negotiation"),
		}
	case neg.selected == protocolRDP:
		// Standard RDP security has no TLS for the proxy to terminate, and
		// the web client cannot do it: tell the operator to turn on TLS.
		return nil, nil, rdcleanpathPDU{}, httpFailure(http.StatusBadGateway, errors.New("console: the RDP server selected standard RDP security; enable TLS (SSL) or NLA on it"))
	}
	// The server's certificate is not verified, as RDP clients do on a
	// first connection (there is no CA for a guest's self-signed
	// certificate): the web client gets the chain and uses the leaf's key
	// for CredSSP, which binds the password exchange to this TLS session.
	tc := tls.Client(conn, &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}) //nolint:gosec // see above
	if err := tc.HandshakeContext(hctx); err != nil {
		return nil, nil, rdcleanpathPDU{}, tlsFailure(err)
	}
	_ = conn.SetDeadline(time.Time{})
	var chain [][]byte
	for _, cert := range tc.ConnectionState().PeerCertificates {
		chain = append(chain, cert.Raw)
	}
	return tc, cancelDial, rdcleanpathPDU{X224: cc, ServerCertChain: chain, ServerAddr: serverAddr(conn)}, nil
}

// readRequest reads the client's request PDU. The WebSocket is a byte
// stream here (the client writes the PDU in one message, but nothing
// promises it), so messages are gathered until the DER length is reached;
// bytes past the PDU are a bad request, as in Devolutions Gateway. The
// connection's read limit is maxPDU until the request is in.
func readRequest(ctx context.Context, c *websocket.Conn) (rdcleanpathPDU, error) {
	c.SetReadLimit(maxPDU)
	var buf []byte
	for {
		typ, p, err := c.Read(ctx)
		if err != nil {
			return rdcleanpathPDU{}, fmt.Errorf("console: reading the RDCleanPath request: %w", err)
		}
		if typ != websocket.MessageBinary {
			return rdcleanpathPDU{}, errors.New("console: the RDCleanPath request must come in binary messages")
		}
		buf = append(buf, p...)
		n, err := pduLength(buf)
		switch {
		case err != nil:
			return rdcleanpathPDU{}, err
		case n > maxPDU || len(buf) > maxPDU:
			return rdcleanpathPDU{}, fmt.Errorf("console: the RDCleanPath request exceeds %d bytes", maxPDU)
		case n == 0 || len(buf) < n:
			continue
		case len(buf) > n:
			return rdcleanpathPDU{}, errors.New("console: bytes after the RDCleanPath request")
		}
		return parseRequest(buf)
	}
}

// readConfirm reads one TPKT packet, the server's X.224 Connection
// Confirm, of at most maxConfirmLen bytes.
func readConfirm(r io.Reader) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := int(binary.BigEndian.Uint16(hdr[2:4]))
	if hdr[0] != 0x03 || n < 4 || n > maxConfirmLen {
		return nil, errors.New("console: the server's answer is not a TPKT packet an RDP server sends")
	}
	p := make([]byte, n)
	copy(p, hdr[:])
	if _, err := io.ReadFull(r, p[4:]); err != nil {
		return nil, err
	}
	return p, nil
}

// serverAddr is the server's "ip:port" for the response. IronRDP parses it
// as a socket address; a backend whose connection is not TCP (a stream
// through an API) gives no such address, so the unspecified one stands in.
func serverAddr(c net.Conn) string {
	if ap, err := netip.ParseAddrPort(c.RemoteAddr().String()); err == nil {
		return ap.String()
	}
	return "0.0.0.0:3389"
}

// secureTransport refuses an RDP WebSocket that did not come over TLS:
// the stream through the proxy holds the user's password. Accepted are a
// TLS connection to this server, a loopback connection (a TLS-terminating
// proxy on this host such as `tailscale serve`, or a test), and a trusted
// proxy (Deps.TrustedProxies) that says it received https.
func (s *server) secureTransport(r *http.Request) error {
	if r.TLS != nil {
		return nil
	}
	if ap, err := netip.ParseAddrPort(r.RemoteAddr); err == nil {
		a := ap.Addr().Unmap()
		if a.IsLoopback() {
			return nil
		}
		if r.Header.Get("X-Forwarded-Proto") == "https" {
			for _, p := range s.TrustedProxies {
				if p.Contains(a) {
					return nil
				}
			}
		}
	}
	return backends.Forbiddenf("the RDP console needs https: its stream carries your password; open this page over https")
}

// Windows Sockets error codes the web client understands
// (RDCleanPathErr.wsaLastError).
const (
	wsaConnReset    = 10054
	wsaTimedOut     = 10060
	wsaConnRefused  = 10061
	wsaNetUnreach   = 10051
	wsaHostUnreach  = 10065
	wsaUnknownError = 11015 // Devolutions Gateway's fallback for other I/O errors
)

// ioFailure maps a failure to reach or talk to the RDP server to the error
// PDU the web client shows: a socket error code when it is one, else the
// HTTP status of the backend's error kind.
func ioFailure(err error) *rdpFailure {
	wsa := int64(0)
	var ne net.Error
	switch {
	case errors.Is(err, errConnRefused):
		wsa = wsaConnRefused
	case errors.Is(err, errConnReset), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		wsa = wsaConnReset
	case errors.Is(err, errNetUnreach):
		wsa = wsaNetUnreach
	case errors.Is(err, errHostUnreach):
		wsa = wsaHostUnreach
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, backends.ErrTimeout), errors.As(err, &ne) && ne.Timeout():
		wsa = wsaTimedOut
	}
	if wsa != 0 {
		return &rdpFailure{pdu: rdcleanpathPDU{Error: rdcleanpathErr{ErrorCode: errCodeGeneral, WSALastError: wsa}}, cause: err}
	}
	if backends.KindOf(err) != nil {
		return httpFailure(middleware.Status(err), err)
	}
	return &rdpFailure{pdu: rdcleanpathPDU{Error: rdcleanpathErr{ErrorCode: errCodeGeneral, WSALastError: wsaUnknownError}}, cause: err}
}

// tlsFailure maps a failed TLS handshake with the server: the alert's code
// when either side sent one, else the I/O error.
func tlsFailure(err error) *rdpFailure {
	if code, ok := tlsAlert(err); ok {
		return &rdpFailure{pdu: rdcleanpathPDU{Error: rdcleanpathErr{ErrorCode: errCodeGeneral, TLSAlertCode: int64(code)}}, cause: err}
	}
	return ioFailure(err)
}
