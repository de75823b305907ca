// Package folders is the use case behind folders (ADR-0008): an
// operator-defined tree of paths whose members are instances by canonical
// ref, the tree resolved against the live fleet, and bulk actions over a
// folder's subtree. Every change runs as a task, so it has one audit row.
package folders

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/corral-dev/corral/app/fleet"
	"github.com/corral-dev/corral/app/instances"
	"github.com/corral-dev/corral/app/tasks"
	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/store"
)

// Store is the slice of the store the service uses.
type Store interface {
	CreateFolder(ctx context.Context, path string) error
	Folders(ctx context.Context) ([]string, error)
	MoveFolder(ctx context.Context, from, to string) error
	DeleteFolder(ctx context.Context, path string) (int, error)
	SetFolderMember(ctx context.Context, path, ref string) error
	RemoveFolderMember(ctx context.Context, ref string) error
	FolderMembers(ctx context.Context) ([]store.FolderMember, error)
	FolderMembersUnder(ctx context.Context, path string) ([]store.FolderMember, error)
}

// Instances is the slice of the instances use case a bulk action calls,
// so every member's action is a task of its own, audited.
type Instances interface {
	Power(ctx context.Context, o tasks.Origin, text, action string) (store.Task, error)
	Snapshot(ctx context.Context, o tasks.Origin, text string, action instances.SnapshotAction, name string) (store.Task, error)
}

var _ Instances = (*instances.Service)(nil)

// Options configure a Service.
type Options struct {
	// Concurrency bounds the member actions a bulk action runs at once;
	// default 4.
	Concurrency int
	// Now is the clock (it names bulk snapshots); nil means time.Now.
	Now func() time.Time
}

// Service runs folder operations.
type Service struct {
	store     Store
	fleet     *fleet.Fleet
	tasks     *tasks.Manager
	instances Instances
	limit     int
	now       func() time.Time
}

// New returns a Service.
func New(st Store, f *fleet.Fleet, tm *tasks.Manager, in Instances, opts Options) *Service {
	if opts.Concurrency <= 0 {
		opts.Concurrency = 4
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Service{store: st, fleet: f, tasks: tm, instances: in, limit: opts.Concurrency, now: opts.Now}
}

// PathRule is the rule a folder path must follow, quoted in every refusal.
const PathRule = "a folder path is 1 to 8 segments separated by /, each segment 1 to 63 characters matching [a-z0-9][a-z0-9-._]*"

// ValidatePath returns an Invalid error naming PathRule when path is not
// a valid folder path.
func ValidatePath(path string) error {
	if path == "" {
		return backends.Invalidf("a folder path is required: %s", PathRule)
	}
	segs := strings.Split(path, "/")
	if len(segs) > store.MaxFolderDepth {
		return backends.Invalidf("folder path %q is %d levels deep: %s", path, len(segs), PathRule)
	}
	for _, seg := range segs {
		if !validSegment(seg) {
			return backends.Invalidf("folder path %q has an invalid segment %q: %s", path, seg, PathRule)
		}
	}
	return nil
}

func validSegment(s string) bool {
	if s == "" || len(s) > 63 {
		return false
	}
	for i, c := range s {
		alnum := c >= 'a' && c <= 'z' || c >= '0' && c <= '9'
		if !alnum && (i == 0 || c != '-' && c != '.' && c != '_') {
			return false
		}
	}
	return true
}

// storeError maps the store's folder errors onto the shared kinds, with
// messages safe to show.
func storeError(err error, path string) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, store.ErrNotFound):
		return backends.NotFoundf("folder %s does not exist", path)
	case errors.Is(err, store.ErrExists):
		return backends.Conflictf("folder %s already exists", path)
	case errors.Is(err, store.ErrFolderCycle):
		return backends.Invalidf("folder %s cannot be moved under itself", path)
	case errors.Is(err, store.ErrFolderDepth):
		return backends.Invalidf("folders nest at most %d levels: this change would go deeper", store.MaxFolderDepth)
	}
	return fmt.Errorf("folders: %w", err)
}

// Create creates path and its missing parents as a task. It returns an
// Invalid error for a bad path and a Conflict when path exists.
func (s *Service) Create(ctx context.Context, o tasks.Origin, path string) (store.Task, error) {
	spec := tasks.Spec{Action: "folder create", Target: path, Origin: o}
	if err := ValidatePath(path); err != nil {
		return store.Task{}, s.tasks.Refused(ctx, spec, err)
	}
	return s.tasks.Do(ctx, spec, func(ctx context.Context, r *tasks.Run) error {
		if err := storeError(s.store.CreateFolder(ctx, path), path); err != nil {
			return err
		}
		r.Logf("created folder %s", path)
		return nil
	})
}

// Delete removes path and its subtree as a task. Their members are
// unfoldered; instances are never deleted.
func (s *Service) Delete(ctx context.Context, o tasks.Origin, path string) (store.Task, error) {
	spec := tasks.Spec{Action: "folder delete", Target: path, Origin: o}
	if err := ValidatePath(path); err != nil {
		return store.Task{}, s.tasks.Refused(ctx, spec, err)
	}
	return s.tasks.Do(ctx, spec, func(ctx context.Context, r *tasks.Run) error {
		n, err := s.store.DeleteFolder(ctx, path)
		if err != nil {
			return storeError(err, path)
		}
		r.Logf("deleted folder %s and its subfolders; %d instances unfoldered", path, n)
		return nil
	})
}

// Move renames or re-parents from to to with its subtree, as a task.
// Moving a folder under itself is Invalid; a to that exists is a Conflict.
func (s *Service) Move(ctx context.Context, o tasks.Origin, from, to string) (store.Task, error) {
	spec := tasks.Spec{Action: "folder move", Target: from + " -> " + to, Origin: o}
	err := ValidatePath(from)
	if err == nil {
		err = ValidatePath(to)
	}
	if err != nil {
		return store.Task{}, s.tasks.Refused(ctx, spec, err)
	}
	return s.tasks.Do(ctx, spec, func(ctx context.Context, r *tasks.Run) error {
		err := s.store.MoveFolder(ctx, from, to)
		switch {
		case errors.Is(err, store.ErrExists):
			return backends.Conflictf("folder %s already exists", to)
		case err != nil:
			return storeError(err, from)
		}
		r.Logf("moved folder %s to %s", from, to)
		return nil
	})
}

// resolve turns what the caller named into a canonical ref: a canonical
// ref as given (it need not be in the fleet), or a bare name that exactly
// one instance of the snapshot carries.
func (s *Service) resolve(text string) (string, error) {
	ref, err := s.fleet.Snapshot().Resolve(text)
	if err != nil {
		return "", err
	}
	return ref.String(), nil
}

// AddMember puts the instance named by text in path, taking it out of any
// other folder (what a drag and drop does), as a task.
func (s *Service) AddMember(ctx context.Context, o tasks.Origin, path, text string) (store.Task, error) {
	spec := tasks.Spec{Action: "folder add", Target: path + " <- " + text, Origin: o}
	err := ValidatePath(path)
	var ref string
	if err == nil {
		ref, err = s.resolve(text)
	}
	if err != nil {
		return store.Task{}, s.tasks.Refused(ctx, spec, err)
	}
	spec.Target = path + " <- " + ref
	return s.tasks.Do(ctx, spec, func(ctx context.Context, r *tasks.Run) error {
		if err := storeError(s.store.SetFolderMember(ctx, path, ref), path); err != nil {
			return err
		}
		r.Logf("%s is in folder %s", ref, path)
		return nil
	})
}

// RemoveMember takes the instance named by text out of its folder, as a
// task. It is NotFound when the instance is in no folder.
func (s *Service) RemoveMember(ctx context.Context, o tasks.Origin, text string) (store.Task, error) {
	spec := tasks.Spec{Action: "folder remove", Target: text, Origin: o}
	ref, err := s.resolve(text)
	if err != nil {
		return store.Task{}, s.tasks.Refused(ctx, spec, err)
	}
	spec.Target = ref
	return s.tasks.Do(ctx, spec, func(ctx context.Context, r *tasks.Run) error {
		err := s.store.RemoveFolderMember(ctx, ref)
		if errors.Is(err, store.ErrNotFound) {
			return backends.NotFoundf("%s is in no folder", ref)
		}
		if err != nil {
			return fmt.Errorf("folders: %w", err)
		}
		r.Logf("%s is in no folder", ref)
		return nil
	})
}
