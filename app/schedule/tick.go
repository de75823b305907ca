package schedule

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/corral-dev/corral/app/folders"
	"github.com/corral-dev/corral/app/instances"
	"github.com/corral-dev/corral/app/snapshot"
	"github.com/corral-dev/corral/app/tasks"
	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/store"
)

// Fired is what a tick did with one schedule that had a boundary due.
type Fired struct {
	ID      int64
	Target  string
	Due     time.Time // the boundary, in the schedule's zone
	Result  string    // one of the Result* values
	Message string
	Task    string // the run's task; "" for a missed boundary
}

// Tick evaluates every enabled local schedule over the window from its
// last evaluation to now, and runs those with a boundary due, at most
// Options.Concurrency at once, each bounded by Options.DispatchTimeout.
//
// The missed-window policy: a schedule fires at most once per tick, for
// the latest boundary in (last evaluation, now] that is within the grace
// window (now-Grace, now]. Boundaries older than that are recorded as
// missed and never run late, so a restart, a suspended laptop or a
// stopped timer neither double-fires nor replays a backlog. The window is
// claimed in the store before anything runs, so two tickers (corral
// serve and `corral schedule tick`) never fire the same boundary twice.
//
// A run whose context could not be reached records "unreachable" and
// moves the evaluation back to just before its boundary, so the next tick
// runs it again while it is within the grace window; the schedule is
// never deleted and the other schedules run regardless.
//
// Tick returns the schedules it fired or recorded as missed, by ID. Its
// error is only the store's (the list could not be read).
func (s *Service) Tick(ctx context.Context, now time.Time) ([]Fired, error) {
	list, err := s.store.Schedules(ctx)
	if err != nil {
		return nil, err
	}
	type job struct {
		sc  store.Schedule
		due time.Time
	}
	var jobs []job
	var out []Fired
	for _, sc := range list {
		if !sc.Enabled || sc.InCluster {
			continue
		}
		from := sc.EvaluatedAt
		if from.IsZero() {
			from = sc.CreatedAt
		}
		if !now.After(from) {
			continue
		}
		c, err := ParseCron(sc.Cron)
		var loc *time.Location
		if err == nil {
			loc, err = s.zone(sc.TZ)
		}
		if err != nil {
			// Validated at create; a zone removed from the host's tzdata
			// ends here. Recorded, never deleted.
			s.log.Warn("schedule: cannot evaluate", "id", sc.ID, "err", err)
			s.record(ctx, sc.ID, store.ScheduleRun{At: now, Result: ResultFailed, Message: backends.SafeMessage(err)}, sc.EvaluatedAt, time.Time{})
			continue
		}
		latest, missed := dueIn(c, loc, from, now, s.opts.Grace)
		if latest.IsZero() && missed.IsZero() {
			// Nothing in the window: leaving the evaluation where it is
			// changes nothing (the next window starts there and holds no
			// boundary before now) and saves a write per schedule per tick.
			continue
		}
		ok, err := s.store.ClaimSchedule(ctx, sc.ID, sc.EvaluatedAt, now)
		if err != nil {
			s.log.Error("schedule: claim failed", "id", sc.ID, "err", err)
			continue
		}
		if !ok {
			continue // another ticker evaluated it meanwhile
		}
		switch {
		case !latest.IsZero():
			jobs = append(jobs, job{sc, latest})
		case !missed.IsZero():
			f := Fired{ID: sc.ID, Target: Target(sc), Due: missed, Result: ResultMissed,
				Message: fmt.Sprintf("the boundary of %s passed more than %v before a tick saw it: not run late", missed.Format("2006-01-02 15:04 MST"), s.opts.Grace)}
			s.record(ctx, sc.ID, store.ScheduleRun{At: now, Result: f.Result, Message: f.Message}, now, time.Time{})
			out = append(out, f)
		}
	}
	fired := make([]Fired, len(jobs))
	sem := make(chan struct{}, s.opts.Concurrency)
	var wg sync.WaitGroup
	for i, j := range jobs {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			fired[i] = s.run(ctx, j.sc, j.due, now)
		})
	}
	wg.Wait()
	out = append(out, fired...)
	slices.SortFunc(out, func(a, b Fired) int { return int(a.ID - b.ID) })
	return out, nil
}

// dueIn returns the latest boundary in (max(from, now-grace), now], and
// the first boundary in (from, now-grace] (a missed one), each zero when
// there is none.
func dueIn(c Cron, loc *time.Location, from, now time.Time, grace time.Duration) (latest, missed time.Time) {
	start := from
	if cutoff := now.Add(-grace); from.Before(cutoff) {
		if n := c.Next(from.In(loc)); !n.IsZero() && !n.After(cutoff) {
			missed = n
		}
		start = cutoff
	}
	for t := c.Next(start.In(loc)); !t.IsZero() && !t.After(now); t = c.Next(t) {
		latest = t
	}
	return latest, missed
}

func (s *Service) record(ctx context.Context, id int64, run store.ScheduleRun, claimed, retryFrom time.Time) {
	if err := s.store.RecordScheduleRun(context.WithoutCancel(ctx), id, run, claimed, retryFrom); err != nil {
		s.log.Error("schedule: run not recorded", "id", id, "err", err)
	}
}

// memberResult is what a run did to one instance.
type memberResult struct {
	ref, outcome, message string
	err                   error
}

// run runs sc for its boundary due as a task and records the result. now
// is the instant the tick claimed.
func (s *Service) run(ctx context.Context, sc store.Schedule, due, now time.Time) Fired {
	ctx, cancel := context.WithTimeout(ctx, s.opts.DispatchTimeout)
	defer cancel()
	o := tasks.Origin{Actor: "schedule " + strconv.FormatInt(sc.ID, 10), Surface: "schedule"}
	spec := tasks.Spec{Action: "schedule " + describe(sc), Target: Target(sc), Origin: o}
	f := Fired{ID: sc.ID, Target: Target(sc), Due: due}
	t, err := s.tasks.Do(ctx, spec, func(ctx context.Context, r *tasks.Run) error {
		r.Logf("boundary %s of %q (%s), created by %s", due.Format("2006-01-02 15:04 MST"), sc.Cron, sc.TZ, sc.CreatedBy)
		var results []memberResult
		if sc.Kind == KindSnapshot {
			results = s.snapshotRun(ctx, o, sc, due)
		} else {
			results = s.powerRun(ctx, o, sc)
		}
		for _, m := range results {
			r.Logf("%s: %s %s", m.ref, m.outcome, m.message)
		}
		var err error
		f.Result, f.Message, err = summarize(results)
		return err
	})
	f.Task = t.ID
	if f.Result == "" { // the task could not be recorded
		f.Result, f.Message = ResultFailed, "the run could not be recorded; the server log has the cause"
		s.log.Error("schedule: run not started", "id", sc.ID, "err", err)
	}
	var retry time.Time
	if f.Result == ResultUnreachable {
		retry = due.Add(-time.Second) // the next tick sees this boundary again
	}
	s.record(ctx, sc.ID, store.ScheduleRun{At: now, Result: f.Result, Message: f.Message, Task: t.ID}, now, retry)
	return f
}

// powerRun runs the folders use case's bulk action on the schedule's
// instance or folder: each member is a task of its own, a member already
// in the state asked for is skipped.
func (s *Service) powerRun(ctx context.Context, o tasks.Origin, sc store.Schedule) []memberResult {
	sel := folders.Selection{Refs: []string{sc.Target}}
	if sc.TargetKind == TargetFolder {
		sel = folders.Selection{Path: sc.Target}
	}
	_, results, err := s.folders.Action(ctx, o, sel, sc.Action)
	if err != nil {
		return []memberResult{classify(ctx, sc.Target, err, "")}
	}
	out := make([]memberResult, 0, len(results))
	for _, res := range results {
		m := memberResult{ref: res.Ref, outcome: res.Outcome, message: res.Message}
		if res.Outcome == folders.OutcomeFailed {
			m = classify(ctx, res.Ref, res.Err, res.Message)
		}
		out = append(out, m)
	}
	return out
}

// snapshotRun takes the auto- snapshot of the boundary on every member
// and prunes each to the schedule's retention. The name comes from the
// boundary, so a retried run finds the snapshot it already took and
// skips it instead of taking a second.
func (s *Service) snapshotRun(ctx context.Context, o tasks.Origin, sc store.Schedule, due time.Time) []memberResult {
	refs := []string{sc.Target}
	if sc.TargetKind == TargetFolder {
		var err error
		if refs, err = s.folders.MemberRefs(ctx, sc.Target); err != nil {
			return []memberResult{{ref: sc.Target, outcome: folders.OutcomeFailed, message: "the folder's members could not be read", err: err}}
		}
	}
	name := snapshot.AutoPrefix + due.UTC().Format("20060102-1504")
	out := make([]memberResult, len(refs))
	sem := make(chan struct{}, s.opts.SnapshotConcurrency)
	var wg sync.WaitGroup
	for i, ref := range refs {
		wg.Go(func() {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				out[i] = classify(ctx, ref, ctx.Err(), "not started: the run ran out of time")
				return
			}
			defer func() { <-sem }()
			out[i] = s.snapshotMember(ctx, o, sc, ref, name)
		})
	}
	wg.Wait()
	return out
}

func (s *Service) snapshotMember(ctx context.Context, o tasks.Origin, sc store.Schedule, ref, name string) memberResult {
	m := memberResult{ref: ref, outcome: folders.OutcomeOK, message: "took " + name}
	_, err := s.instances.Snapshot(ctx, o, ref, instances.SnapshotCreate, name)
	switch {
	case errors.Is(err, backends.ErrConflict):
		m.outcome, m.message = folders.OutcomeSkipped, name+" exists already"
	case err != nil:
		return classify(ctx, ref, err, "")
	}
	_, deleted, err := s.instances.PruneSnapshots(ctx, o, ref, sc.Keep)
	if err != nil {
		r := classify(ctx, ref, err, "")
		r.message = "snapshot taken, pruning failed: " + r.message
		return r
	}
	if len(deleted) > 0 {
		m.message += "; pruned " + strings.Join(deleted, ", ")
	}
	return m
}

// classify turns a member's error into its result: a context that did not
// answer is unreachable (retried), a Conflict on a power action is the
// instance already being in that state (skipped), anything else failed.
func classify(ctx context.Context, ref string, err error, msg string) memberResult {
	if msg == "" {
		msg = backends.SafeMessage(err)
	}
	if msg == "" {
		msg = "the operation failed; the server log has the cause"
	}
	m := memberResult{ref: ref, outcome: folders.OutcomeFailed, message: msg, err: err}
	switch {
	case errors.Is(err, backends.ErrUnavailable), errors.Is(err, backends.ErrTimeout),
		err == nil && ctx.Err() != nil, errors.Is(err, context.DeadlineExceeded):
		m.outcome = ResultUnreachable
	case errors.Is(err, backends.ErrConflict):
		m.outcome = folders.OutcomeSkipped
	}
	return m
}

// summarize folds the members' results into the run's result, a message
// and the task's error (nil for ok and skipped).
func summarize(results []memberResult) (string, string, error) {
	if len(results) == 0 {
		return ResultSkipped, "the folder has no members", nil
	}
	count := map[string]int{}
	var unreachable []string
	for _, m := range results {
		count[m.outcome]++
		if m.outcome == ResultUnreachable {
			if ref, err := backends.ParseRef(m.ref); err == nil && !slices.Contains(unreachable, ref.ContextKey()) {
				unreachable = append(unreachable, ref.ContextKey())
			}
		}
	}
	var parts []string
	for _, k := range []string{folders.OutcomeOK, folders.OutcomeSkipped, folders.OutcomeFailed, ResultUnreachable} {
		if count[k] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", count[k], k))
		}
	}
	msg := strings.Join(parts, ", ")
	if len(results) == 1 && results[0].message != "" {
		msg = results[0].message
	}
	switch {
	case count[ResultUnreachable] > 0:
		if len(unreachable) > 0 {
			msg = "context " + strings.Join(unreachable, ", ") + " unreachable; retried next tick (" + strings.Join(parts, ", ") + ")"
		}
		return ResultUnreachable, msg, backends.Unavailable(strings.Join(unreachable, ", "), nil)
	case count[folders.OutcomeFailed] > 0:
		return ResultFailed, msg, backends.Failed(fmt.Sprintf("%d of %d instances failed", count[folders.OutcomeFailed], len(results)), nil)
	case count[folders.OutcomeOK] == 0:
		return ResultSkipped, msg, nil
	}
	return ResultOK, msg, nil
}
