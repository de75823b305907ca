package schedule_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/corral-dev/corral/app/schedule"
	"github.com/corral-dev/corral/backends/sim"
)

// BenchmarkTickIdle is one tick over 1,000 schedules none of which is
// due: the cost `corral serve` pays every 30 s (a read of the table and
// one compare-and-swap per schedule).
func BenchmarkTickIdle(b *testing.B) {
	e := newEnv(b, schedule.Options{}, sim.New(sim.Options{Context: "lab", Size: 1000}))
	for i := range 1000 {
		ref := fmt.Sprintf("sim/lab/-/%s", e.fleet.Snapshot().Instances[i].Ref.Name)
		if _, _, err := e.svc.Create(e.ctx, admin, schedule.Request{Ref: ref, Kind: "power", Action: "stop", Cron: "0 9 * * *", TZ: "Europe/Berlin"}); err != nil {
			b.Fatal(err)
		}
	}
	now := at(12, 0)
	if _, err := e.svc.Tick(e.ctx, now); err != nil { // records the 09:00 boundaries as missed
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		now = now.Add(time.Second)
		fired, err := e.svc.Tick(e.ctx, now)
		if err != nil || len(fired) != 0 {
			b.Fatalf("an idle tick fired %d schedules: %v", len(fired), err)
		}
	}
}
