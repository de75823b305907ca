// Package rfb speaks the opening of the RFB (VNC) protocol, RFC 6143:
// the version exchange and the security handshake, on either side, so a
// proxy can put an authentication of its own in front of a guest's
// display and then copy bytes. After a handshake on each side both
// connections stand at ClientInit, and the rest of the session passes
// through unchanged.
//
// Two security types are spoken: None (1) and VNC Authentication (2), the
// DES challenge Proxmox VE uses with its VNC tickets as passwords. Only
// the first 8 bytes of a VNC password count; that is the protocol's.
package rfb

import (
	"bytes"
	"crypto/des"
	"crypto/rand"
	"crypto/subtle"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"time"
)

// Security types (RFC 6143, 7.2.1).
const (
	SecNone    = 1
	SecVNCAuth = 2
)

// ErrAuth is returned when the other side refused the password or sent
// the wrong response.
var ErrAuth = errors.New("rfb: authentication failed")

// version is a negotiated protocol minor version: 3, 7 or 8.
type version int

func parseVersion(b []byte) (version, error) {
	var maj, min int
	if _, err := fmt.Sscanf(string(b), "RFB %03d.%03d\n", &maj, &min); err != nil || maj != 3 {
		return 0, fmt.Errorf("rfb: not an RFB version greeting: %q", b)
	}
	switch {
	case min >= 8:
		return 8, nil
	case min == 7:
		return 7, nil
	default: // 3.3, and 3.5 as some clients send it
		return 3, nil
	}
}

func (v version) greeting() []byte { return fmt.Appendf(nil, "RFB 003.%03d\n", int(v)) }

// ClientHandshake performs the client's side of the opening on c, whose
// other end is an RFB server: it agrees on a version, picks VNC
// Authentication with password when the server offers it and a password
// is given, else None, and returns once the server accepted. The
// connection then stands where the client sends ClientInit.
func ClientHandshake(c net.Conn, password string) error {
	var hello [12]byte
	if _, err := io.ReadFull(c, hello[:]); err != nil {
		return fmt.Errorf("rfb: read the server's version: %w", err)
	}
	v, err := parseVersion(hello[:])
	if err != nil {
		return err
	}
	if _, err := c.Write(v.greeting()); err != nil {
		return err
	}
	var sec uint32
	if v == 3 {
		if err := binary.Read(c, binary.BigEndian, &sec); err != nil {
			return fmt.Errorf("rfb: read the security type: %w", err)
		}
		if sec == 0 {
			return fmt.Errorf("rfb: the server refused the connection: %s", reason(c))
		}
	} else {
		var n [1]byte
		if _, err := io.ReadFull(c, n[:]); err != nil {
			return fmt.Errorf("rfb: read the security types: %w", err)
		}
		if n[0] == 0 {
			return fmt.Errorf("rfb: the server refused the connection: %s", reason(c))
		}
		types := make([]byte, n[0])
		if _, err := io.ReadFull(c, types); err != nil {
			return fmt.Errorf("rfb: read the security types: %w", err)
		}
		switch {
		case password != "" && bytes.IndexByte(types, SecVNCAuth) >= 0:
			sec = SecVNCAuth
		case bytes.IndexByte(types, SecNone) >= 0:
			sec = SecNone
		case bytes.IndexByte(types, SecVNCAuth) >= 0:
			return fmt.Errorf("rfb: the server requires a password and none is known")
		default:
			return fmt.Errorf("rfb: the server offers no security type this client speaks (%v)", types)
		}
		if _, err := c.Write([]byte{byte(sec)}); err != nil {
			return err
		}
	}
	switch sec {
	case SecNone:
		if v < 8 {
			return nil // no SecurityResult for None before 3.8
		}
	case SecVNCAuth:
		var chal [16]byte
		if _, err := io.ReadFull(c, chal[:]); err != nil {
			return fmt.Errorf("rfb: read the challenge: %w", err)
		}
		if _, err := c.Write(Encrypt(password, chal[:])); err != nil {
			return err
		}
	default:
		return fmt.Errorf("rfb: the server chose security type %d, which this client does not speak", sec)
	}
	var result uint32
	if err := binary.Read(c, binary.BigEndian, &result); err != nil {
		return fmt.Errorf("rfb: read the security result: %w", err)
	}
	if result != 0 {
		if v == 8 {
			return fmt.Errorf("%w: %s", ErrAuth, reason(c))
		}
		return ErrAuth
	}
	return nil
}

// reason reads the length-prefixed reason string a server sends with a
// failure, for the error; at most 256 bytes are kept.
func reason(r io.Reader) string {
	var n uint32
	if binary.Read(r, binary.BigEndian, &n) != nil {
		return "no reason given"
	}
	b := make([]byte, min(n, 256))
	k, _ := io.ReadFull(r, b)
	return string(b[:k])
}

// ServerHandshake performs the server's side of the opening on c, whose
// other end is an RFB client. With check nil it offers None; otherwise it
// offers VNC Authentication and accepts the client when check reports
// that the response answers the challenge (see Verify). A refused client
// gets the failure result (with failMsg in 3.8) and ErrAuth is returned.
// On success the connection stands where the client sends ClientInit.
func ServerHandshake(c net.Conn, check func(challenge, response []byte) bool, failMsg string) error {
	if _, err := c.Write(version(8).greeting()); err != nil {
		return err
	}
	var hello [12]byte
	if _, err := io.ReadFull(c, hello[:]); err != nil {
		return fmt.Errorf("rfb: read the client's version: %w", err)
	}
	v, err := parseVersion(hello[:])
	if err != nil {
		return err
	}
	sec := byte(SecNone)
	if check != nil {
		sec = SecVNCAuth
	}
	if v == 3 {
		if err := binary.Write(c, binary.BigEndian, uint32(sec)); err != nil {
			return err
		}
	} else {
		if _, err := c.Write([]byte{1, sec}); err != nil {
			return err
		}
		var pick [1]byte
		if _, err := io.ReadFull(c, pick[:]); err != nil {
			return fmt.Errorf("rfb: read the client's security type: %w", err)
		}
		if pick[0] != sec {
			return fmt.Errorf("rfb: the client chose security type %d, not the one offered", pick[0])
		}
	}
	if check == nil {
		if v < 8 {
			return nil
		}
		return binary.Write(c, binary.BigEndian, uint32(0))
	}
	chal := make([]byte, 16)
	_, _ = rand.Read(chal)
	if _, err := c.Write(chal); err != nil {
		return err
	}
	resp := make([]byte, 16)
	if _, err := io.ReadFull(c, resp); err != nil {
		return fmt.Errorf("rfb: read the client's response: %w", err)
	}
	if !check(chal, resp) {
		out := binary.BigEndian.AppendUint32(nil, 1)
		if v == 8 {
			out = binary.BigEndian.AppendUint32(out, uint32(len(failMsg)))
			out = append(out, failMsg...)
		}
		_, _ = c.Write(out)
		return ErrAuth
	}
	return binary.Write(c, binary.BigEndian, uint32(0))
}

// Verify returns a check for ServerHandshake that accepts the response
// to the challenge encrypted with password.
func Verify(password string) func(challenge, response []byte) bool {
	return func(chal, resp []byte) bool {
		return subtle.ConstantTimeCompare(Encrypt(password, chal), resp) == 1
	}
}

// Encrypt returns the VNC Authentication response to a 16-byte challenge:
// the challenge encrypted with DES in ECB mode under the first 8 bytes of
// password (zero-padded), each key byte's bits reversed, as every VNC
// implementation does.
func Encrypt(password string, challenge []byte) []byte {
	var key [8]byte
	copy(key[:], password)
	for i, b := range key {
		b = (b&0xF0)>>4 | (b&0x0F)<<4
		b = (b&0xCC)>>2 | (b&0x33)<<2
		b = (b&0xAA)>>1 | (b&0x55)<<1
		key[i] = b
	}
	blk, _ := des.NewCipher(key[:]) // a key of 8 bytes never fails
	out := make([]byte, len(challenge))
	for i := 0; i+8 <= len(challenge); i += 8 {
		blk.Encrypt(out[i:i+8], challenge[i:i+8])
	}
	return out
}

// Deadline sets a deadline on c for the duration of a handshake and
// returns the function that clears it.
func Deadline(c net.Conn, d time.Duration) func() {
	_ = c.SetDeadline(time.Now().Add(d))
	return func() { _ = c.SetDeadline(time.Time{}) }
}
