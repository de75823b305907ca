package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Schedule is a stored power or snapshot schedule. The store takes its
// fields as given: their syntax (cron, zone, target) is the caller's to
// check.
type Schedule struct {
	ID         int64
	TargetKind string // "instance" or "folder"
	Target     string // canonical ref or folder path
	Kind       string // "power" or "snapshot"
	Action     string // start, stop or shutdown for power; "" for snapshot
	Cron       string
	TZ         string // IANA zone name
	Keep       int    // snapshot retention: auto- snapshots kept
	Enabled    bool
	InCluster  bool
	// EvaluatedAt is the instant up to which ticks have evaluated the
	// schedule; zero before the first tick.
	EvaluatedAt time.Time
	LastRun     time.Time // when the last run started; zero if none
	LastResult  string    // ok, skipped, failed, unreachable, missed
	LastMessage string    // safe to show
	LastTask    string
	CreatedBy   string
	CreatedAt   time.Time
}

// ScheduleRun is what a tick records after it ran (or decided not to run)
// a schedule.
type ScheduleRun struct {
	At      time.Time
	Result  string
	Message string
	Task    string
}

const scheduleColumns = `id, target_kind, target, kind, action, cron, tz, keep, enabled, in_cluster,
	evaluated_at, last_run, last_result, last_message, last_task, created_by, created_at`

func scanSchedule(row interface{ Scan(...any) error }) (Schedule, error) {
	var s Schedule
	var eval, last, created string
	err := row.Scan(&s.ID, &s.TargetKind, &s.Target, &s.Kind, &s.Action, &s.Cron, &s.TZ, &s.Keep, &s.Enabled, &s.InCluster,
		&eval, &last, &s.LastResult, &s.LastMessage, &s.LastTask, &s.CreatedBy, &created)
	s.EvaluatedAt, s.LastRun, s.CreatedAt = parseTime(eval), parseTime(last), parseTime(created)
	return s, err
}

// CreateSchedule stores s (its ID, evaluation and last-run fields are
// ignored) and returns it with its new ID and creation time.
func (s *Store) CreateSchedule(ctx context.Context, sc Schedule) (Schedule, error) {
	sc.CreatedAt = s.now().UTC()
	res, err := s.db.ExecContext(ctx, `INSERT INTO schedules (target_kind, target, kind, action, cron, tz, keep, enabled, in_cluster, created_by, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		sc.TargetKind, sc.Target, sc.Kind, sc.Action, sc.Cron, sc.TZ, sc.Keep, sc.Enabled, sc.InCluster, sc.CreatedBy, formatTime(sc.CreatedAt))
	if err != nil {
		return Schedule{}, fmt.Errorf("store: create schedule: %w", err)
	}
	if sc.ID, err = res.LastInsertId(); err != nil {
		return Schedule{}, fmt.Errorf("store: create schedule: %w", err)
	}
	sc.EvaluatedAt, sc.LastRun, sc.LastResult, sc.LastMessage, sc.LastTask = time.Time{}, time.Time{}, "", "", ""
	return sc, nil
}

// Schedules returns every schedule by ID.
func (s *Store) Schedules(ctx context.Context) ([]Schedule, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+scheduleColumns+` FROM schedules ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("store: list schedules: %w", err)
	}
	defer rows.Close()
	out := []Schedule{}
	for rows.Next() {
		sc, err := scanSchedule(rows)
		if err != nil {
			return nil, fmt.Errorf("store: list schedules: %w", err)
		}
		out = append(out, sc)
	}
	return out, rows.Err()
}

// Schedule returns the schedule id, or ErrNotFound.
func (s *Store) Schedule(ctx context.Context, id int64) (Schedule, error) {
	sc, err := scanSchedule(s.db.QueryRowContext(ctx, `SELECT `+scheduleColumns+` FROM schedules WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return Schedule{}, ErrNotFound
	}
	if err != nil {
		return Schedule{}, fmt.Errorf("store: schedule %d: %w", id, err)
	}
	return sc, nil
}

// DeleteSchedule deletes the schedule id, or returns ErrNotFound.
func (s *Store) DeleteSchedule(ctx context.Context, id int64) error {
	res, err := s.db.ExecContext(ctx, `DELETE FROM schedules WHERE id = ?`, id)
	if err != nil {
		return fmt.Errorf("store: delete schedule %d: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return ErrNotFound
	}
	return nil
}

// SetScheduleEnabled enables or disables the schedule id, or returns
// ErrNotFound. Enabling moves its evaluation to at, so the boundaries
// that passed while it was disabled are not fired late.
func (s *Store) SetScheduleEnabled(ctx context.Context, id int64, enabled bool, at time.Time) error {
	q := `UPDATE schedules SET enabled = ? WHERE id = ?`
	args := []any{enabled, id}
	if enabled {
		q = `UPDATE schedules SET enabled = 1, evaluated_at = CASE enabled WHEN 0 THEN ? ELSE evaluated_at END WHERE id = ?`
		args = []any{formatTime(at), id}
	}
	res, err := s.db.ExecContext(ctx, q, args...)
	if err != nil {
		return fmt.Errorf("store: enable schedule %d: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return ErrNotFound
	}
	return nil
}

// ClaimSchedule moves the evaluation of schedule id from from to to if it
// still is at from, and reports whether it did. A tick claims the window
// (from, to] before it fires anything in it, so of two tickers racing
// only one fires a boundary.
func (s *Store) ClaimSchedule(ctx context.Context, id int64, from, to time.Time) (bool, error) {
	res, err := s.db.ExecContext(ctx, `UPDATE schedules SET evaluated_at = ? WHERE id = ? AND evaluated_at = ?`,
		formatTime(to), id, formatTime(from))
	if err != nil {
		return false, fmt.Errorf("store: claim schedule %d: %w", id, err)
	}
	n, _ := res.RowsAffected()
	return n == 1, nil
}

// RecordScheduleRun records the outcome of a run of schedule id. When
// retryFrom is not zero the evaluation moves back to it (if the schedule
// was not evaluated past claimed since), so the next tick sees the
// boundary again: that is how an unreachable context is retried.
func (s *Store) RecordScheduleRun(ctx context.Context, id int64, run ScheduleRun, claimed, retryFrom time.Time) error {
	eval := formatTime(claimed)
	if !retryFrom.IsZero() {
		eval = formatTime(retryFrom)
	}
	_, err := s.db.ExecContext(ctx, `UPDATE schedules SET last_run = ?, last_result = ?, last_message = ?, last_task = ?,
		evaluated_at = CASE evaluated_at WHEN ? THEN ? ELSE evaluated_at END WHERE id = ?`,
		formatTime(run.At), run.Result, run.Message, run.Task, formatTime(claimed), eval, id)
	if err != nil {
		return fmt.Errorf("store: record schedule %d: %w", id, err)
	}
	return nil
}
