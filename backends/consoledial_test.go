package backends

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"
)

// dialerFunc is a ConsoleDialer made of a function: a fake for the
// timer's logic only, which is all DialConsole adds to a dialer.
type dialerFunc func(ctx context.Context, ref InstanceRef, kind ConsoleKind) (net.Conn, error)

func (f dialerFunc) Consoles(context.Context, InstanceRef) ([]ConsoleKind, error) {
	return []ConsoleKind{ConsoleVNC}, nil
}

func (f dialerFunc) DialConsole(ctx context.Context, ref InstanceRef, kind ConsoleKind) (net.Conn, error) {
	return f(ctx, ref, kind)
}

// closeCounter is a net.Conn that counts its Close calls.
type closeCounter struct {
	net.Conn
	closed int
}

func (c *closeCounter) Close() error { c.closed++; return nil }

// TestDialConsoleTimeout: a dial the timer cut short is Unavailable naming
// the context whether the dialer then errors (the usual case) or still
// returns a connection (closed, not handed out); a dial that fails on its
// own keeps its error; one that succeeds keeps its context alive until
// the caller cancels it.
func TestDialConsoleTimeout(t *testing.T) {
	ref := InstanceRef{Backend: KindQEMU, Context: "lab", Name: "web"}
	const timeout = 20 * time.Millisecond
	blockThen := func(conn net.Conn, err error) dialerFunc {
		return func(ctx context.Context, _ InstanceRef, _ ConsoleKind) (net.Conn, error) {
			<-ctx.Done()
			return conn, err
		}
	}
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"dialer answers ctx's error", context.Canceled},
		{"dialer answers its own error", errors.New("dial unix /run/secret.sock: operation was canceled")},
		{"dialer answers a kind", NotFoundf("no console")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, cancel, err := dialConsole(context.Background(), blockThen(nil, tc.err), ref, ConsoleVNC, timeout)
			if c != nil || cancel != nil || !errors.Is(err, ErrUnavailable) || !strings.Contains(SafeMessage(err), ref.ContextKey()) {
				t.Fatalf("dialConsole = %v, %v; want Unavailable naming %s", c, err, ref.ContextKey())
			}
		})
	}
	t.Run("dialer answers a connection late", func(t *testing.T) {
		late := &closeCounter{}
		c, _, err := dialConsole(context.Background(), blockThen(late, nil), ref, ConsoleVNC, timeout)
		if c != nil || !errors.Is(err, ErrUnavailable) || late.closed != 1 {
			t.Fatalf("dialConsole = %v, %v (closed %d times); want Unavailable and the late connection closed", c, err, late.closed)
		}
	})
	t.Run("dialer fails in time", func(t *testing.T) {
		want := NotFoundf("instance web has no console")
		fail := dialerFunc(func(context.Context, InstanceRef, ConsoleKind) (net.Conn, error) { return nil, want })
		if _, _, err := dialConsole(context.Background(), fail, ref, ConsoleVNC, time.Hour); err != want {
			t.Fatalf("dialConsole = %v, want the dialer's own %v", err, want)
		}
	})
	t.Run("dialer succeeds in time", func(t *testing.T) {
		var dialCtx context.Context
		ok := dialerFunc(func(ctx context.Context, _ InstanceRef, _ ConsoleKind) (net.Conn, error) {
			dialCtx = ctx
			return &closeCounter{}, nil
		})
		c, cancel, err := dialConsole(context.Background(), ok, ref, ConsoleVNC, time.Hour)
		if err != nil || c == nil {
			t.Fatalf("dialConsole = %v, %v; want the connection", c, err)
		}
		if dialCtx.Err() != nil {
			t.Fatal("the connection's context ended with the dial")
		}
		cancel()
		if dialCtx.Err() == nil {
			t.Fatal("cancel did not end the connection's context")
		}
	})
}
