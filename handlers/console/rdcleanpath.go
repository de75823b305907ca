package console

import (
	"encoding/asn1"
	"encoding/binary"
	"errors"
	"fmt"
)

// RDCleanPath is the protocol IronRDP's web client speaks to an RDP proxy
// over a WebSocket (Devolutions' ironrdp-rdcleanpath crate): one DER PDU
// each way, then the RDP stream. The client sends its X.224 Connection
// Request and the proxy's token; the proxy dials the server, forwards the
// request, reads the Connection Confirm, does the TLS handshake itself and
// answers with the Confirm and the server's certificates, so the client
// can run CredSSP over the already-upgraded stream.

// rdcleanpathVersion is VERSION_1: BASE_VERSION 3389 + 1.
const rdcleanpathVersion = 3390

// maxPDU bounds one RDCleanPath PDU (and so the request the proxy buffers
// before it authenticates anyone): a request is under 1 KiB, a response
// with a certificate chain a few KiB.
const maxPDU = 64 << 10

// The error codes of rdcleanpathErr.ErrorCode.
const (
	errCodeGeneral     = 1
	errCodeNegotiation = 2 // the server refused the negotiation; X224 holds its answer
)

// rdcleanpathPDU is RDCleanPathPdu: every field an EXPLICIT context tag in
// a SEQUENCE, all but the version optional. encoding/asn1 omits an
// optional field holding its zero value, which is how "absent" is
// written; the strings need the utf8 tag (UTF8String, not the
// PrintableString Go would otherwise choose).
type rdcleanpathPDU struct {
	Version           int64          `asn1:"explicit,tag:0"`
	Error             rdcleanpathErr `asn1:"explicit,tag:1,optional"`
	Destination       string         `asn1:"explicit,tag:2,optional,utf8"`
	ProxyAuth         string         `asn1:"explicit,tag:3,optional,utf8"`
	ServerAuth        string         `asn1:"explicit,tag:4,optional,utf8"`
	PreconnectionBlob string         `asn1:"explicit,tag:5,optional,utf8"`
	X224              []byte         `asn1:"explicit,tag:6,optional"`
	ServerCertChain   [][]byte       `asn1:"explicit,tag:7,optional"`
	// Tag 8 (an OCSP response) is reserved and never sent.
	ServerAddr string `asn1:"explicit,tag:9,optional,utf8"`
}

// rdcleanpathErr is RDCleanPathErr. A zero optional code is absent: no
// HTTP status, WSA error or TLS alert of interest is 0.
type rdcleanpathErr struct {
	ErrorCode      int64 `asn1:"explicit,tag:0"`
	HTTPStatusCode int64 `asn1:"explicit,tag:1,optional"`
	WSALastError   int64 `asn1:"explicit,tag:2,optional"`
	TLSAlertCode   int64 `asn1:"explicit,tag:3,optional"`
}

// pduLength returns the length of the DER PDU that p starts with (its
// SEQUENCE header and content), or 0 when p is too short to tell. The
// proxy needs it to know when the client's request is complete before it
// can hand the bytes to encoding/asn1, which parses a whole value but
// cannot say how much of one is missing; this reads the header only (tag
// 0x30 and a short or long-form length, as ironrdp-rdcleanpath's detect
// does) and leaves the parsing to encoding/asn1.
func pduLength(p []byte) (int, error) {
	if len(p) < 2 {
		return 0, nil
	}
	if p[0] != 0x30 {
		return 0, errors.New("console: an RDCleanPath PDU starts with a DER SEQUENCE (0x30)")
	}
	if p[1] < 0x80 {
		return 2 + int(p[1]), nil
	}
	n := int(p[1] & 0x7f)
	if n == 0 || n > 3 {
		// Indefinite length is not DER; 4 length bytes exceed maxPDU anyway.
		return 0, fmt.Errorf("console: RDCleanPath PDU length of %d bytes is not accepted", n)
	}
	if len(p) < 2+n {
		return 0, nil
	}
	size := 0
	for _, b := range p[2 : 2+n] {
		size = size<<8 | int(b)
	}
	return 2 + n + size, nil
}

// parseRequest decodes a client's request and checks the fields a request
// must carry.
func parseRequest(p []byte) (rdcleanpathPDU, error) {
	var pdu rdcleanpathPDU
	rest, err := asn1.Unmarshal(p, &pdu)
	if err != nil {
		return pdu, fmt.Errorf("console: the RDCleanPath request is not valid DER: %w", err)
	}
	if len(rest) != 0 {
		return pdu, errors.New("console: bytes after the RDCleanPath request")
	}
	if pdu.Version != rdcleanpathVersion {
		return pdu, fmt.Errorf("console: RDCleanPath version %d is not accepted: only %d", pdu.Version, rdcleanpathVersion)
	}
	if len(pdu.X224) == 0 {
		return pdu, errors.New("console: the RDCleanPath request has no X.224 Connection Request")
	}
	if err := checkTPKT(pdu.X224); err != nil {
		return pdu, err
	}
	return pdu, nil
}

// checkTPKT reports whether p is exactly one TPKT packet (version 3, a
// length field equal to len(p)): the proxy forwards the client's
// Connection Request verbatim, so it must not smuggle more than one.
func checkTPKT(p []byte) error {
	if len(p) < 4 || p[0] != 0x03 || p[1] != 0x00 || int(binary.BigEndian.Uint16(p[2:4])) != len(p) {
		return errors.New("console: the X.224 Connection Request is not one TPKT packet")
	}
	return nil
}

// marshalPDU encodes p; the PDUs the proxy builds always encode.
func marshalPDU(p rdcleanpathPDU) []byte {
	p.Version = rdcleanpathVersion
	b, err := asn1.Marshal(p)
	if err != nil {
		panic("console: RDCleanPath PDU does not encode: " + err.Error())
	}
	return b
}

// RDP negotiation: what the server's Connection Confirm selected
// (MS-RDPBCGR 2.2.1.2).
const (
	protocolRDP   = 0 // standard RDP security: the web client cannot do it
	negTypeRsp    = 0x02
	negTypeFail   = 0x03
	x224CodeCC    = 0xd0
	maxConfirmLen = 512 // Devolutions Gateway's cap on the Connection Confirm
)

// negotiation is what a Connection Confirm says.
type negotiation struct {
	failed   bool   // RDP_NEG_FAILURE: the server refused every protocol offered
	selected uint32 // the protocol selected when !failed
}

// parseConfirm reads the server's X.224 Connection Confirm (one TPKT
// packet). A Confirm without negotiation data selects standard RDP
// security.
func parseConfirm(p []byte) (negotiation, error) {
	if err := checkTPKT(p); err != nil {
		return negotiation{}, errors.New("console: the server's X.224 answer is not one TPKT packet")
	}
	// TPKT (4) + LI + code: the code's high nibble is CC.
	if len(p) < 11 || p[5]&0xf0 != x224CodeCC {
		return negotiation{}, errors.New("console: the server's X.224 answer is not a Connection Confirm")
	}
	if len(p) < 19 {
		return negotiation{selected: protocolRDP}, nil
	}
	neg := p[11:19] // type, flags, length (8), then the protocol or failure code
	switch neg[0] {
	case negTypeRsp:
		return negotiation{selected: binary.LittleEndian.Uint32(neg[4:8])}, nil
	case negTypeFail:
		return negotiation{failed: true}, nil
	}
	return negotiation{}, fmt.Errorf("console: the Connection Confirm carries negotiation type %#x", neg[0])
}
