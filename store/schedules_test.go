package store_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/corral-dev/corral/store"
)

// TestScheduleClaim: a window is claimed once (the compare-and-swap two
// tickers race on), a recorded run with a retry point moves the
// evaluation back, and enabling a disabled schedule skips what passed.
func TestScheduleClaim(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2026, 6, 1, 9, 0, 0, 0, time.UTC)
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "c.db"), store.Options{Now: func() time.Time { return t0 }})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	sc, err := st.CreateSchedule(ctx, store.Schedule{TargetKind: "instance", Target: "sim/lab/-/web", Kind: "power", Action: "stop",
		Cron: "0 9 * * *", TZ: "UTC", Enabled: true, CreatedBy: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	t1 := t0.Add(time.Minute)
	if ok, err := st.ClaimSchedule(ctx, sc.ID, time.Time{}, t1); err != nil || !ok {
		t.Fatalf("first claim = %v, %v", ok, err)
	}
	if ok, _ := st.ClaimSchedule(ctx, sc.ID, time.Time{}, t1); ok {
		t.Fatal("the same window was claimed twice")
	}
	retry := t0.Add(-time.Second)
	if err := st.RecordScheduleRun(ctx, sc.ID, store.ScheduleRun{At: t1, Result: "unreachable", Message: "context x is unreachable", Task: "t1"}, t1, retry); err != nil {
		t.Fatal(err)
	}
	got, err := st.Schedule(ctx, sc.ID)
	if err != nil || !got.EvaluatedAt.Equal(retry) || got.LastResult != "unreachable" || got.LastTask != "t1" || !got.LastRun.Equal(t1) {
		t.Fatalf("after an unreachable run: %+v, %v", got, err)
	}
	// A record for a window another tick has moved past leaves the
	// evaluation alone.
	if ok, _ := st.ClaimSchedule(ctx, sc.ID, retry, t1.Add(time.Minute)); !ok {
		t.Fatal("the retry window could not be claimed")
	}
	st.RecordScheduleRun(ctx, sc.ID, store.ScheduleRun{At: t1, Result: "ok"}, t1, retry)
	if got, _ := st.Schedule(ctx, sc.ID); !got.EvaluatedAt.Equal(t1.Add(time.Minute)) {
		t.Fatalf("a stale record moved the evaluation to %v", got.EvaluatedAt)
	}
	if err := st.SetScheduleEnabled(ctx, sc.ID, false, t1); err != nil {
		t.Fatal(err)
	}
	later := t0.Add(time.Hour)
	if err := st.SetScheduleEnabled(ctx, sc.ID, true, later); err != nil {
		t.Fatal(err)
	}
	if got, _ := st.Schedule(ctx, sc.ID); !got.Enabled || !got.EvaluatedAt.Equal(later) {
		t.Fatalf("after re-enabling: %+v", got)
	}
	if err := st.DeleteSchedule(ctx, sc.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Schedule(ctx, sc.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("after delete: %v", err)
	}
	if err := st.DeleteSchedule(ctx, sc.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("second delete: %v", err)
	}
}
