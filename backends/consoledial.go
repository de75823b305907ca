package backends

import (
	"context"
	"errors"
	"net"
	"time"
)

// ConsoleDialTimeout bounds opening an instance's console connection,
// and the protocol handshake a caller does on it right after.
const ConsoleDialTimeout = 10 * time.Second

// DialConsole opens ref's console of kind through d within
// ConsoleDialTimeout. ctx bounds the connection's life (some backends tie
// the stream to it), so the dial's own deadline is a timer that cancels
// ctx only while the dial is in progress; the caller calls the returned
// cancel once it has closed the connection. A dial that runs out of time
// is Unavailable, naming ref's context.
func DialConsole(ctx context.Context, d ConsoleDialer, ref InstanceRef, kind ConsoleKind) (net.Conn, context.CancelFunc, error) {
	return dialConsole(ctx, d, ref, kind, ConsoleDialTimeout)
}

func dialConsole(ctx context.Context, d ConsoleDialer, ref InstanceRef, kind ConsoleKind, timeout time.Duration) (net.Conn, context.CancelFunc, error) {
	ctx, cancel := context.WithCancel(ctx)
	timer := time.AfterFunc(timeout, cancel)
	c, err := d.DialConsole(ctx, ref, kind)
	if !timer.Stop() {
		// The timer cancelled the dial: whatever the dialer made of that
		// (usually an error of its own, or ctx's), the dial ran out of time.
		if err == nil {
			c.Close()
		}
		err = Unavailable(ref.ContextKey(), errors.New("console dial timed out"))
	}
	if err != nil {
		cancel()
		return nil, nil, err
	}
	return c, cancel, nil
}
