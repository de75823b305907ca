package schedule

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/corral-dev/corral/backends"
)

func TestParseCronAccepts(t *testing.T) {
	for _, expr := range []string{
		"* * * * *",
		"0 9 * * 1-5",
		"*/15 * * * *",
		"0 8-18/2 * * *",
		"0,30 9,17 1,15 1-12 0-6",
		"59 23 31 12 6",
		"0 0 1-31/2 * 1",
		"*/5 */2 */3 */4 *",
		"  0   9 * *  1 ",
	} {
		t.Run(expr, func(t *testing.T) {
			if _, err := ParseCron(expr); err != nil {
				t.Fatalf("ParseCron(%q) = %v", expr, err)
			}
		})
	}
}

func TestParseCronRefuses(t *testing.T) {
	for _, tc := range []struct{ name, expr, want string }{
		{"empty", "", "is required"},
		{"daily", "@daily", "descriptors"},
		{"every", "@every 5m", "descriptors"},
		{"cron_tz", "CRON_TZ=Europe/Berlin 0 9 * * *", "CRON_TZ"},
		{"tz", "TZ=UTC 0 9 * * *", "CRON_TZ= or TZ="},
		{"seconds", "0 0 9 * * *", "seconds field"},
		{"four fields", "0 9 * *", "4 fields"},
		{"day name", "0 9 * * MON", "day-of-week field \"MON\": names are not accepted"},
		{"month name", "0 9 * JAN *", "month field \"JAN\": names are not accepted"},
		{"question", "0 9 ? * 1", "day-of-month field \"?\""},
		{"last", "0 9 L * *", "day-of-month field \"L\""},
		{"weekday", "0 9 15W * *", "\"W\" is not accepted"},
		{"hash", "0 9 * * 1#2", "\"#\" is not accepted"},
		{"minute 60", "60 * * * *", "minute field \"60\": 60 is out of range: accepted are 0-59"},
		{"hour 24", "0 24 * * *", "hour field \"24\": 24 is out of range: accepted are 0-23"},
		{"dom 0", "0 0 0 * *", "day-of-month field \"0\": 0 is out of range: accepted are 1-31"},
		{"month 13", "0 0 1 13 *", "month field \"13\": 13 is out of range"},
		{"dow 7", "0 0 * * 7", "day-of-week field \"7\": 7 is out of range: accepted are 0-6 (0 is Sunday"},
		{"backwards", "0 18-8 * * *", "runs backwards"},
		{"step zero", "*/0 * * * *", "step \"0\""},
		{"n/step", "5/10 * * * *", "n/step is not accepted"},
		{"empty item", "0,,5 * * * *", "empty list item"},
		{"negative", "-5 * * * *", "not a number"},
		{"dom step beside dow", "0 0 */2 * 1", "spell the range out"},
		{"dow step beside dom", "0 0 1 * */2", "spell the range out"},
		{"never", "0 0 30 2 *", "never fires"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseCron(tc.expr)
			if err == nil {
				t.Fatalf("ParseCron(%q) accepted", tc.expr)
			}
			if !errors.Is(err, backends.ErrInvalid) {
				t.Errorf("ParseCron(%q) = %v, not Invalid (a 400)", tc.expr, err)
			}
			if msg := backends.SafeMessage(err); !strings.Contains(msg, tc.want) {
				t.Errorf("ParseCron(%q) = %q, want it to contain %q", tc.expr, msg, tc.want)
			}
		})
	}
}

// activations returns the first n activations of expr after from.
func activations(t *testing.T, expr string, from time.Time, n int) []string {
	t.Helper()
	c, err := ParseCron(expr)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for x := from; len(out) < n; {
		x = c.Next(x)
		out = append(out, x.Format("2006-01-02 Mon 15:04 MST"))
	}
	return out
}

func equal(t *testing.T, what string, got, want []string) {
	t.Helper()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("%s:\n got %q\nwant %q", what, got, want)
	}
}

// TestDayFieldsOR: when both day-of-month and day-of-week are restricted
// a day matching either fires (cron(8)); when one is *, only the other
// restricts.
func TestDayFieldsOR(t *testing.T) {
	from := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC) // a Monday
	// The 15th or any Sunday.
	equal(t, "15th or Sunday", activations(t, "0 9 15 * 0", from, 4), []string{
		"2026-06-07 Sun 09:00 UTC", "2026-06-14 Sun 09:00 UTC", "2026-06-15 Mon 09:00 UTC", "2026-06-21 Sun 09:00 UTC",
	})
	// Only Sundays: the day of the month is *.
	equal(t, "Sundays", activations(t, "0 9 * * 0", from, 2), []string{"2026-06-07 Sun 09:00 UTC", "2026-06-14 Sun 09:00 UTC"})
	// Only the 15th: the day of the week is *.
	equal(t, "15th", activations(t, "0 9 15 * *", from, 2), []string{"2026-06-15 Mon 09:00 UTC", "2026-07-15 Wed 09:00 UTC"})
	// The spelled-out step is restricted in cron(8) and in Kubernetes
	// alike: odd days or Mondays.
	equal(t, "odd days or Monday", activations(t, "0 0 1-31/2 * 1", from, 4), []string{
		"2026-06-03 Wed 00:00 UTC", "2026-06-05 Fri 00:00 UTC", "2026-06-07 Sun 00:00 UTC", "2026-06-08 Mon 00:00 UTC",
	})
}

// TestDST pins what a schedule does across Europe/Berlin's transitions,
// which is what robfig/cron (and so the Kubernetes CronJob controller)
// does: at spring-forward a wall-clock time that does not exist (02:30
// on 2026-03-29) does not fire that day; at fall-back a wall-clock time
// that happens twice (02:30 on 2026-10-25) fires twice, once per offset.
// The tick and the in-cluster path therefore agree.
func TestDST(t *testing.T) {
	berlin, err := LoadZone("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	equal(t, "spring forward", activations(t, "30 2 * * *", time.Date(2026, 3, 28, 12, 0, 0, 0, berlin), 2), []string{
		"2026-03-30 Mon 02:30 CEST", "2026-03-31 Tue 02:30 CEST",
	})
	equal(t, "fall back", activations(t, "30 2 * * *", time.Date(2026, 10, 24, 12, 0, 0, 0, berlin), 3), []string{
		"2026-10-25 Sun 02:30 CEST", "2026-10-25 Sun 02:30 CET", "2026-10-26 Mon 02:30 CET",
	})
	// A time outside the transition is unaffected: 09:00 stays 09:00
	// local, which is 08:00 UTC in winter and 07:00 UTC in summer.
	c, _ := ParseCron("0 9 * * *")
	if got := c.Next(time.Date(2026, 3, 29, 0, 0, 0, 0, berlin)).UTC().Hour(); got != 7 {
		t.Errorf("09:00 Berlin after spring-forward = %02d:00 UTC, want 07:00", got)
	}
	if got := c.Next(time.Date(2026, 3, 28, 0, 0, 0, 0, berlin)).UTC().Hour(); got != 8 {
		t.Errorf("09:00 Berlin before spring-forward = %02d:00 UTC, want 08:00", got)
	}
}

func TestLoadZone(t *testing.T) {
	for _, ok := range []string{"UTC", "Europe/Berlin", "America/New_York"} {
		if _, err := LoadZone(ok); err != nil {
			t.Errorf("LoadZone(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"", "Local", "Mars/Olympus", "CEST+2"} {
		_, err := LoadZone(bad)
		if !errors.Is(err, backends.ErrInvalid) || !strings.Contains(backends.SafeMessage(err), "IANA") {
			t.Errorf("LoadZone(%q) = %v, want an Invalid error naming IANA names", bad, err)
		}
	}
}
