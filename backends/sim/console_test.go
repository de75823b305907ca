package sim_test

import (
	"context"
	"errors"
	"net"
	"slices"
	"testing"

	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/backends/sim"
)

// TestRDP: a context made with NewRDP offers RDP for its running
// instances and dials RDPAddr; New offers no consoles at all.
func TestRDP(t *testing.T) {
	ctx := context.Background()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan struct{}, 1)
	go func() {
		if c, err := ln.Accept(); err == nil {
			accepted <- struct{}{}
			c.Close()
		}
	}()
	b := sim.NewRDP(sim.Options{Context: "rdp", RDPAddr: ln.Addr().String()})
	on, err := b.Create(ctx, backends.Spec{Name: "on", Start: true})
	if err != nil {
		t.Fatal(err)
	}
	off, err := b.Create(ctx, backends.Spec{Name: "off"})
	if err != nil {
		t.Fatal(err)
	}
	if kinds, err := b.Consoles(ctx, on.Ref); err != nil || !slices.Equal(kinds, []backends.ConsoleKind{backends.ConsoleRDP}) {
		t.Fatalf("Consoles of a running instance = %v, %v; want rdp", kinds, err)
	}
	if kinds, err := b.Consoles(ctx, off.Ref); err != nil || len(kinds) != 0 {
		t.Fatalf("Consoles of a stopped instance = %v, %v; want none", kinds, err)
	}
	c, err := b.DialConsole(ctx, on.Ref, backends.ConsoleRDP)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	<-accepted
	if _, err := b.DialConsole(ctx, on.Ref, backends.ConsoleVNC); !errors.Is(err, backends.ErrUnsupported) {
		t.Fatalf("DialConsole vnc = %v, want the refusal", err)
	}
	if _, err := b.DialConsole(ctx, off.Ref, backends.ConsoleRDP); !errors.Is(err, backends.ErrConflict) {
		t.Fatalf("DialConsole of a stopped instance = %v, want a conflict", err)
	}
	if backends.Supports[backends.ConsoleDialer](sim.New(sim.Options{})) {
		t.Fatal("a plain simulated context claims consoles")
	}
}
