package schedule_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corral-dev/corral/app/schedule"
	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/backends/sim"
)

// TestEnableDisableDelete: a disabled schedule does not fire, and
// re-enabling it does not fire the boundaries it missed; delete removes
// it.
func TestEnableDisableDelete(t *testing.T) {
	e := newEnv(t, schedule.Options{}, sim.New(sim.Options{Context: "lab", Size: 5}))
	sc := e.create(t, schedule.Request{Ref: labRunning, Kind: "power", Action: "stop", Cron: "*/5 * * * *", TZ: "UTC"})
	if _, err := e.svc.SetEnabled(e.ctx, admin, sc.ID, false); err != nil {
		t.Fatal(err)
	}
	if fired := e.tick(t, at(8, 5)); len(fired) != 0 {
		t.Fatalf("a disabled schedule fired: %+v", fired)
	}
	e.clock.Set(at(8, 7))
	if _, err := e.svc.SetEnabled(e.ctx, admin, sc.ID, true); err != nil {
		t.Fatal(err)
	}
	if fired := e.tick(t, at(8, 8)); len(fired) != 0 {
		t.Fatalf("re-enabling fired the 08:05 boundary: %+v", fired)
	}
	if fired := e.tick(t, at(8, 10)); len(fired) != 1 || fired[0].Result != schedule.ResultOK {
		t.Fatalf("the next boundary: %+v", fired)
	}
	if _, err := e.svc.Delete(e.ctx, admin, sc.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Get(e.ctx, sc.ID); !errors.Is(err, backends.ErrNotFound) {
		t.Fatalf("after delete: %v", err)
	}
	if _, err := e.svc.Delete(e.ctx, admin, sc.ID); !errors.Is(err, backends.ErrNotFound) {
		t.Fatalf("second delete: %v", err)
	}
}

// TestTwoTickersFireOnce: two services over one store (corral serve and a
// systemd timer's `corral schedule tick`) ticking at once fire a boundary
// once.
func TestTwoTickersFireOnce(t *testing.T) {
	e := newEnv(t, schedule.Options{}, sim.New(sim.Options{Context: "lab", Size: 5}))
	e.create(t, schedule.Request{Ref: labStopped, Kind: "power", Action: "start", Cron: "0 9 * * *", TZ: "Europe/Berlin"})
	other := schedule.New(e.store, e.fleet, e.tasks, e.fo, e.inst, e.opts)
	e.clock.Set(at(9, 0))
	var wg sync.WaitGroup
	var total atomic.Int64
	for _, s := range []*schedule.Service{e.svc, other} {
		wg.Go(func() {
			fired, err := s.Tick(e.ctx, at(9, 0))
			if err != nil {
				t.Error(err)
			}
			total.Add(int64(len(fired)))
		})
	}
	wg.Wait()
	if total.Load() != 1 {
		t.Fatalf("fired %d times", total.Load())
	}
}

// TestRunLoop: the serve loop waits for the next interval boundary of the
// injected clock, then ticks at the clock's instant.
func TestRunLoop(t *testing.T) {
	waits := make(chan time.Duration)
	fire := make(chan time.Time)
	ticked := make(chan []schedule.Fired)
	e := newEnv(t, schedule.Options{
		After:  func(d time.Duration) <-chan time.Time { waits <- d; return fire },
		OnTick: func(f []schedule.Fired) { ticked <- f },
	}, sim.New(sim.Options{Context: "lab", Size: 5}))
	sc := e.create(t, schedule.Request{Ref: labRunning, Kind: "power", Action: "stop", Cron: "0 9 * * *", TZ: "Europe/Berlin"})
	e.clock.Set(at(8, 59).Add(50 * time.Second))
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan struct{})
	go func() { e.svc.Run(ctx, 30*time.Second); close(done) }()
	if d := <-waits; d != 10*time.Second {
		t.Fatalf("first wait = %v, want 10s to the next :00 or :30", d)
	}
	e.clock.Set(at(9, 0))
	fire <- at(9, 0)
	if fired := <-ticked; len(fired) != 1 || fired[0].ID != sc.ID || fired[0].Result != schedule.ResultOK {
		t.Fatalf("loop tick fired %+v", fired)
	}
	<-waits
	cancel()
	<-done
}
