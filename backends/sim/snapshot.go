package sim

import (
	"context"
	"slices"

	"github.com/corral-dev/corral/backends"
)

// Snapshots implements backends.Snapshotter.
func (b *Backend) Snapshots(ctx context.Context, ref backends.InstanceRef) ([]backends.Snapshot, error) {
	if err := b.enter(ctx, "snapshots"); err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	in, err := b.lookup(ref)
	if err != nil {
		return nil, err
	}
	return slices.Clone(in.snapshots), nil
}

// CreateSnapshot implements backends.Snapshotter. Like a hypervisor that
// snapshots live, it reports crash consistency for a running instance and
// offline for a stopped one.
func (b *Backend) CreateSnapshot(ctx context.Context, ref backends.InstanceRef, name string) (backends.Snapshot, error) {
	if err := backends.ValidateName("snapshot", name); err != nil {
		return backends.Snapshot{}, err
	}
	if err := b.enter(ctx, "snapshot"); err != nil {
		return backends.Snapshot{}, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	in, err := b.lookup(ref)
	if err != nil {
		return backends.Snapshot{}, err
	}
	if slices.ContainsFunc(in.snapshots, func(s backends.Snapshot) bool { return s.Name == name }) {
		return backends.Snapshot{}, backends.Conflictf("snapshot %s of %s already exists", name, ref.Name)
	}
	s := backends.Snapshot{Name: name, Created: b.opts.Now(), Consistency: backends.ConsistencyOffline}
	if in.inst.State != backends.StateStopped {
		s.Consistency = backends.ConsistencyCrash
	}
	in.snapshots = append(in.snapshots, s)
	return s, nil
}

// RevertSnapshot implements backends.Snapshotter.
func (b *Backend) RevertSnapshot(ctx context.Context, ref backends.InstanceRef, name string) error {
	return b.withSnapshot(ctx, ref, name, "revert", func(in *instance, i int) {})
}

// DeleteSnapshot implements backends.Snapshotter.
func (b *Backend) DeleteSnapshot(ctx context.Context, ref backends.InstanceRef, name string) error {
	return b.withSnapshot(ctx, ref, name, "delete snapshot", func(in *instance, i int) {
		in.snapshots = slices.Delete(in.snapshots, i, i+1)
	})
}

func (b *Backend) withSnapshot(ctx context.Context, ref backends.InstanceRef, name, op string, f func(*instance, int)) error {
	if err := b.enter(ctx, op); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	in, err := b.lookup(ref)
	if err != nil {
		return err
	}
	i := slices.IndexFunc(in.snapshots, func(s backends.Snapshot) bool { return s.Name == name })
	if i < 0 {
		return backends.NotFoundf("snapshot %s of %s does not exist", name, ref.Name)
	}
	f(in, i)
	return nil
}

// Clone implements backends.Cloner: the source must be stopped, as on the
// real backends.
func (b *Backend) Clone(ctx context.Context, ref backends.InstanceRef, target string) (backends.Instance, error) {
	if err := backends.ValidateName("instance", target); err != nil {
		return backends.Instance{}, err
	}
	if err := b.enter(ctx, "clone"); err != nil {
		return backends.Instance{}, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	in, err := b.lookup(ref)
	if err != nil {
		return backends.Instance{}, err
	}
	if in.inst.State != backends.StateStopped {
		return backends.Instance{}, backends.Conflictf("cannot clone %s while it is %s: stop it first", ref.Name, in.inst.State)
	}
	if _, ok := b.instances[target]; ok {
		return backends.Instance{}, backends.Conflictf("an instance named %s already exists in context %s", target, b.opts.Context)
	}
	c := clone(in.inst)
	c.Ref = b.ref(target)
	c.Template = false // the clone of a template is what gets started
	c.Created = b.opts.Now()
	b.instances[target] = &instance{inst: c}
	return clone(c), nil
}
