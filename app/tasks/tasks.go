// Package tasks runs every mutation as a task: persisted with progress and
// a log, reported live to subscribers, marked interrupted if the server
// stops under it, and closed by exactly one audit row that names who did
// what to which target with which outcome.
package tasks

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/corral-dev/corral/app/broadcast"
	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/store"
)

// Store is the slice of the store the manager uses.
type Store interface {
	CreateTask(ctx context.Context, t store.Task) error
	SetTaskProgress(ctx context.Context, id string, pct int) error
	FinishTask(ctx context.Context, id string, status store.TaskStatus, errMsg string, at time.Time) error
	AppendTaskLog(ctx context.Context, id string, at time.Time, line string) error
	Task(ctx context.Context, id string) (store.Task, error)
	TaskLog(ctx context.Context, id string) ([]store.LogLine, error)
	RecentTasks(ctx context.Context, limit int) ([]store.Task, error)
	InterruptRunningTasks(ctx context.Context, at time.Time) ([]string, error)
	AppendAudit(ctx context.Context, e store.AuditEntry) (store.AuditEntry, error)
	ListAudit(ctx context.Context, f store.AuditFilter) ([]store.AuditEntry, error)
}

// Origin says who asked for a task and through which surface.
type Origin struct {
	Actor   string // a login, "anonymous", or a service identity
	Surface string // dashboard, rest, pve, console, cli, schedule
}

// Spec names a task.
type Spec struct {
	Action string // e.g. "start", "create", "delete"
	Target string // canonical ref, or another target's name
	Origin
}

// Outcomes written to the audit log.
const (
	OutcomeOK          = "ok"
	OutcomeError       = "error"
	OutcomeRefused     = "refused" // invalid input or a backend refusal
	OutcomeInterrupted = "interrupted"
)

// Run is the handle a task's function reports through.
type Run struct {
	m  *Manager
	id string
}

// ID returns the task's id.
func (r *Run) ID() string { return r.id }

// Logf appends a line to the task's log. Lines are shown to users, so they
// must not carry backend error text.
func (r *Run) Logf(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	if err := r.m.store.AppendTaskLog(context.Background(), r.id, r.m.now(), line); err != nil {
		r.m.log.Error("tasks: log line lost", "task", r.id, "err", err)
	}
	r.m.notify()
}

// Progress records progress in percent (0-100).
func (r *Run) Progress(pct int) {
	pct = max(0, min(pct, 100))
	if err := r.m.store.SetTaskProgress(context.Background(), r.id, pct); err != nil {
		r.m.log.Error("tasks: progress lost", "task", r.id, "err", err)
	}
	r.m.notify()
}

// Options configure a Manager.
type Options struct {
	Now    func() time.Time
	NewID  func() string
	Logger *slog.Logger
	// Timeout bounds one asynchronous task; default 30 min.
	Timeout time.Duration
}

// Manager starts and records tasks. It is safe for concurrent use.
type Manager struct {
	store   Store
	now     func() time.Time
	newID   func() string
	log     *slog.Logger
	timeout time.Duration

	base   context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	hub broadcast.Hub
}

// New returns a manager. Call Recover once at start and Close at stop.
func New(s Store, opts Options) *Manager {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.NewID == nil {
		opts.NewID = func() string { return newID(opts.Now()) }
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Timeout == 0 {
		opts.Timeout = 30 * time.Minute
	}
	base, cancel := context.WithCancel(context.Background())
	return &Manager{store: s, now: opts.Now, newID: opts.NewID, log: opts.Logger, timeout: opts.Timeout,
		base: base, cancel: cancel}
}

func newID(now time.Time) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return now.UTC().Format("20060102T150405") + "-" + hex.EncodeToString(b[:])
}

// Recover marks every task left running by a previous server interrupted
// and audits each. Nothing can be running at start.
func (m *Manager) Recover(ctx context.Context) ([]string, error) {
	ids, err := m.store.InterruptRunningTasks(ctx, m.now())
	if err != nil {
		return nil, err
	}
	for _, id := range ids {
		t, err := m.store.Task(ctx, id)
		if err != nil {
			return ids, err
		}
		m.audit(ctx, Spec{Action: t.Action, Target: t.Target, Origin: Origin{Actor: t.Actor, Surface: t.Surface}}, OutcomeInterrupted, "the server stopped while the task ran; task "+id)
	}
	return ids, nil
}

// Close cancels running tasks and waits for them to record their end.
func (m *Manager) Close() {
	m.cancel()
	m.wg.Wait()
}

// Start creates a task and runs fn in the background. It returns once the
// task is persisted; ctx only bounds that.
func (m *Manager) Start(ctx context.Context, spec Spec, fn func(context.Context, *Run) error) (store.Task, error) {
	t, err := m.create(ctx, spec)
	if err != nil {
		return store.Task{}, err
	}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		tctx, cancel := context.WithTimeout(m.base, m.timeout)
		defer cancel()
		m.run(tctx, spec, t.ID, fn)
	}()
	return t, nil
}

// Do creates a task, runs fn, and returns the finished task and fn's
// error. The caller's ctx bounds fn.
func (m *Manager) Do(ctx context.Context, spec Spec, fn func(context.Context, *Run) error) (store.Task, error) {
	t, err := m.create(ctx, spec)
	if err != nil {
		return store.Task{}, err
	}
	runErr := m.run(ctx, spec, t.ID, fn)
	done, err := m.store.Task(context.WithoutCancel(ctx), t.ID)
	if err != nil {
		return t, errors.Join(runErr, err)
	}
	return done, runErr
}

func (m *Manager) create(ctx context.Context, spec Spec) (store.Task, error) {
	t := store.Task{ID: m.newID(), Action: spec.Action, Target: spec.Target, Actor: spec.Actor, Surface: spec.Surface,
		Status: store.TaskRunning, CreatedAt: m.now()}
	if err := m.store.CreateTask(ctx, t); err != nil {
		return store.Task{}, fmt.Errorf("tasks: %w", err)
	}
	m.notify()
	return t, nil
}

func (m *Manager) run(ctx context.Context, spec Spec, id string, fn func(context.Context, *Run) error) (err error) {
	r := &Run{m: m, id: id}
	defer func() {
		if p := recover(); p != nil {
			m.log.Error("tasks: task panicked", "task", id, "panic", p)
			err = fmt.Errorf("tasks: task %s panicked: %v", id, p)
		}
		m.finish(spec, id, err)
	}()
	return fn(ctx, r)
}

func (m *Manager) finish(spec Spec, id string, err error) {
	ctx := context.Background()
	status, outcome, msg := store.TaskDone, OutcomeOK, ""
	if err != nil {
		status, outcome = store.TaskError, OutcomeError
		if errors.Is(err, backends.ErrInvalid) || errors.Is(err, backends.ErrUnsupported) || errors.Is(err, backends.ErrConflict) {
			outcome = OutcomeRefused
		}
		msg = backends.SafeMessage(err)
		if msg == "" {
			msg = "the operation failed; the server log has the cause (task " + id + ")"
		}
		m.log.Warn("tasks: task failed", "task", id, "action", spec.Action, "target", spec.Target, "err", err)
	}
	if e := m.store.FinishTask(ctx, id, status, msg, m.now()); e != nil {
		m.log.Error("tasks: could not record the end of a task", "task", id, "err", e)
	}
	detail := "task " + id
	if msg != "" {
		detail += ": " + msg
	}
	m.audit(ctx, spec, outcome, detail)
	m.notify()
}

func (m *Manager) audit(ctx context.Context, spec Spec, outcome, detail string) {
	_, err := m.store.AppendAudit(ctx, store.AuditEntry{At: m.now(), Actor: spec.Actor, Surface: spec.Surface,
		Action: spec.Action, Target: spec.Target, Outcome: outcome, Detail: detail})
	if err != nil {
		m.log.Error("tasks: audit row lost", "action", spec.Action, "target", spec.Target, "err", err)
	}
}

// Refused audits a mutation that was refused before any task started
// (bad input, a name that resolves to nothing) and returns err unchanged,
// so refusals are in the audit log like everything else.
func (m *Manager) Refused(ctx context.Context, spec Spec, err error) error {
	outcome := OutcomeRefused
	if !errors.Is(err, backends.ErrInvalid) && !errors.Is(err, backends.ErrUnsupported) && !errors.Is(err, backends.ErrNotFound) && !errors.Is(err, backends.ErrConflict) && !errors.Is(err, backends.ErrForbidden) {
		outcome = OutcomeError
	}
	msg := backends.SafeMessage(err)
	if msg == "" {
		msg = "internal error"
	}
	m.audit(context.WithoutCancel(ctx), spec, outcome, msg)
	return err
}

// Get returns a task and its log, or an error wrapping store.ErrNotFound.
func (m *Manager) Get(ctx context.Context, id string) (store.Task, []store.LogLine, error) {
	t, err := m.store.Task(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return store.Task{}, nil, backends.NotFoundf("task %s does not exist", id)
	}
	if err != nil {
		return store.Task{}, nil, err
	}
	lines, err := m.store.TaskLog(ctx, id)
	return t, lines, err
}

// Recent returns up to limit tasks, newest first.
func (m *Manager) Recent(ctx context.Context, limit int) ([]store.Task, error) {
	return m.store.RecentTasks(ctx, limit)
}

// Audit returns audit entries, newest first.
func (m *Manager) Audit(ctx context.Context, f store.AuditFilter) ([]store.AuditEntry, error) {
	return m.store.ListAudit(ctx, f)
}

// Subscribe returns a channel that receives a value after each change
// (coalesced) and a function that ends the subscription.
func (m *Manager) Subscribe() (<-chan struct{}, func()) { return m.hub.Subscribe() }

func (m *Manager) notify() { m.hub.Notify() }
