package instances

import (
	"context"
	"io"
	"slices"

	"github.com/corral-dev/corral/app/snapshot"
	"github.com/corral-dev/corral/app/tasks"
	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/store"
)

// Snapshots lists the snapshots of the instance named by text.
func (s *Service) Snapshots(ctx context.Context, text string) ([]backends.Snapshot, error) {
	ref, b, err := s.resolve(text)
	if err != nil {
		return nil, err
	}
	sn, err := backends.Snapshots(b)
	if err != nil {
		return nil, err
	}
	cctx, cancel := s.fleet.CallContext(ctx)
	defer cancel()
	list, err := sn.Snapshots(cctx, ref)
	return list, timeout(err, cctx, ref)
}

// SnapshotAction is what Snapshot does with a named snapshot.
type SnapshotAction string

// The snapshot actions.
const (
	SnapshotCreate SnapshotAction = "snapshot"
	SnapshotRevert SnapshotAction = "revert snapshot"
	SnapshotDelete SnapshotAction = "delete snapshot"
)

// Snapshot creates, reverts or deletes the snapshot name of the instance
// named by text, as a task, and waits for it. A backend that refuses (a
// running VM on local QEMU) gives the typed refusal with its remedy.
func (s *Service) Snapshot(ctx context.Context, o tasks.Origin, text string, action SnapshotAction, name string) (store.Task, error) {
	spec := tasks.Spec{Action: string(action), Target: text, Origin: o}
	ref, b, err := s.resolve(text)
	if err != nil {
		return store.Task{}, s.tasks.Refused(ctx, spec, err)
	}
	spec.Target = ref.String() + "@" + name
	sn, err := backends.Snapshots(b)
	if err == nil && action == SnapshotCreate {
		err = backends.ValidateName("snapshot", name)
	}
	if err != nil {
		return store.Task{}, s.tasks.Refused(ctx, spec, err)
	}
	t, err := s.tasks.Do(ctx, spec, func(ctx context.Context, r *tasks.Run) error {
		cctx, cancel := s.fleet.CallContext(ctx)
		defer cancel()
		switch action {
		case SnapshotCreate:
			snap, err := sn.CreateSnapshot(cctx, ref, name)
			if err != nil {
				return timeout(err, cctx, ref)
			}
			r.Logf("snapshot %s of %s taken (%s)", snap.Name, ref, snap.Consistency)
		case SnapshotRevert:
			if err := sn.RevertSnapshot(cctx, ref, name); err != nil {
				return timeout(err, cctx, ref)
			}
			r.Logf("%s reverted to snapshot %s", ref, name)
		default:
			if err := sn.DeleteSnapshot(cctx, ref, name); err != nil {
				return timeout(err, cctx, ref)
			}
			r.Logf("snapshot %s of %s deleted", name, ref)
		}
		return nil
	})
	s.fleet.RefreshContext(context.WithoutCancel(ctx), ref.ContextKey())
	return t, err
}

// Clone copies the (stopped) instance named by text to target in the same
// context, in a background task.
func (s *Service) Clone(ctx context.Context, o tasks.Origin, text, target string) (store.Task, backends.InstanceRef, error) {
	spec := tasks.Spec{Action: "clone", Target: text, Origin: o}
	ref, b, err := s.resolve(text)
	if err != nil {
		return store.Task{}, backends.InstanceRef{}, s.tasks.Refused(ctx, spec, err)
	}
	spec.Target = ref.String()
	cl, err := backends.Clones(b)
	if err == nil {
		err = backends.ValidateName("clone", target)
	}
	if err != nil {
		return store.Task{}, backends.InstanceRef{}, s.tasks.Refused(ctx, spec, err)
	}
	dst := ref
	dst.Name = target
	t, err := s.tasks.Start(ctx, spec, func(ctx context.Context, r *tasks.Run) error {
		r.Logf("clone %s to %s", ref, dst)
		in, err := cl.Clone(ctx, ref, target) // a disk copy: the task's own timeout bounds it
		if err != nil {
			return err
		}
		if _, err := s.registry.EnsureInstance(ctx, in.Ref.String()); err != nil {
			s.log.Error("instances: registry entry not written", "ref", in.Ref.String(), "err", err)
		}
		s.fleet.RefreshContext(ctx, ref.ContextKey())
		r.Logf("cloned: %s", in.Ref)
		return nil
	})
	return t, dst, err
}

// ExportFormats returns the export formats of the instance's backend,
// native first, or the refusal when it cannot export.
func (s *Service) ExportFormats(text string) (backends.InstanceRef, []string, error) {
	ref, b, err := s.resolve(text)
	if err != nil {
		return ref, nil, err
	}
	ex, err := backends.Exports(b)
	if err != nil {
		return ref, nil, err
	}
	return ref, ex.ExportFormats(), nil
}

// Export streams the instance's disk in format to w as a task. Nothing is
// written to w before the backend has accepted the export, so a refusal
// (a running VM) can still be answered as an error.
func (s *Service) Export(ctx context.Context, o tasks.Origin, text, format string, w io.Writer) (store.Task, backends.Consistency, error) {
	spec := tasks.Spec{Action: "export", Target: text, Origin: o}
	ref, b, err := s.resolve(text)
	if err != nil {
		return store.Task{}, "", s.tasks.Refused(ctx, spec, err)
	}
	spec.Target = ref.String()
	ex, err := backends.Exports(b)
	if err == nil && !slices.Contains(ex.ExportFormats(), format) {
		err = backends.Invalidf("export format %q is not offered by the %s backend: accepted are %v", format, b.Kind(), ex.ExportFormats())
	}
	if err != nil {
		return store.Task{}, "", s.tasks.Refused(ctx, spec, err)
	}
	var cons backends.Consistency
	t, err := s.tasks.Do(ctx, spec, func(ctx context.Context, r *tasks.Run) error {
		r.Logf("export %s as %s", ref, format)
		c, err := ex.Export(ctx, ref, format, w)
		if err != nil {
			return err
		}
		cons = c
		r.Logf("exported (%s)", c)
		return nil
	})
	return t, cons, err
}

// PruneSnapshots applies retention to the instance named by text as a
// task: the oldest "auto-" snapshots beyond the newest keep are deleted,
// hand-named ones never. It returns the names deleted.
func (s *Service) PruneSnapshots(ctx context.Context, o tasks.Origin, text string, keep int) (store.Task, []string, error) {
	spec := tasks.Spec{Action: "prune snapshots", Target: text, Origin: o}
	ref, b, err := s.resolve(text)
	if err != nil {
		return store.Task{}, nil, s.tasks.Refused(ctx, spec, err)
	}
	spec.Target = ref.String()
	sn, err := backends.Snapshots(b)
	if err != nil {
		return store.Task{}, nil, s.tasks.Refused(ctx, spec, err)
	}
	var deleted []string
	t, err := s.tasks.Do(ctx, spec, func(ctx context.Context, r *tasks.Run) error {
		cctx, cancel := s.fleet.CallContext(ctx)
		defer cancel()
		var err error
		deleted, err = snapshot.Prune(cctx, sn, ref, keep)
		for _, d := range deleted {
			r.Logf("deleted snapshot %s of %s", d, ref)
		}
		return timeout(err, cctx, ref)
	})
	return t, deleted, err
}
