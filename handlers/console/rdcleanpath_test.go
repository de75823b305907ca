package console

import (
	"bytes"
	"encoding/hex"
	"strings"
	"testing"
)

// capturedRequest is the request IronRDP's web client sent to a proxy in
// the prototype (shared/reference/consoles.md): destination
// 127.0.0.1:13389, token "demo-token", and a 42-byte X.224 Connection
// Request with a mstshash cookie and RDP_NEG_REQ for SSL|HYBRID|HYBRID_EX.
func capturedRequest(t *testing.T) []byte {
	t.Helper()
	h := "3055" + "a004" + "02020d3e" +
		"a211" + "0c0f" + hex.EncodeToString([]byte("127.0.0.1:13389")) +
		"a30c" + "0c0a" + hex.EncodeToString([]byte("demo-token")) +
		"a62c" + "042a" + "0300002a" + "25e00000000000" + hex.EncodeToString([]byte("Cookie: mstshash=user\r\n")) + "010008000b000000"
	b, err := hex.DecodeString(h)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != 87 {
		t.Fatalf("the capture is %d bytes, want 87", len(b))
	}
	return b
}

func TestParseCapturedRequest(t *testing.T) {
	b := capturedRequest(t)
	n, err := pduLength(b[:2])
	if err != nil || n != 87 {
		t.Fatalf("pduLength = %d, %v; want 87", n, err)
	}
	req, err := parseRequest(b)
	if err != nil {
		t.Fatal(err)
	}
	if req.Destination != "127.0.0.1:13389" || req.ProxyAuth != "demo-token" || len(req.X224) != 42 || req.PreconnectionBlob != "" {
		t.Fatalf("request = %+v", req)
	}
	if !bytes.Contains(req.X224, []byte("mstshash=user")) {
		t.Fatalf("x224 = %x, want the client's cookie verbatim", req.X224)
	}
	// Marshalling the decoded request gives the client's bytes back: the
	// same tags, the UTF8String type and the absent fields left out.
	if got := marshalPDU(req); !bytes.Equal(got, b) {
		t.Fatalf("re-encoded request:\n%x\nwant\n%x", got, b)
	}
}

func TestParseRequestRefusals(t *testing.T) {
	good := capturedRequest(t)
	for _, tc := range []struct {
		name string
		pdu  []byte
		want string
	}{
		{"trailing bytes", append(append([]byte{}, good...), 0), "bytes after"},
		{"not DER", []byte{0x30, 0x03, 0x02, 0x01}, "not valid DER"},
		{"wrong version", marshalVersion(t, 3389), "version 3389"},
		{"no x224", marshalPDUNoVersion(rdcleanpathPDU{Version: rdcleanpathVersion, ProxyAuth: "t"}), "no X.224"},
		{"x224 longer than its TPKT length", marshalPDUNoVersion(rdcleanpathPDU{Version: rdcleanpathVersion, ProxyAuth: "t", X224: []byte{3, 0, 0, 4, 9}}), "not one TPKT"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseRequest(tc.pdu)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("parseRequest = %v, want an error about %q", err, tc.want)
			}
		})
	}
}

func marshalVersion(t *testing.T, v int64) []byte {
	t.Helper()
	req, err := parseRequest(capturedRequest(t))
	if err != nil {
		t.Fatal(err)
	}
	req.Version = v
	return marshalPDUNoVersion(req)
}

// marshalPDUNoVersion encodes p with the version it holds.
func marshalPDUNoVersion(p rdcleanpathPDU) []byte {
	v := p.Version
	b := marshalPDU(p)
	if v == rdcleanpathVersion {
		return b
	}
	// marshalPDU always writes VERSION_1 (02 02 0d 3e): patch the value.
	i := bytes.Index(b, []byte{0x02, 0x02, 0x0d, 0x3e})
	b[i+2], b[i+3] = byte(v>>8), byte(v)
	return b
}

func TestPDULength(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []byte
		n    int
		bad  bool
	}{
		{"empty", nil, 0, false},
		{"short form", []byte{0x30, 0x05}, 7, false},
		{"long form, incomplete", []byte{0x30, 0x82, 0x03}, 0, false},
		{"long form", []byte{0x30, 0x82, 0x03, 0x38}, 4 + 0x338, false},
		{"not a sequence", []byte{0x31, 0x05}, 0, true},
		{"indefinite", []byte{0x30, 0x80}, 0, true},
		{"four length bytes", []byte{0x30, 0x84, 0, 0, 0, 1}, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, err := pduLength(tc.in)
			if (err != nil) != tc.bad || n != tc.n {
				t.Fatalf("pduLength(%x) = %d, %v; want %d (error %v)", tc.in, n, err, tc.n, tc.bad)
			}
		})
	}
}

func TestParseConfirm(t *testing.T) {
	cc := func(neg ...byte) []byte {
		p := append([]byte{0x03, 0x00, 0x00, 0x00, 0x0e, 0xd0, 0, 0, 0x12, 0x34, 0}, neg...)
		p[3] = byte(len(p))
		p[4] = byte(len(p) - 5)
		return p
	}
	for _, tc := range []struct {
		name string
		in   []byte
		want negotiation
		bad  bool
	}{
		{"xrdp selects SSL", cc(0x02, 0x01, 0x08, 0x00, 0x01, 0, 0, 0), negotiation{selected: 1}, false},
		{"hybrid", cc(0x02, 0x00, 0x08, 0x00, 0x02, 0, 0, 0), negotiation{selected: 2}, false},
		{"standard RDP security", cc(0x02, 0x00, 0x08, 0x00, 0, 0, 0, 0), negotiation{selected: protocolRDP}, false},
		{"no negotiation data", cc(), negotiation{selected: protocolRDP}, false},
		{"failure", cc(0x03, 0x00, 0x08, 0x00, 0x05, 0, 0, 0), negotiation{failed: true}, false},
		{"not a confirm", []byte{0x03, 0x00, 0x00, 0x0b, 0x06, 0xe0, 0, 0, 0, 0, 0}, negotiation{}, true},
		{"unknown negotiation type", cc(0x07, 0x00, 0x08, 0x00, 0, 0, 0, 0), negotiation{}, true},
		{"bad TPKT length", []byte{0x03, 0x00, 0x00, 0x30, 0x0e, 0xd0, 0, 0, 0, 0, 0}, negotiation{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseConfirm(tc.in)
			if (err != nil) != tc.bad || got != tc.want {
				t.Fatalf("parseConfirm = %+v, %v; want %+v (error %v)", got, err, tc.want, tc.bad)
			}
		})
	}
}

// TestMarshalError checks the error PDU's shape against the ASN.1 of
// RDCleanPathErr: the absent codes are left out, the present ones are
// explicit context tags.
func TestMarshalError(t *testing.T) {
	got := hex.EncodeToString(marshalPDU(rdcleanpathPDU{Error: rdcleanpathErr{ErrorCode: errCodeGeneral, HTTPStatusCode: 401}}))
	// SEQUENCE { [0] 3390, [1] SEQUENCE { [0] 1, [1] 401 } }
	want := "3015" + "a004" + "02020d3e" + "a10d" + "300b" + "a003020101" + "a104" + "02020191"
	if got != want {
		t.Fatalf("error PDU = %s, want %s", got, want)
	}
}
