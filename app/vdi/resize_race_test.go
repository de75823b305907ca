package vdi_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corral-dev/corral/app/vdi"
	"github.com/corral-dev/corral/backends"
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

// running waits until n tasks of action are running.
func (e *env) running(t *testing.T, action string, n int) {
	t.Helper()
	for range 1000 {
		ts, err := e.tasks.Recent(context.Background(), 50)
		if err != nil {
			t.Fatal(err)
		}
		got := 0
		for _, tk := range ts {
			if tk.Action == action && tk.Status == store.TaskRunning {
				got++
			}
		}
		if got >= n {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%d tasks %q never ran", n, action)
}

// TestDeletePoolDuringGrowth: a delete of a pool that is growing waits
// for the growth and deletes every member, those the growth made too; a
// growth queued behind the delete finds the pool gone and says so (or,
// when it ran first, its members are deleted with the pool).
func TestDeletePoolDuringGrowth(t *testing.T) {
	e := newEnv(t, vdi.Options{})
	ctx := context.Background()
	e.pool(t, 1, false)

	cloning, releaseClone := make(chan struct{}), make(chan struct{})
	var once sync.Once
	e.fail.Hook("clone", func() {
		once.Do(func() { close(cloning); <-releaseClone })
	})
	grown := make(chan struct{})
	e.fail.Hook("delete", func() { <-grown }) // an unlocked delete is caught between its read and its end
	type result struct {
		r   vdi.Resize
		err error
	}
	growth := make(chan result, 1)
	go func() { r, err := e.svc.ResizePool(ctx, root, "cli", "vm/-/desk", 3); growth <- result{r, err} }()
	<-cloning
	deleted := make(chan error, 1)
	go func() { deleted <- e.svc.DeletePool(ctx, admin, "vm/-/desk") }()
	e.running(t, "vdi pool delete", 1)
	late := make(chan result, 1)
	go func() { r, err := e.svc.ResizePool(ctx, root, "cli", "vm/-/desk", 4); late <- result{r, err} }()
	e.running(t, "vdi pool resize", 2)

	close(releaseClone)
	g := <-growth
	close(grown)
	if g.err != nil || !slices.Equal(g.r.Added, desks(2, 3)) {
		t.Fatalf("the growth = %+v, %v", g.r, g.err)
	}
	if err := <-deleted; err != nil {
		t.Fatalf("delete: %v", err)
	}
	l := <-late
	if l.err != nil && (!errors.Is(l.err, backends.ErrNotFound) || !strings.Contains(l.err.Error(), "was deleted before the resize began")) {
		t.Fatalf("the growth queued behind the delete: %v", l.err)
	}
	if _, err := e.st.VDIPool(ctx, "vm/-/desk"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the pool after the delete: %v", err)
	}
	for _, n := range []string{"desk-1", "desk-2", "desk-3", "desk-4"} {
		if e.exists(t, n) {
			t.Errorf("%s is left behind by the delete (the late growth: %+v, %v)", n, l.r, l.err)
		}
	}
}

// cancelStore cancels the caller's context as the member's row is
// deleted: the caller went away between the VM's delete and the row's.
type cancelStore struct {
	*store.Store
	cancel func()
}

func (c cancelStore) DeleteVDIMember(ctx context.Context, desktop string) error {
	c.cancel()
	return c.Store.DeleteVDIMember(ctx, desktop)
}

// TestShrinkCancelledAfterDelete: a shrink whose caller goes away once a
// member's VM is deleted still unregisters that member and ends its
// hold, so no member without a VM stays held by the reconciler.
func TestShrinkCancelledAfterDelete(t *testing.T) {
	e := newEnv(t, vdi.Options{})
	e.pool(t, 2, false)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	svc := vdi.New(vdi.Options{Fleet: e.fleet, Tasks: e.tasks, Store: cancelStore{e.st, cancel}, Now: e.clock.Now})
	if r, err := svc.ResizePool(ctx, root, "cli", "vm/-/desk", 1); err != nil {
		t.Logf("the cancelled shrink: %+v, %v", r, err)
	}
	if e.exists(t, "desk-2") {
		t.Fatalf("desk-2 was not deleted")
	}
	if got := e.members(t); !slices.Equal(got, desks(1)) {
		t.Fatalf("members after the cancelled shrink: %v, want desk-1 only (desk-2 has no VM)", got)
	}
	if c, err := e.st.VDIClaim(context.Background(), "vm/-/desk-2"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("desk-2's hold after the cancelled shrink: %+v, %v", c, err)
	}
	// A claim gets desk-1, the only member.
	if d, err := e.svc.Claim(context.Background(), alice, "rest", "vm/-/desk"); err != nil || d.ID != "vm/-/desk-1" {
		t.Fatalf("claim after the cancelled shrink: %+v, %v", d, err)
	}
}

// TestShrinkDeleteFails: a member whose VM cannot be deleted stops the
// shrink with the backend's safe message, what the pool keeps, and the
// remedy; the member stays, unheld.
func TestShrinkDeleteFails(t *testing.T) {
	e := newEnv(t, vdi.Options{})
	ctx := context.Background()
	e.pool(t, 2, false)
	e.fail.Set("delete", 0)
	_, err := e.svc.ResizePool(ctx, root, "cli", "vm/-/desk", 1)
	want := "delete desk-2: simulated delete failure; the pool keeps it (0 removed before): resize it again to retry"
	if !errors.Is(err, backends.ErrFailed) || backends.SafeMessage(err) != want {
		t.Fatalf("shrink with a failing delete: %v, want %q", err, want)
	}
	e.fail.Clear("delete")
	if got := e.members(t); !slices.Equal(got, desks(1, 2)) {
		t.Fatalf("members after the failed shrink: %v", got)
	}
	if c, err := e.st.VDIClaim(ctx, "vm/-/desk-2"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("desk-2's hold after the failed shrink: %+v, %v", c, err)
	}
}
