package pve

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"

	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/internal/rfb"
)

// PVE's termproxy protocol, spoken on vncwebsocket after termproxy: the
// viewer's first message is "USER:TICKET\n" and the server answers "OK";
// then the viewer sends frames "0:LEN:DATA" (input), "1:COLS:ROWS:"
// (resize, ignored: a serial port has no size) and "2" (ping), and the
// server sends the terminal's output as it comes.

// maxTermFrame bounds one input frame (a paste).
const maxTermFrame = 1 << 20

// ServeTerm runs termproxy's protocol between viewer and the serial port
// until either side ends. A first line without the grant's ticket is
// refused: the viewer gets nothing and the error is returned.
func (v *Console) ServeTerm(viewer net.Conn) error {
	r := bufio.NewReader(viewer)
	clear := rfb.Deadline(viewer, backends.ConsoleDialTimeout)
	line, err := r.ReadString('\n')
	clear()
	if err != nil {
		return fmt.Errorf("pve: termproxy: read the first line: %w", err)
	}
	// USER:TICKET, and the ticket has colons of its own.
	i := bytes.IndexByte([]byte(line), ':')
	if i < 0 || line[i+1:len(line)-1] != v.ticket {
		return errors.New("pve: termproxy: the first line does not carry the ticket")
	}
	if _, err := viewer.Write([]byte("OK")); err != nil {
		return err
	}
	done := make(chan error, 2)
	go func() { _, err := io.Copy(viewer, v.conn); done <- err }()
	go func() { done <- readFrames(r, v.conn) }()
	return <-done
}

// readFrames decodes the viewer's frames and writes the input to w.
func readFrames(r *bufio.Reader, w io.Writer) error {
	for {
		t, err := r.ReadByte()
		if err != nil {
			return err
		}
		switch t {
		case '0':
			if _, err := field(r); err != nil { // the ':' after the type
				return err
			}
			n, err := number(r)
			if err != nil {
				return err
			}
			if n > maxTermFrame {
				return fmt.Errorf("pve: termproxy: an input frame of %d bytes", n)
			}
			if _, err := io.CopyN(w, r, int64(n)); err != nil {
				return err
			}
		case '1':
			for range 3 { // ":COLS:ROWS:"
				if _, err := field(r); err != nil {
					return err
				}
			}
		case '2':
		default:
			return fmt.Errorf("pve: termproxy: unknown frame type %q", t)
		}
	}
}

// field reads up to and including the next ':' and returns what came
// before it (at most 16 bytes).
func field(r *bufio.Reader) (string, error) {
	var b []byte
	for len(b) <= 16 {
		c, err := r.ReadByte()
		if err != nil {
			return "", err
		}
		if c == ':' {
			return string(b), nil
		}
		b = append(b, c)
	}
	return "", errors.New("pve: termproxy: a frame field is too long")
}

func number(r *bufio.Reader) (int, error) {
	f, err := field(r)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(f)
}
