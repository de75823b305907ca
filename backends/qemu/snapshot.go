package qemu

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/corral-dev/corral/backends"
)

// Snapshots are qcow2 internal snapshots made with qemu-img on a stopped
// VM, so every snapshot is offline-consistent. A running VM is refused
// rather than snapshotted live: qemu-img writing into an image the guest
// has open corrupts it (qemu's lock would stop it anyway), and QMP's
// savevm would capture memory too, which a stopped VM cannot restore into.
// A raw disk has nowhere to keep a snapshot.

// Snapshots implements backends.Snapshotter, oldest first. It reads a
// running VM's disk too (shared, without taking its lock).
func (b *Backend) Snapshots(ctx context.Context, ref backends.InstanceRef) ([]backends.Snapshot, error) {
	v, err := b.lookup(ref)
	if err != nil {
		return nil, err
	}
	if v.cfg.DiskFormat != "qcow2" {
		return []backends.Snapshot{}, nil // a raw disk holds no snapshots
	}
	ii, err := b.img().Info(ctx, v.disk(), true)
	if err != nil {
		return nil, b.fail("list the snapshots of", ref.Name, err)
	}
	out := make([]backends.Snapshot, 0, len(ii.Snapshots))
	for _, s := range ii.Snapshots {
		out = append(out, backends.Snapshot{
			Name:        s.Name,
			Created:     time.Unix(s.DateSec, s.DateNsec).UTC(),
			Consistency: backends.ConsistencyOffline,
		})
	}
	slices.SortStableFunc(out, func(a, c backends.Snapshot) int { return cmp.Compare(a.Created.UnixNano(), c.Created.UnixNano()) })
	return out, nil
}

// snapshotTarget checks that ref's VM can take a snapshot operation named
// op now: it exists, has a qcow2 disk and is stopped. The caller holds the
// VM's lock, so it cannot start in between.
func (b *Backend) snapshotTarget(ref backends.InstanceRef, op string) (*vm, error) {
	v, err := b.lookup(ref)
	if err != nil {
		return nil, err
	}
	if v.cfg.DiskFormat != "qcow2" {
		return nil, backends.Refuse(backends.KindQEMU, op+" of a raw disk",
			"a raw disk cannot hold snapshots: export it and create a VM from the copy (it becomes qcow2), or convert it with qemu-img")
	}
	if _, alive := v.process(); alive {
		return nil, backends.Refuse(backends.KindQEMU, op+" of a running VM", "shut the VM down first: corral stop "+ref.Name)
	}
	return v, nil
}

// findSnapshot returns the snapshot of v named name, if any.
func (b *Backend) findSnapshot(ctx context.Context, v *vm, name string) (backends.Snapshot, bool, error) {
	list, err := b.Snapshots(ctx, v.ref(b))
	if err != nil {
		return backends.Snapshot{}, false, err
	}
	i := slices.IndexFunc(list, func(s backends.Snapshot) bool { return s.Name == name })
	if i < 0 {
		return backends.Snapshot{}, false, nil
	}
	return list[i], true, nil
}

// snapshotName checks a snapshot name. qemu-img takes an all-digit name
// for a snapshot id as well, so such a name could act on another snapshot.
func snapshotName(name string) error {
	if err := validName("snapshot", name); err != nil {
		return err
	}
	for _, c := range name {
		if c < '0' || c > '9' {
			return nil
		}
	}
	return backends.Invalidf("snapshot name %q is not accepted: it needs a letter or a dash, since qemu-img reads a number as a snapshot id", name)
}

// CreateSnapshot implements backends.Snapshotter.
func (b *Backend) CreateSnapshot(ctx context.Context, ref backends.InstanceRef, name string) (backends.Snapshot, error) {
	if err := snapshotName(name); err != nil {
		return backends.Snapshot{}, err
	}
	defer b.lock(ref.Name)()
	v, err := b.snapshotTarget(ref, "snapshot")
	if err != nil {
		return backends.Snapshot{}, err
	}
	if _, ok, err := b.findSnapshot(ctx, v, name); err != nil {
		return backends.Snapshot{}, err
	} else if ok {
		return backends.Snapshot{}, backends.Conflictf("%s already has a snapshot named %s", ref.Name, name)
	}
	if _, err := b.img().Run(ctx, "snapshot", "-q", "-c", name, v.disk()); err != nil {
		return backends.Snapshot{}, b.fail("snapshot", ref.Name, err)
	}
	s, ok, err := b.findSnapshot(ctx, v, name)
	if err != nil {
		return backends.Snapshot{}, err
	}
	if !ok {
		return backends.Snapshot{}, backends.Failed("qemu-img did not record snapshot "+name+" of "+ref.Name, nil)
	}
	return s, nil
}

// RevertSnapshot implements backends.Snapshotter: the disk returns to the
// snapshot; the snapshot stays.
func (b *Backend) RevertSnapshot(ctx context.Context, ref backends.InstanceRef, name string) error {
	return b.snapshotOp(ctx, ref, name, "revert", "-a")
}

// DeleteSnapshot implements backends.Snapshotter.
func (b *Backend) DeleteSnapshot(ctx context.Context, ref backends.InstanceRef, name string) error {
	return b.snapshotOp(ctx, ref, name, "delete a snapshot", "-d")
}

func (b *Backend) snapshotOp(ctx context.Context, ref backends.InstanceRef, name, op, flag string) error {
	defer b.lock(ref.Name)()
	v, err := b.snapshotTarget(ref, op)
	if err != nil {
		return err
	}
	if _, ok, err := b.findSnapshot(ctx, v, name); err != nil {
		return err
	} else if !ok {
		return backends.NotFoundf("%s has no snapshot named %s", ref.Name, name)
	}
	if _, err := b.img().Run(ctx, "snapshot", "-q", flag, name, v.disk()); err != nil {
		return b.fail(op+" of", ref.Name, err)
	}
	return nil
}
