package schedule_test

import (
	"testing"

	"github.com/corral-dev/corral/app/schedule"
	"github.com/corral-dev/corral/backends/sim"
)

// TestListZones: List and Get answer each schedule with its zone, one
// location per zone name (the service's cache, not a load per row), so
// pages and the API show times in it.
func TestListZones(t *testing.T) {
	e := newEnv(t, schedule.Options{}, sim.New(sim.Options{Context: "lab", Size: 5}))
	for _, tz := range []string{"Europe/Berlin", "UTC", "Europe/Berlin"} {
		e.create(t, schedule.Request{Ref: labRunning, Kind: "power", Action: "stop", Cron: "0 9 * * *", TZ: tz})
	}
	list, err := e.svc.List(e.ctx)
	if err != nil || len(list) != 3 {
		t.Fatalf("List = %d, %v", len(list), err)
	}
	for _, sc := range list {
		if sc.Loc == nil || sc.Loc.String() != sc.TZ {
			t.Errorf("schedule %d (%s): Loc %v", sc.ID, sc.TZ, sc.Loc)
		}
	}
	if list[0].Loc != list[2].Loc {
		t.Errorf("two schedules in Europe/Berlin got two locations: the zone was loaded again")
	}
	one, err := e.svc.Get(e.ctx, list[1].ID)
	if err != nil || one.Loc == nil || one.Loc.String() != "UTC" {
		t.Fatalf("Get = %+v, %v; want its zone UTC", one.Loc, err)
	}
}
