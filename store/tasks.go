package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// TaskStatus is the life-cycle state of a task.
type TaskStatus string

// The task states. A task that was running when the server stopped is
// marked interrupted at the next start.
const (
	TaskRunning     TaskStatus = "running"
	TaskDone        TaskStatus = "done"
	TaskError       TaskStatus = "error"
	TaskInterrupted TaskStatus = "interrupted"
)

// Task is one persisted operation.
type Task struct {
	ID         string
	Action     string
	Target     string
	Actor      string
	Surface    string
	Status     TaskStatus
	Progress   int
	Error      string
	CreatedAt  time.Time
	FinishedAt time.Time
}

// LogLine is one line of a task's log.
type LogLine struct {
	At   time.Time
	Line string
}

// CreateTask inserts t with status running.
func (s *Store) CreateTask(ctx context.Context, t Task) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO tasks (id, action, target, actor, surface, status, progress, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		t.ID, t.Action, t.Target, t.Actor, t.Surface, TaskRunning, t.Progress, formatTime(t.CreatedAt))
	if err != nil {
		return fmt.Errorf("store: create task: %w", err)
	}
	return nil
}

// SetTaskProgress records a running task's progress in percent.
func (s *Store) SetTaskProgress(ctx context.Context, id string, pct int) error {
	_, err := s.db.ExecContext(ctx, `UPDATE tasks SET progress = ? WHERE id = ? AND status = 'running'`, pct, id)
	if err != nil {
		return fmt.Errorf("store: task progress: %w", err)
	}
	return nil
}

// FinishTask records the end of a task: done when errMsg is empty, error
// otherwise.
func (s *Store) FinishTask(ctx context.Context, id string, status TaskStatus, errMsg string, at time.Time) error {
	progress := 100
	if status != TaskDone {
		progress = -1 // keep what it reached
	}
	_, err := s.db.ExecContext(ctx, `UPDATE tasks SET status = ?, error = ?, finished_at = ?,
		progress = CASE WHEN ? >= 0 THEN ? ELSE progress END WHERE id = ?`,
		status, errMsg, formatTime(at), progress, progress, id)
	if err != nil {
		return fmt.Errorf("store: finish task: %w", err)
	}
	return nil
}

// AppendTaskLog adds a line to a task's log.
func (s *Store) AppendTaskLog(ctx context.Context, id string, at time.Time, line string) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO task_log (task_id, seq, at, line)
		VALUES (?, (SELECT COALESCE(MAX(seq), 0) + 1 FROM task_log WHERE task_id = ?), ?, ?)`,
		id, id, formatTime(at), line)
	if err != nil {
		return fmt.Errorf("store: task log: %w", err)
	}
	return nil
}

// Task returns one task, or ErrNotFound.
func (s *Store) Task(ctx context.Context, id string) (Task, error) {
	row := s.db.QueryRowContext(ctx, `SELECT `+taskColumns+` FROM tasks WHERE id = ?`, id)
	t, err := scanTask(row)
	if errors.Is(err, sql.ErrNoRows) {
		return Task{}, ErrNotFound
	}
	return t, err
}

// TaskLog returns the log lines of a task in order.
func (s *Store) TaskLog(ctx context.Context, id string) ([]LogLine, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT at, line FROM task_log WHERE task_id = ? ORDER BY seq`, id)
	if err != nil {
		return nil, fmt.Errorf("store: task log: %w", err)
	}
	defer rows.Close()
	var out []LogLine
	for rows.Next() {
		var at string
		var l LogLine
		if err := rows.Scan(&at, &l.Line); err != nil {
			return nil, fmt.Errorf("store: task log: %w", err)
		}
		l.At = parseTime(at)
		out = append(out, l)
	}
	return out, rows.Err()
}

// RecentTasks returns up to limit tasks, newest first.
func (s *Store) RecentTasks(ctx context.Context, limit int) ([]Task, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+taskColumns+` FROM tasks ORDER BY created_at DESC, id DESC LIMIT ?`, limit)
	if err != nil {
		return nil, fmt.Errorf("store: recent tasks: %w", err)
	}
	defer rows.Close()
	var out []Task
	for rows.Next() {
		t, err := scanTask(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// InterruptRunningTasks marks every running task interrupted and returns
// their ids. It is called once at start: nothing can still be running then.
func (s *Store) InterruptRunningTasks(ctx context.Context, at time.Time) ([]string, error) {
	rows, err := s.db.QueryContext(ctx, `UPDATE tasks SET status = 'interrupted', finished_at = ?,
		error = 'the server stopped while the task ran' WHERE status = 'running' RETURNING id`, formatTime(at))
	if err != nil {
		return nil, fmt.Errorf("store: interrupt tasks: %w", err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("store: interrupt tasks: %w", err)
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

const taskColumns = `id, action, target, actor, surface, status, progress, error, created_at, finished_at`

func scanTask(row interface{ Scan(...any) error }) (Task, error) {
	var t Task
	var created, finished string
	err := row.Scan(&t.ID, &t.Action, &t.Target, &t.Actor, &t.Surface, &t.Status, &t.Progress, &t.Error, &created, &finished)
	if err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return Task{}, err
		}
		return Task{}, fmt.Errorf("store: scan task: %w", err)
	}
	t.CreatedAt, t.FinishedAt = parseTime(created), parseTime(finished)
	return t, nil
}
