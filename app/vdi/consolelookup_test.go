package vdi_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/corral-dev/corral/app/vdi"
	"github.com/corral-dev/corral/store"
)

// poolCounter is the store, counting the reads of every pool.
type poolCounter struct {
	*store.Store
	reads atomic.Int64
}

func (p *poolCounter) VDIPools(ctx context.Context) ([]store.VDIPool, error) {
	p.reads.Add(1)
	return p.Store.VDIPools(ctx)
}

// TestConsoleOpenReadsThePoolsOnce: a holder's console opens with one
// read of the pools: the access check's lookup serves the session count
// that follows; the open marks the desktop connected all the same. An
// admin's open, which the access check does not look up, reads them once
// too.
func TestConsoleOpenReadsThePoolsOnce(t *testing.T) {
	e := newEnv(t, vdi.Options{})
	e.pool(t, 1, false)
	ctx := context.Background()
	if _, err := e.svc.Claim(ctx, alice, "rest", "vm/-/desk"); err != nil {
		t.Fatal(err)
	}
	pc := &poolCounter{Store: e.st}
	svc := vdi.New(vdi.Options{Fleet: e.fleet, Tasks: e.tasks, Store: pc, Now: e.clock.Now})

	for _, who := range []struct {
		name string
		id   func() (bool, error)
	}{
		{"holder", func() (bool, error) { return svc.ConsoleAccess(ctx, alice, deskRef) }},
		{"admin", func() (bool, error) { return svc.ConsoleAccess(ctx, boss, deskRef) }},
	} {
		before := pc.reads.Load()
		if _, err := who.id(); err != nil {
			t.Fatalf("%s: ConsoleAccess: %v", who.name, err)
		}
		svc.ConsoleOpened(deskRef)
		if n := pc.reads.Load() - before; n != 1 {
			t.Errorf("%s: access and open read the pools %d times, want once", who.name, n)
		}
		d, err := svc.Desktop(ctx, alice, "vm/-/desk-1")
		if err != nil || !d.Connected {
			t.Fatalf("%s: after the open: %+v, %v; want connected", who.name, d, err)
		}
		svc.ConsoleClosed(deskRef)
	}
}
