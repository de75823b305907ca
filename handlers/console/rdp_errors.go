package console

import (
	"crypto/tls"
	"errors"
	"net"
	"reflect"
	"syscall"
)

// The socket errors ioFailure tells apart; syscall.Errno matches them
// through the *net.OpError and *os.SyscallError a dial or read wraps.
var (
	errConnRefused error = syscall.ECONNREFUSED
	errConnReset   error = syscall.ECONNRESET
	errNetUnreach  error = syscall.ENETUNREACH
	errHostUnreach error = syscall.EHOSTUNREACH
)

// tlsAlert returns the TLS alert behind a failed handshake. crypto/tls
// reports an alert as tls.AlertError only on QUIC; on TCP a received alert
// is a *net.OpError "remote error" (one it sent, "local error") whose Err
// is its unexported alert type, a uint8 holding the code. The code is read
// through reflection so the web client can say which alert ended the
// handshake; any other error has none.
func tlsAlert(err error) (uint8, bool) {
	var ae tls.AlertError
	if errors.As(err, &ae) {
		return uint8(ae), true
	}
	var oe *net.OpError
	if !errors.As(err, &oe) || (oe.Op != "remote error" && oe.Op != "local error") || oe.Err == nil {
		return 0, false
	}
	v := reflect.ValueOf(oe.Err)
	if v.Kind() != reflect.Uint8 {
		return 0, false
	}
	return uint8(v.Uint()), true
}
