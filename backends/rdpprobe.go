package backends

import (
	"context"
	"errors"
	"io"
	"net"
	"syscall"
	"time"
)

// RDPProbeTimeout bounds ProbeRDP (an earlier deadline of ctx wins). An RDP
// server answers a Connection Request in milliseconds; a forward to a guest
// port where nothing listens may never answer (qemu's user-mode network
// keeps the host side open while it waits for the guest), so the probe
// cannot wait long without slowing every page that asks.
const RDPProbeTimeout = 1500 * time.Millisecond

// x224Probe is the smallest X.224 Connection Request an RDP server answers
// (MS-RDPBCGR 2.2.1.1): a TPKT header (version 3, length 19), the CR TPDU
// without a cookie, and an RDP Negotiation Request for TLS and CredSSP.
var x224Probe = []byte{
	0x03, 0x00, 0x00, 0x13, // TPKT: version 3, length 19
	0x0e, 0xe0, 0x00, 0x00, 0x00, 0x00, 0x00, // X.224 CR: LI 14, code 0xE0, refs, class 0
	0x01, 0x00, 0x08, 0x00, 0x03, 0x00, 0x00, 0x00, // RDP_NEG_REQ: PROTOCOL_SSL|PROTOCOL_HYBRID
}

// ProbeRDP reports whether an RDP server answers on the connection dial
// opens: it sends an X.224 Connection Request and waits for the first bytes
// of a TPKT-framed reply (03 00), then closes the connection. A plain TCP
// connect proves nothing when the address is a port forward (qemu's
// hostfwd accepts on the host before it knows whether the guest listens),
// so the probe asks the protocol itself. what names the address in the
// error ("127.0.0.1:40123", "10.244.1.17:3389"); the error says why RDP is
// not offered and is safe to show.
func ProbeRDP(ctx context.Context, what string, dial func(context.Context) (net.Conn, error)) error {
	ctx, cancel := context.WithTimeout(ctx, RDPProbeTimeout)
	defer cancel()
	c, err := dial(ctx)
	if err != nil {
		return newf(ErrUnavailable, "TCP 3389 did not answer at %s", what)
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	// Close the connection when ctx ends early (a caller's cancel).
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Now()) })
	defer stop()
	if _, err := c.Write(x224Probe); err != nil {
		return newf(ErrUnavailable, "TCP 3389 at %s closed the connection", what)
	}
	var hdr [2]byte
	if _, err := io.ReadFull(c, hdr[:]); err != nil {
		return newf(ErrUnavailable, "RDP did not answer at %s: %s", what, probeFailure(err))
	}
	if hdr[0] != 0x03 || hdr[1] != 0x00 {
		return newf(ErrUnavailable, "the service at %s is not RDP (its answer is not TPKT-framed)", what)
	}
	return nil
}

// probeFailure words a probe's read error for the reason a console
// offer shows.
func probeFailure(err error) string {
	var ne net.Error
	switch {
	case errors.As(err, &ne) && ne.Timeout():
		return "no answer in time"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		// A peer that closes without reading what was sent resets the
		// connection instead: the same hang-up, seen a moment later.
		errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return "the connection was closed"
	}
	return "the connection failed"
}

// RDPProber is implemented by console dialers that can say, with a reason
// safe to show, why an instance's RDP console is not offered now (the VDI
// broker's "skipped: rdp: ..."). A nil error means RDP answers.
type RDPProber interface {
	ProbeRDP(ctx context.Context, ref InstanceRef) error
}
