package api_test

import (
	"fmt"
	"testing"
)

// BenchmarkScheduleList is GET /api/schedules over 500 schedules in two
// zones: every row's times are shown in its zone, which the schedule
// service resolves from its cache (figures in docs/performance.md).
func BenchmarkScheduleList(b *testing.B) {
	h, _ := scheduleServer(b)
	const n = 500
	for i := range n {
		tz := []string{"Europe/Berlin", "America/New_York"}[i%2]
		body := fmt.Sprintf(`{"ref":"web-lab-0000","kind":"power","action":"stop","cron":"%d 18 * * 1-5","tz":%q}`, i%60, tz)
		if code := callAs(b, h, "alice@example", "POST", "/api/schedules", body, nil); code != 201 {
			b.Fatalf("create %d = %d", i, code)
		}
	}
	for b.Loop() {
		var list []scheduleOut
		if code := callAs(b, h, "bob@example", "GET", "/api/schedules", "", &list); code != 200 || len(list) != n {
			b.Fatalf("list = %d, %d rows", code, len(list))
		}
	}
}
