package console_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"testing"
	"time"
	"unicode/utf16"

	"github.com/coder/websocket"

	"github.com/corral-dev/corral/handlers/console/xrdptest"
)

// TestRDPProxyXRDP runs the RDCleanPath exchange against a real xrdp
// through the proxy: the response carries xrdp's Connection Confirm
// (TLS selected) and its certificate, and the stream behind it, which the
// proxy wraps in TLS to xrdp, carries the client's MCS Connect Initial to
// xrdp and xrdp's MCS Connect Response back.
func TestRDPProxyXRDP(t *testing.T) {
	x := xrdptest.Start(t) // skips or fails without xrdp
	g := newRDPRig(t, x.Addr, nil)
	tok := g.mustToken(t, refDesk, "alice@example.com")
	c := g.open(t, refDesk, "alice@example.com")
	resp := exchange(t, c, cleanPath{Destination: tok.Destination, ProxyAuth: tok.Token, X224: connectionRequest()})
	if resp.Error != (cleanPathErr{}) {
		t.Fatalf("xrdp through the proxy: error %+v", resp.Error)
	}
	// xrdp (security_layer=tls) selects PROTOCOL_SSL in RDP_NEG_RSP.
	if len(resp.X224) != 19 || resp.X224[5] != 0xd0 || resp.X224[11] != 0x02 || binary.LittleEndian.Uint32(resp.X224[15:]) != 1 {
		t.Fatalf("x224 = %x, want xrdp's Connection Confirm selecting SSL", resp.X224)
	}
	if len(resp.CertChain) == 0 || !bytes.Equal(resp.CertChain[0], x.Cert) {
		t.Fatalf("certificate chain of %d, want xrdp's certificate first", len(resp.CertChain))
	}
	if resp.ServerAddr != x.Addr {
		t.Fatalf("server address %q, want %q", resp.ServerAddr, x.Addr)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	nc := websocket.NetConn(ctx, c, websocket.MessageBinary)
	if _, err := nc.Write(mcsConnectInitial()); err != nil {
		t.Fatal(err)
	}
	hdr := make([]byte, 4)
	if _, err := io.ReadFull(nc, hdr); err != nil {
		t.Fatalf("no answer to the MCS Connect Initial: %v", err)
	}
	if hdr[0] != 0x03 {
		t.Fatalf("xrdp's answer starts %x, want a TPKT header", hdr)
	}
	body := make([]byte, int(binary.BigEndian.Uint16(hdr[2:]))-4)
	if _, err := io.ReadFull(nc, body); err != nil {
		t.Fatal(err)
	}
	// X.224 Data TPDU (02 f0 80), then the BER tag of MCS
	// Connect-Response, [APPLICATION 102] = 7f 66.
	if len(body) < 5 || !bytes.Equal(body[:3], []byte{0x02, 0xf0, 0x80}) || body[3] != 0x7f || body[4] != 0x66 {
		t.Fatalf("xrdp answered %x, want an MCS Connect Response", body[:min(len(body), 16)])
	}
}

// mcsConnectInitial is a client's MCS Connect Initial PDU with a GCC
// Conference Create Request (MS-RDPBCGR 2.2.1.3, laid out as the
// protocol example in 4.1.3): client core data for 1024x768 naming the
// TLS protocol the server selected, client security data and client
// network data without channels.
func mcsConnectInitial() []byte {
	le16 := func(b []byte, v uint16) []byte { return binary.LittleEndian.AppendUint16(b, v) }
	le32 := func(b []byte, v uint32) []byte { return binary.LittleEndian.AppendUint32(b, v) }
	fixed := func(s string, n int) []byte {
		b := make([]byte, n)
		for i, r := range utf16.Encode([]rune(s)) {
			binary.LittleEndian.PutUint16(b[2*i:], r)
		}
		return b
	}
	var core []byte
	core = le32(core, 0x00080004) // RDP 5.0+
	core = le16(core, 1024)
	core = le16(core, 768)
	core = le16(core, 0xca01) // colorDepth: 8 bpp (superseded below)
	core = le16(core, 0xaa03) // SASSequence
	core = le32(core, 0x409)  // keyboard layout: US
	core = le32(core, 2600)   // client build
	core = append(core, fixed("corral-test", 32)...)
	core = le32(core, 4)                     // keyboard type: IBM enhanced
	core = le32(core, 0)                     // subtype
	core = le32(core, 12)                    // function keys
	core = append(core, make([]byte, 64)...) // IME file name
	core = le16(core, 0xca01)                // postBeta2ColorDepth
	core = le16(core, 1)                     // clientProductId
	core = le32(core, 0)                     // serialNumber
	core = le16(core, 16)                    // highColorDepth
	core = le16(core, 0x000f)                // supportedColorDepths: 24, 16, 15, 32
	core = le16(core, 0x0001)                // earlyCapabilityFlags: RNS_UD_CS_SUPPORT_ERRINFO_PDU
	core = append(core, make([]byte, 64)...) // clientDigProductId
	core = append(core, 0, 0)                // connectionType, pad
	core = le32(core, 1)                     // serverSelectedProtocol: PROTOCOL_SSL
	block := func(typ uint16, data []byte) []byte {
		b := le16(nil, typ)
		b = le16(b, uint16(4+len(data)))
		return append(b, data...)
	}
	user := block(0xc001, core)
	user = append(user, block(0xc002, le32(le32(nil, 0), 0))...) // no RDP encryption: TLS
	user = append(user, block(0xc003, le32(nil, 0))...)          // no channels

	perLen := func(n int) []byte { return []byte{0x80 | byte(n>>8), byte(n)} }
	gccReq := append([]byte{0x00, 0x08, 0x00, 0x10, 0x00, 0x01, 0xc0, 0x00, 'D', 'u', 'c', 'a'}, perLen(len(user))...)
	gccReq = append(gccReq, user...)
	gcc := append([]byte{0x00, 0x05, 0x00, 0x14, 0x7c, 0x00, 0x01}, perLen(len(gccReq))...)
	gcc = append(gcc, gccReq...)

	berLen := func(n int) []byte { return []byte{0x82, byte(n >> 8), byte(n)} }
	domain := func(v ...[]byte) []byte {
		var b []byte
		for _, x := range v {
			b = append(b, 0x02, byte(len(x)))
			b = append(b, x...)
		}
		return append([]byte{0x30, byte(len(b))}, b...)
	}
	var mcs []byte
	mcs = append(mcs, 0x04, 0x01, 0x01, 0x04, 0x01, 0x01, 0x01, 0x01, 0xff) // domain selectors, upward flag
	mcs = append(mcs, domain([]byte{0x22}, []byte{0x02}, []byte{0x00}, []byte{0x01}, []byte{0x00}, []byte{0x01}, []byte{0xff, 0xff}, []byte{0x02})...)
	mcs = append(mcs, domain([]byte{0x01}, []byte{0x01}, []byte{0x01}, []byte{0x01}, []byte{0x00}, []byte{0x01}, []byte{0x04, 0x20}, []byte{0x02})...)
	mcs = append(mcs, domain([]byte{0xff, 0xff}, []byte{0xfc, 0x17}, []byte{0xff, 0xff}, []byte{0x01}, []byte{0x00}, []byte{0x01}, []byte{0xff, 0xff}, []byte{0x02})...)
	mcs = append(mcs, 0x04)
	mcs = append(mcs, berLen(len(gcc))...)
	mcs = append(mcs, gcc...)
	pdu := append([]byte{0x7f, 0x65}, berLen(len(mcs))...)
	pdu = append(pdu, mcs...)
	return tpkt(append([]byte{0x02, 0xf0, 0x80}, pdu...))
}
