package console_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/go-chi/chi/v5"

	"github.com/corral-dev/corral/app/fleet"
	"github.com/corral-dev/corral/app/instances"
	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/backends/sim"
	"github.com/corral-dev/corral/handlers/console"
	"github.com/corral-dev/corral/static"
)

// Building the assets compresses every file: do it once per test binary.
var assets = sync.OnceValues(static.New)

// The refs the test backend serves: a running instance, a stopped one,
// and one on a context whose backend has no consoles.
const (
	refVM    = "sim/cons/-/vm"
	refOff   = "sim/cons/-/off"
	refPlain = "sim/plain/-/box"
)

// fakeSerial is a serial port as QEMU serves it: a unix socket server
// that accepts one client at a time and echoes input as a tty does.
type fakeSerial struct {
	ln       net.Listener
	mu       sync.Mutex
	cur      net.Conn
	accepted int
	ended    chan struct{} // one value each time a client's connection ends
}

func newFakeSerial(t *testing.T, path string) *fakeSerial {
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeSerial{ln: ln, ended: make(chan struct{}, 16)}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			f.mu.Lock()
			f.cur, f.accepted = c, f.accepted+1
			f.mu.Unlock()
			_, _ = io.Copy(c, c) // one client at a time: the next waits
			c.Close()
			f.ended <- struct{}{}
		}
	}()
	return f
}

// output writes p as if the guest printed it.
func (f *fakeSerial) output(t *testing.T, p string) {
	t.Helper()
	var c net.Conn
	eventually(t, "a client on the serial port", func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		c = f.cur
		return c != nil
	})
	if _, err := c.Write([]byte(p)); err != nil {
		t.Fatal(err)
	}
}

// drop cuts the current client off, as a guest that stops does.
func (f *fakeSerial) drop() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.cur != nil {
		f.cur.Close()
	}
}

func (f *fakeSerial) clients() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.accepted
}

// fakeVNC is an RFB server that accepts many clients: each gets the
// protocol greeting, then its input echoed.
type fakeVNC struct {
	mu    sync.Mutex
	conns map[net.Conn]bool
	total int
}

func newFakeVNC(t *testing.T, path string) *fakeVNC {
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeVNC{conns: map[net.Conn]bool{}}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			f.mu.Lock()
			f.conns[c] = true
			f.total++
			f.mu.Unlock()
			go func() {
				_, _ = c.Write([]byte("RFB 003.008\n"))
				_, _ = io.Copy(c, c)
				c.Close()
				f.mu.Lock()
				delete(f.conns, c)
				f.mu.Unlock()
			}()
		}
	}()
	return f
}

func (f *fakeVNC) open() (open, total int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.conns), f.total
}

func (f *fakeVNC) dropAll() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for c := range f.conns {
		c.Close()
	}
}

// consoleBackend is a simulated context whose instances' consoles are the
// fake servers above, reached over real unix sockets.
type consoleBackend struct {
	*sim.Backend
	dir     string
	history []byte
}

var (
	_ backends.ConsoleDialer = (*consoleBackend)(nil)
	_ backends.Scrollback    = (*consoleBackend)(nil)
)

func (b *consoleBackend) Consoles(ctx context.Context, ref backends.InstanceRef) ([]backends.ConsoleKind, error) {
	in, err := b.Get(ctx, ref)
	if err != nil {
		return nil, err
	}
	if in.State != backends.StateRunning {
		return []backends.ConsoleKind{}, nil
	}
	return []backends.ConsoleKind{backends.ConsoleVNC, backends.ConsoleSerial}, nil
}

func (b *consoleBackend) DialConsole(ctx context.Context, ref backends.InstanceRef, kind backends.ConsoleKind) (net.Conn, error) {
	in, err := b.Get(ctx, ref)
	if err != nil {
		return nil, err
	}
	if in.State != backends.StateRunning {
		return nil, backends.Conflictf("%s is stopped: start it first", ref.Name)
	}
	var d net.Dialer
	return d.DialContext(ctx, "unix", filepath.Join(b.dir, string(kind)+".sock"))
}

func (b *consoleBackend) SerialScrollback(ctx context.Context, ref backends.InstanceRef, max int) ([]byte, error) {
	return b.history, nil
}

// rig is a console server over the test backend and its fakes.
type rig struct {
	srv    *httptest.Server
	serial *fakeSerial
	vnc    *fakeVNC
	assets *static.Assets
}

type rigOptions struct {
	history   string
	authorize func(http.Handler) http.Handler
	sessions  console.SessionHook
}

func newRig(t *testing.T, o rigOptions) *rig {
	t.Helper()
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "cons") // short: unix socket paths are limited
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	b := &consoleBackend{Backend: sim.New(sim.Options{Context: "cons"}), dir: dir, history: []byte(o.history)}
	for _, s := range []backends.Spec{{Name: "vm", Start: true}, {Name: "off"}} {
		if _, err := b.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	plain := sim.New(sim.Options{Context: "plain"})
	if _, err := plain.Create(ctx, backends.Spec{Name: "box", Start: true}); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	f := fleet.New(fleet.Options{Logger: log})
	for _, bk := range []backends.Backend{b, plain} {
		if err := f.Add(bk); err != nil {
			t.Fatal(err)
		}
	}
	f.Refresh(ctx)
	a, err := assets()
	if err != nil {
		t.Fatal(err)
	}
	r := chi.NewRouter()
	r.Handle(static.Prefix+"*", a.Handler())
	console.Mount(r, console.Deps{Fleet: f, Instances: instances.New(f, nil, nil, log), Assets: a, Log: log, Authorize: o.authorize, Sessions: o.sessions})
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	return &rig{
		srv:    srv,
		serial: newFakeSerial(t, filepath.Join(dir, "serial.sock")),
		vnc:    newFakeVNC(t, filepath.Join(dir, "vnc.sock")),
		assets: a,
	}
}

// dial opens a WebSocket to path; header may set an Origin.
func (g *rig) dial(ctx context.Context, path string, header http.Header) (*websocket.Conn, *http.Response, error) {
	return websocket.Dial(ctx, "ws"+strings.TrimPrefix(g.srv.URL, "http")+path, &websocket.DialOptions{HTTPHeader: header})
}

func (g *rig) mustDial(t *testing.T, path string) *websocket.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, _, err := g.dial(ctx, path, nil)
	if err != nil {
		t.Fatalf("dial %s: %v", path, err)
	}
	t.Cleanup(func() { c.CloseNow() })
	return c
}

// expect reads messages until their concatenation contains want.
func expect(t *testing.T, c *websocket.Conn, want string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var got strings.Builder
	for !strings.Contains(got.String(), want) {
		_, p, err := c.Read(ctx)
		if err != nil {
			t.Fatalf("waiting for %q (got %q): %v", want, got.String(), err)
		}
		got.Write(p)
	}
}

func send(t *testing.T, c *websocket.Conn, p string) {
	t.Helper()
	if err := c.Write(context.Background(), websocket.MessageBinary, []byte(p)); err != nil {
		t.Fatal(err)
	}
}

// first reads the first message of a serial connection: the scrollback.
func first(t *testing.T, c *websocket.Conn) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, p, err := c.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return string(p)
}

// closed waits for the server to close c and returns the close frame.
func closed(t *testing.T, c *websocket.Conn) websocket.CloseError {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for {
		_, _, err := c.Read(ctx)
		if err == nil {
			continue
		}
		var ce websocket.CloseError
		if !errors.As(err, &ce) {
			t.Fatalf("the socket ended without a close frame: %v", err)
		}
		return ce
	}
}

// eventually polls cond for up to 5 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("%s: not after 5 s", what)
}
