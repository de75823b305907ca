package qemu

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"time"
)

// A small QMP client. github.com/digitalocean/go-qemu/qmp exists, but it is
// published only as pseudo-versions, its SocketMonitor takes no context
// (a call on a wedged qemu blocks without a deadline) and its module pulls
// go-libvirt into go.mod; the protocol subset Corral needs (greeting,
// qmp_capabilities, one command at a time, events skipped) fits here.
//
// A QMP socket serves one client at a time: a second connection waits in
// the listen backlog, without a greeting, until the first closes. So every
// exchange opens a connection, does its work and closes it, and every read
// has a deadline.

// qmpTimeout bounds an exchange whose ctx has no earlier deadline: QMP
// answers in milliseconds, so seconds mean a wedged or busy monitor.
const qmpTimeout = 10 * time.Second

// qmpError is an error answer of qemu: {"error": {"class", "desc"}}.
type qmpError struct {
	Class string `json:"class"`
	Desc  string `json:"desc"`
}

func (e *qmpError) Error() string { return "qmp: " + e.Class + ": " + e.Desc }

type qmpConn struct {
	c net.Conn
	r *bufio.Reader
}

// qmpMessage is any line qemu sends: a greeting, an answer or an event.
type qmpMessage struct {
	QMP    json.RawMessage `json:"QMP"`
	Return json.RawMessage `json:"return"`
	Error  *qmpError       `json:"error"`
	Event  string          `json:"event"`
}

// dialQMP connects to the socket at path and leaves capabilities
// negotiation done, ready for commands.
func dialQMP(ctx context.Context, path string) (*qmpConn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, err
	}
	deadline, ok := ctx.Deadline()
	if !ok || time.Until(deadline) > qmpTimeout {
		deadline = time.Now().Add(qmpTimeout)
	}
	_ = c.SetDeadline(deadline)
	// Close the connection when ctx ends, so a blocked read returns.
	stop := context.AfterFunc(ctx, func() { _ = c.Close() })
	q := &qmpConn{c: &ctxConn{Conn: c, stop: stop}, r: bufio.NewReader(c)}
	m, err := q.read()
	if err != nil {
		q.Close()
		return nil, fmt.Errorf("qmp: greeting: %w", err)
	}
	if m.QMP == nil {
		q.Close()
		return nil, errors.New("qmp: the socket did not greet with QMP")
	}
	if _, err := q.execute("qmp_capabilities", nil); err != nil {
		q.Close()
		return nil, err
	}
	return q, nil
}

// ctxConn stops the AfterFunc of dialQMP when the connection closes.
type ctxConn struct {
	net.Conn
	stop func() bool
}

func (c *ctxConn) Close() error { c.stop(); return c.Conn.Close() }

func (q *qmpConn) Close() { _ = q.c.Close() }

func (q *qmpConn) read() (qmpMessage, error) {
	line, err := q.r.ReadBytes('\n')
	if err != nil {
		return qmpMessage{}, err
	}
	var m qmpMessage
	if err := json.Unmarshal(line, &m); err != nil {
		return qmpMessage{}, fmt.Errorf("qmp: bad message: %w", err)
	}
	return m, nil
}

// execute sends one command and returns its answer, skipping the events
// qemu interleaves (a SHUTDOWN event can arrive before the answer to the
// command that caused it).
func (q *qmpConn) execute(cmd string, args any) (json.RawMessage, error) {
	req := map[string]any{"execute": cmd}
	if args != nil {
		req["arguments"] = args
	}
	data, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	if _, err := q.c.Write(append(data, '\n')); err != nil {
		return nil, fmt.Errorf("qmp: %s: %w", cmd, err)
	}
	for {
		m, err := q.read()
		if err != nil {
			return nil, fmt.Errorf("qmp: %s: %w", cmd, err)
		}
		switch {
		case m.Error != nil:
			return nil, m.Error
		case m.Return != nil:
			return m.Return, nil
		}
		// An event or a line of no interest: keep reading.
	}
}

// qmp runs one command on the VM's monitor and returns the answer.
func qmp(ctx context.Context, sock, cmd string) (json.RawMessage, error) {
	q, err := dialQMP(ctx, sock)
	if err != nil {
		return nil, err
	}
	defer q.Close()
	return q.execute(cmd, nil)
}

// qmpStatus returns the run state query-status reports ("running",
// "paused", "shutdown", ...).
func qmpStatus(ctx context.Context, sock string) (string, error) {
	ret, err := qmp(ctx, sock, "query-status")
	if err != nil {
		return "", err
	}
	var st struct {
		Status string `json:"status"`
	}
	if err := json.Unmarshal(ret, &st); err != nil {
		return "", fmt.Errorf("qmp: query-status: %w", err)
	}
	return st.Status, nil
}

// qmpQuit asks qemu to exit at once. qemu may close the socket before its
// answer is read; that is the command working, not failing.
func qmpQuit(ctx context.Context, sock string) error {
	_, err := qmp(ctx, sock, "quit")
	if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) {
		return nil
	}
	return err
}
