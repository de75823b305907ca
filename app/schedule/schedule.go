// Package schedule is the use case behind power and snapshot schedules:
// the record (stored against a canonical instance ref or a folder path,
// with a cron expression of the portable subset and an IANA time zone),
// the cron evaluation, and the tick that dispatches what is due. Power
// runs go through the folders use case's bulk action, snapshot runs take
// an auto- snapshot and prune to the schedule's retention; every run is a
// task, so it is audited like any other change.
//
// A KubeVirt instance can instead be scheduled in-cluster: a Kubernetes
// CronJob patches the VM's run strategy, so the boundary fires with the
// workstation closed (see incluster.go).
package schedule

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/corral-dev/corral/app/fleet"
	"github.com/corral-dev/corral/app/folders"
	"github.com/corral-dev/corral/app/instances"
	"github.com/corral-dev/corral/app/tasks"
	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/store"
)

// Kinds of schedule.
const (
	KindPower    = "power"
	KindSnapshot = "snapshot"
)

// Target kinds.
const (
	TargetInstance = "instance"
	TargetFolder   = "folder"
)

// PowerActions are the actions a power schedule accepts.
var PowerActions = []string{"start", "stop", "shutdown"}

// Results a run records.
const (
	ResultOK          = "ok"
	ResultSkipped     = "skipped"     // nothing to do: already in the state asked for, or no members
	ResultFailed      = "failed"      // a member failed; not retried
	ResultUnreachable = "unreachable" // a context did not answer; retried next tick
	ResultMissed      = "missed"      // the boundary passed longer than the grace window ago
)

// MaxKeep bounds a snapshot schedule's retention.
const MaxKeep = 100

// Store is the slice of the store the service uses.
type Store interface {
	CreateSchedule(ctx context.Context, s store.Schedule) (store.Schedule, error)
	Schedules(ctx context.Context) ([]store.Schedule, error)
	Schedule(ctx context.Context, id int64) (store.Schedule, error)
	DeleteSchedule(ctx context.Context, id int64) error
	SetScheduleEnabled(ctx context.Context, id int64, enabled bool, at time.Time) error
	ClaimSchedule(ctx context.Context, id int64, from, to time.Time) (bool, error)
	RecordScheduleRun(ctx context.Context, id int64, run store.ScheduleRun, claimed, retryFrom time.Time) error
	Folders(ctx context.Context) ([]string, error)
	FolderMembersUnder(ctx context.Context, path string) ([]store.FolderMember, error)
}

// Folders is the folders use case's bulk action: a power run on an
// instance or a folder is one.
type Folders interface {
	Action(ctx context.Context, o tasks.Origin, sel folders.Selection, action string) (store.Task, []folders.Result, error)
	MemberRefs(ctx context.Context, path string) ([]string, error)
}

// Instances is the slice of the instances use case a snapshot run calls.
type Instances interface {
	Snapshot(ctx context.Context, o tasks.Origin, text string, action instances.SnapshotAction, name string) (store.Task, error)
	PruneSnapshots(ctx context.Context, o tasks.Origin, text string, keep int) (store.Task, []string, error)
}

var (
	_ Folders   = (*folders.Service)(nil)
	_ Instances = (*instances.Service)(nil)
)

// Options configure a Service.
type Options struct {
	// Now is the clock of create and enable; nil means time.Now. Tick
	// takes its instant as an argument.
	Now func() time.Time
	// Grace is how late a boundary may still fire; default 10 minutes.
	// A boundary older than that when a tick first sees it is recorded as
	// missed, not run: a laptop waking at 11:00 does not start the VMs
	// due at 09:00.
	Grace time.Duration
	// Concurrency bounds the schedules a tick runs at once; default 4.
	Concurrency int
	// DispatchTimeout bounds one schedule's run; default 2 minutes.
	DispatchTimeout time.Duration
	// SnapshotConcurrency bounds a snapshot run's members at once;
	// default 4.
	SnapshotConcurrency int
	// CronJobs creates and deletes in-cluster schedules; nil refuses
	// --in-cluster.
	CronJobs CronJobs
	Logger   *slog.Logger
	// After and OnTick are Run's seams for tests: After replaces
	// time.After, OnTick sees what each tick fired.
	After  func(time.Duration) <-chan time.Time
	OnTick func([]Fired)
}

// Service manages schedules and runs their ticks.
type Service struct {
	store     Store
	fleet     *fleet.Fleet
	tasks     *tasks.Manager
	folders   Folders
	instances Instances
	opts      Options
	log       *slog.Logger

	zonesMu sync.Mutex
	zones   map[string]*time.Location // time.LoadLocation reads tzdata from disk on every call
}

// zone returns LoadZone(name), cached.
func (s *Service) zone(name string) (*time.Location, error) {
	s.zonesMu.Lock()
	defer s.zonesMu.Unlock()
	if loc, ok := s.zones[name]; ok {
		return loc, nil
	}
	loc, err := LoadZone(name)
	if err != nil {
		return nil, err
	}
	if s.zones == nil {
		s.zones = map[string]*time.Location{}
	}
	s.zones[name] = loc
	return loc, nil
}

// New returns a Service.
func New(st Store, f *fleet.Fleet, tm *tasks.Manager, fo Folders, in Instances, opts Options) *Service {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Grace <= 0 {
		opts.Grace = 10 * time.Minute
	}
	if opts.Concurrency <= 0 {
		opts.Concurrency = 4
	}
	if opts.SnapshotConcurrency <= 0 {
		opts.SnapshotConcurrency = 4
	}
	if opts.DispatchTimeout <= 0 {
		opts.DispatchTimeout = 2 * time.Minute
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Service{store: st, fleet: f, tasks: tm, folders: fo, instances: in, opts: opts, log: opts.Logger}
}

// Grace returns the grace window of late boundaries.
func (s *Service) Grace() time.Duration { return s.opts.Grace }

// Request is what a caller asks to create. Exactly one of Ref and Folder
// is set.
type Request struct {
	Ref       string // canonical ref, or a bare name that resolves to one instance
	Folder    string
	Kind      string // power or snapshot
	Action    string // start, stop or shutdown (power)
	Cron      string
	TZ        string // IANA name; default UTC
	Keep      int    // snapshot: auto- snapshots kept, 1 to MaxKeep
	Disabled  bool
	InCluster bool
}

// Schedule is a stored schedule with its next boundary, for lists.
type Schedule struct {
	store.Schedule
	Next time.Time // next boundary in the schedule's zone; zero when disabled
	// Loc is the schedule's zone (TZ), from the service's cache: lists
	// show their times in it without loading the zone per row. UTC when
	// TZ names no zone this host knows.
	Loc *time.Location
}

// Target returns the schedule's target as shown to users: the ref, or
// "folder PATH".
func Target(sc store.Schedule) string {
	if sc.TargetKind == TargetFolder {
		return "folder " + sc.Target
	}
	return sc.Target
}

// List returns every schedule with its next boundary after now.
func (s *Service) List(ctx context.Context) ([]Schedule, error) {
	list, err := s.store.Schedules(ctx)
	if err != nil {
		return nil, err
	}
	now := s.opts.Now()
	out := make([]Schedule, 0, len(list))
	for _, sc := range list {
		out = append(out, s.view(sc, now))
	}
	return out, nil
}

// Get returns the schedule id, or NotFound.
func (s *Service) Get(ctx context.Context, id int64) (Schedule, error) {
	sc, err := s.store.Schedule(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return Schedule{}, backends.NotFoundf("schedule %d does not exist", id)
	}
	if err != nil {
		return Schedule{}, err
	}
	return s.view(sc, s.opts.Now()), nil
}

// view is sc as the service answers it: its next boundary after now and
// its zone.
func (s *Service) view(sc store.Schedule, now time.Time) Schedule {
	loc, err := s.zone(sc.TZ)
	if err != nil {
		loc = time.UTC
	}
	return Schedule{Schedule: sc, Next: s.next(sc, now), Loc: loc}
}

func (s *Service) next(sc store.Schedule, now time.Time) time.Time {
	if !sc.Enabled {
		return time.Time{}
	}
	c, err1 := ParseCron(sc.Cron)
	loc, err2 := s.zone(sc.TZ)
	if err1 != nil || err2 != nil {
		return time.Time{}
	}
	return c.Next(now.In(loc))
}

// validate checks req and returns the record to store. Every refusal is
// an Invalid error (or a backend's typed refusal) naming what was wrong
// and what is accepted.
func (s *Service) validate(ctx context.Context, req Request) (store.Schedule, error) {
	sc := store.Schedule{Kind: req.Kind, Action: req.Action, Enabled: !req.Disabled, InCluster: req.InCluster, Keep: req.Keep}
	switch req.Kind {
	case KindPower:
		if !slices.Contains(PowerActions, req.Action) {
			return sc, backends.Invalidf("power action %q is not accepted: accepted are start, stop, shutdown", req.Action)
		}
		if req.Keep != 0 {
			return sc, backends.Invalidf("keep applies to snapshot schedules only: leave it out of a power schedule")
		}
	case KindSnapshot:
		if req.Action != "" && req.Action != "snapshot" {
			return sc, backends.Invalidf("a snapshot schedule takes no action (got %q): leave it out", req.Action)
		}
		sc.Action = ""
		if req.Keep < 1 || req.Keep > MaxKeep {
			return sc, backends.Invalidf("keep %d is not accepted: a snapshot schedule keeps 1 to %d auto- snapshots", req.Keep, MaxKeep)
		}
	default:
		return sc, backends.Invalidf("schedule kind %q is not accepted: accepted are power and snapshot", req.Kind)
	}
	c, err := ParseCron(req.Cron)
	if err != nil {
		return sc, err
	}
	sc.Cron = c.String()
	if req.TZ == "" {
		req.TZ = "UTC"
	}
	if _, err := LoadZone(req.TZ); err != nil {
		return sc, err
	}
	sc.TZ = req.TZ
	switch {
	case req.Ref != "" && req.Folder != "":
		return sc, backends.Invalidf("give a ref or a folder, not both")
	case req.Folder != "":
		if err := folders.ValidatePath(req.Folder); err != nil {
			return sc, err
		}
		all, err := s.store.Folders(ctx)
		if err != nil {
			return sc, err
		}
		if !slices.Contains(all, req.Folder) {
			return sc, backends.Invalidf("folder %s does not exist: create it first or name an existing folder", req.Folder)
		}
		sc.TargetKind, sc.Target = TargetFolder, req.Folder
	case req.Ref != "":
		ref, b, err := s.resolve(req.Ref)
		if err != nil {
			return sc, err
		}
		if req.Kind == KindSnapshot {
			if _, err := backends.Snapshots(b); err != nil {
				return sc, err
			}
		}
		sc.TargetKind, sc.Target = TargetInstance, ref.String()
	default:
		return sc, backends.Invalidf("a target is required: a ref (canonical instance reference) or a folder path")
	}
	if req.InCluster {
		if err := s.checkInCluster(sc); err != nil {
			return sc, err
		}
	}
	return sc, nil
}

// resolve turns text into a ref whose context is configured and, when
// that context answers, holds the instance. A schedule on an instance of
// a context that is down right now can still be created (by canonical
// ref): the context may be back by the boundary.
func (s *Service) resolve(text string) (backends.InstanceRef, backends.Backend, error) {
	snap := s.fleet.Snapshot()
	ref, err := snap.Resolve(text)
	if err != nil {
		if errors.Is(err, backends.ErrNotFound) {
			return ref, nil, backends.Invalidf("%s: name a canonical ref (BACKEND/CONTEXT/NAMESPACE/NAME) or an instance the fleet knows", backends.SafeMessage(err))
		}
		return ref, nil, err
	}
	b, err := s.fleet.Backend(ref)
	if err != nil {
		return ref, nil, backends.Invalidf("instance %s: context %s is not configured on this server", ref, ref.ContextKey())
	}
	if _, ok := snap.Find(ref); !ok {
		for _, c := range snap.Contexts {
			if c.Key == ref.ContextKey() && c.Health == fleet.HealthOK {
				return ref, nil, backends.Invalidf("instance %s does not exist in context %s", ref, c.Key)
			}
		}
	}
	return ref, b, nil
}

func origin(o tasks.Origin) tasks.Origin {
	if o.Actor == "" {
		o.Actor = "anonymous"
	}
	return o
}

// Create validates req and stores the schedule as a task (so it is
// audited); an in-cluster schedule gets its CronJob in the same task, and
// is not stored when the CronJob cannot be made.
func (s *Service) Create(ctx context.Context, o tasks.Origin, req Request) (store.Task, store.Schedule, error) {
	o = origin(o)
	target := req.Ref
	if req.Folder != "" {
		target = "folder " + req.Folder
	}
	spec := tasks.Spec{Action: "schedule create", Target: target, Origin: o}
	sc, err := s.validate(ctx, req)
	if err != nil {
		return store.Task{}, store.Schedule{}, s.tasks.Refused(ctx, spec, err)
	}
	sc.CreatedBy = o.Actor
	spec.Target = Target(sc)
	var created store.Schedule
	t, err := s.tasks.Do(ctx, spec, func(ctx context.Context, r *tasks.Run) error {
		var err error
		created, err = s.store.CreateSchedule(ctx, sc)
		if err != nil {
			return err
		}
		if created.InCluster {
			if err := s.applyCronJob(ctx, created); err != nil {
				if derr := s.store.DeleteSchedule(context.WithoutCancel(ctx), created.ID); derr != nil {
					s.log.Error("schedule: a schedule whose CronJob failed was left behind", "id", created.ID, "err", derr)
				}
				return err
			}
			r.Logf("CronJob of schedule %d created in the VM's namespace", created.ID)
		}
		r.Logf("schedule %d: %s %s at %q (%s)", created.ID, describe(created), Target(created), created.Cron, created.TZ)
		return nil
	})
	return t, created, err
}

// describe names what a schedule does: "stop", "snapshot (keep 7)".
func describe(sc store.Schedule) string {
	if sc.Kind == KindSnapshot {
		return "snapshot (keep " + strconv.Itoa(sc.Keep) + ")"
	}
	return sc.Action
}

// Delete removes the schedule id (and its CronJob) as a task.
func (s *Service) Delete(ctx context.Context, o tasks.Origin, id int64) (store.Task, error) {
	o = origin(o)
	spec := tasks.Spec{Action: "schedule delete", Target: "schedule " + strconv.FormatInt(id, 10), Origin: o}
	sc, err := s.Get(ctx, id)
	if err != nil {
		return store.Task{}, s.tasks.Refused(ctx, spec, err)
	}
	spec.Target = Target(sc.Schedule)
	return s.tasks.Do(ctx, spec, func(ctx context.Context, r *tasks.Run) error {
		if sc.InCluster {
			if err := s.deleteCronJob(ctx, sc.Schedule); err != nil {
				return err
			}
			r.Logf("CronJob of schedule %d deleted", id)
		}
		if err := s.store.DeleteSchedule(ctx, id); err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		r.Logf("schedule %d deleted", id)
		return nil
	})
}

// SetEnabled enables or disables the schedule id as a task. Boundaries
// that pass while a schedule is disabled are never fired. An in-cluster
// schedule's CronJob is suspended and resumed with it.
func (s *Service) SetEnabled(ctx context.Context, o tasks.Origin, id int64, enabled bool) (store.Task, error) {
	o = origin(o)
	action := "schedule disable"
	if enabled {
		action = "schedule enable"
	}
	spec := tasks.Spec{Action: action, Target: "schedule " + strconv.FormatInt(id, 10), Origin: o}
	sc, err := s.Get(ctx, id)
	if err != nil {
		return store.Task{}, s.tasks.Refused(ctx, spec, err)
	}
	spec.Target = Target(sc.Schedule)
	return s.tasks.Do(ctx, spec, func(ctx context.Context, r *tasks.Run) error {
		if sc.InCluster {
			sc.Enabled = enabled
			if err := s.applyCronJob(ctx, sc.Schedule); err != nil {
				return err
			}
		}
		if err := s.store.SetScheduleEnabled(ctx, id, enabled, s.opts.Now()); err != nil {
			return fmt.Errorf("schedule: %w", err)
		}
		r.Logf("schedule %d %sd", id, action[len("schedule "):])
		return nil
	})
}
