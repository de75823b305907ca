package vdi_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/corral-dev/corral/app/vdi"
	"github.com/corral-dev/corral/store"
)

// gatedStore holds the next VDIPool read, once armed, after it has read
// its rows: a load begun before a change and answered after it.
type gatedStore struct {
	*store.Store
	mu      sync.Mutex
	armed   bool
	read    chan struct{} // closed when the held read has its rows
	release chan struct{} // closed to let it answer
}

func (g *gatedStore) arm() {
	g.mu.Lock()
	g.armed, g.read, g.release = true, make(chan struct{}), make(chan struct{})
	g.mu.Unlock()
}

func (g *gatedStore) VDIPool(ctx context.Context, id string) (store.VDIPool, error) {
	p, err := g.Store.VDIPool(ctx, id)
	g.mu.Lock()
	hold := g.armed
	g.armed = false
	read, release := g.read, g.release
	g.mu.Unlock()
	if hold {
		close(read)
		<-release
	}
	return p, err
}

// TestResizeReadsThePoolFresh: a resize decides on the pool as it is,
// not on a claimant's load of the pool begun before another resize
// committed and still in flight (the loads of a pool are shared).
func TestResizeReadsThePoolFresh(t *testing.T) {
	e := newEnv(t, vdi.Options{})
	ctx := context.Background()
	e.pool(t, 2, false)
	g := &gatedStore{Store: e.st}
	svc := vdi.New(vdi.Options{Fleet: e.fleet, Tasks: e.tasks, Store: g, Now: e.clock.Now})

	g.arm()
	claimed := make(chan error, 1)
	go func() { _, err := svc.Claim(ctx, alice, "rest", "vm/-/desk"); claimed <- err }()
	<-g.read // the claimant's load has read desk-1 and desk-2
	released := false
	release := func() {
		if !released {
			released = true
			close(g.release)
		}
	}
	defer release()
	// Another resize commits a third member meanwhile.
	if r, err := e.svc.ResizePool(ctx, root, "cli", "vm/-/desk", 3); err != nil || len(r.Added) != 1 {
		t.Fatalf("grow to 3 = %+v, %v", r, err)
	}
	type result struct {
		r   vdi.Resize
		err error
	}
	done := make(chan result, 1)
	go func() { r, err := svc.ResizePool(ctx, root, "cli", "vm/-/desk", 4); done <- result{r, err} }()
	var res result
	select {
	case res = <-done:
	case <-time.After(30 * time.Second): // a guard against the deadlock, not a measure
		release()
		res = <-done
		t.Errorf("the resize waited for the claimant's load begun before the previous resize")
	}
	if res.err != nil || res.r.From != 3 || !slices.Equal(res.r.Added, desks(4)) {
		t.Fatalf("grow to 4 after the growth to 3 = %+v, %v; want from 3, adding desk-4", res.r, res.err)
	}
	if got := e.members(t); !slices.Equal(got, desks(1, 2, 3, 4)) {
		t.Fatalf("members: %v, want desk-1 to desk-4", got)
	}
	release()
	if err := <-claimed; err != nil {
		t.Fatalf("the claimant's claim: %v", err)
	}
}
