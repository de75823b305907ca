package console_test

import (
	"testing"

	"github.com/coder/websocket"
)

func TestSerialViewersShareOneConnection(t *testing.T) {
	g := newRig(t, rigOptions{})
	a := g.mustDial(t, "/ws/serial/"+refVM)
	if h := first(t, a); h != "" {
		t.Fatalf("first message %q; want the (empty) scrollback", h)
	}
	b := g.mustDial(t, "/ws/serial/"+refVM)
	first(t, b)
	if n := g.serial.clients(); n != 1 {
		t.Fatalf("serial port clients: %d; want 1 shared by both viewers", n)
	}

	g.serial.output(t, "login: ")
	expect(t, a, "login: ")
	expect(t, b, "login: ")
	send(t, a, "typed-by-a\r")
	expect(t, a, "typed-by-a")
	expect(t, b, "typed-by-a")
	send(t, b, "typed-by-b\r")
	expect(t, a, "typed-by-b")
	expect(t, b, "typed-by-b")

	// The port stays held while one viewer remains, and is released when
	// the last leaves, so the next viewer gets a fresh connection.
	a.Close(websocket.StatusNormalClosure, "")
	send(t, b, "after-a-left")
	expect(t, b, "after-a-left")
	b.Close(websocket.StatusNormalClosure, "")
	<-g.serial.ended
	c := g.mustDial(t, "/ws/serial/"+refVM)
	first(t, c)
	send(t, c, "hello-again")
	expect(t, c, "hello-again")
	if n := g.serial.clients(); n != 2 {
		t.Fatalf("serial port clients: %d; want 2 (one per hub)", n)
	}
}

func TestSerialScrollbackIsReplayedFirst(t *testing.T) {
	const history = "[    0.000000] Linux version 6.1\r\nGUEST_READY\r\n# "
	g := newRig(t, rigOptions{history: history})
	a := g.mustDial(t, "/ws/serial/"+refVM)
	if got := first(t, a); got != history {
		t.Fatalf("first message %q; want the scrollback %q", got, history)
	}
	g.serial.output(t, "live output")
	expect(t, a, "live output")

	// A viewer joining a running hub gets the scrollback too, first.
	b := g.mustDial(t, "/ws/serial/"+refVM)
	if got := first(t, b); got != history {
		t.Fatalf("second viewer's first message %q; want the scrollback", got)
	}
	g.serial.output(t, "more")
	expect(t, b, "more")
}

func TestSerialBackendDropClosesViewersWithReason(t *testing.T) {
	g := newRig(t, rigOptions{})
	a := g.mustDial(t, "/ws/serial/"+refVM)
	b := g.mustDial(t, "/ws/serial/"+refVM)
	first(t, a)
	first(t, b)
	g.serial.output(t, "last words")
	expect(t, a, "last words")
	expect(t, b, "last words")
	g.serial.drop()
	for name, c := range map[string]*websocket.Conn{"first": a, "second": b} {
		ce := closed(t, c)
		if ce.Code != websocket.StatusGoingAway || ce.Reason == "" {
			t.Errorf("%s viewer: close frame %d %q; want 1001 with a reason", name, ce.Code, ce.Reason)
		}
	}
	// The console can be opened again: a new hub dials anew.
	c := g.mustDial(t, "/ws/serial/"+refVM)
	first(t, c)
	send(t, c, "back")
	expect(t, c, "back")
}
