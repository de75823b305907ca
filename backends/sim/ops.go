package sim

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/corral-dev/corral/backends"
)

var (
	_ backends.Migrator  = (*Backend)(nil)
	_ backends.Scaler    = (*Backend)(nil)
	_ backends.Templater = (*Backend)(nil)
)

// nodes are the nodes of every simulated context; generated instances
// are spread over them, and a migration moves an instance between them.
var nodes = []string{"node-0", "node-1", "node-2"}

// Nodes returns the names of the context's nodes, the ones Migrate
// accepts as a target. The dashboard offers them in its migrate form.
func (b *Backend) Nodes(ctx context.Context) ([]string, error) {
	if err := b.enter(ctx, "nodes"); err != nil {
		return nil, err
	}
	return slices.Clone(nodes), nil
}

// Scale implements backends.Scaler. Like a hypervisor with CPU and
// memory hotplug, a running instance takes the new size at once.
func (b *Backend) Scale(ctx context.Context, ref backends.InstanceRef, cpus int, memoryMiB int64) error {
	if cpus < 1 || memoryMiB < 1 {
		return backends.Invalidf("scale %s to %d CPU and %d MiB: both must be at least 1", ref.Name, cpus, memoryMiB)
	}
	if err := b.enter(ctx, "scale"); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	in, err := b.lookup(ref)
	if err != nil {
		return err
	}
	in.inst.CPUs, in.inst.MemoryMiB = cpus, memoryMiB
	return nil
}

// SetTemplate implements backends.Templater: as on KubeVirt, only a
// stopped instance may be marked, and Power refuses to start a template.
func (b *Backend) SetTemplate(ctx context.Context, ref backends.InstanceRef, on bool) error {
	if err := b.enter(ctx, "template"); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	in, err := b.lookup(ref)
	if err != nil {
		return err
	}
	if on && in.inst.State != backends.StateStopped {
		return backends.Conflictf("%s is %s; stop it before marking it as a template", ref.Name, in.inst.State)
	}
	in.inst.Template = on
	return nil
}

// Migrate implements backends.Migrator. The instance must be running (or
// paused); an empty targetNode picks the next node after its own. The
// returned migration moves it when Wait runs, reporting KubeVirt's
// phase names so the task's progress reads the same.
func (b *Backend) Migrate(ctx context.Context, ref backends.InstanceRef, targetNode string) (backends.Migration, error) {
	if err := b.enter(ctx, "migrate"); err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	in, err := b.lookup(ref)
	if err != nil {
		return nil, err
	}
	if in.inst.State != backends.StateRunning && in.inst.State != backends.StatePaused {
		return nil, backends.Conflictf("%s is %s, so it cannot be live-migrated: start it first, or use a cold move", ref.Name, in.inst.State)
	}
	if in.inst.Type == backends.TypeCT {
		return nil, backends.Refuse(backends.KindSim, "migrate", "a container cannot live-migrate; stop and start it instead")
	}
	cur := in.inst.Node
	switch {
	case targetNode == "":
		i := slices.Index(nodes, cur)
		targetNode = nodes[(i+1)%len(nodes)]
	case !slices.Contains(nodes, targetNode):
		return nil, backends.Invalidf("node %q does not exist in context %s: give one of %s, or none to let the scheduler choose", targetNode, b.opts.Context, strings.Join(nodes, ", "))
	case targetNode == cur:
		return nil, backends.Invalidf("%s already runs on node %s: give another node, or none to let the scheduler choose", ref.Name, cur)
	}
	return &migration{b: b, ref: ref, name: fmt.Sprintf("%s-migration-%s", ref.Name, targetNode), to: targetNode}, nil
}

// migration is a simulated migration: Wait reports its phases and moves
// the instance.
type migration struct {
	b    *Backend
	ref  backends.InstanceRef
	name string
	to   string
}

func (m *migration) Name() string { return m.name }

// Wait reports Scheduling, Running and Succeeded, paying the context's
// latency before each, and moves the instance to the target node. An
// instance deleted or stopped meanwhile fails the migration.
func (m *migration) Wait(ctx context.Context, phase func(string)) error {
	report := func(p string) {
		if phase != nil {
			phase(p)
		}
	}
	for _, p := range []string{"Scheduling", "Running"} {
		if err := m.b.enter(ctx, "migrate"); err != nil {
			return backends.Failed("the migration "+m.name+" did not end", err)
		}
		report(p)
	}
	if err := m.b.enter(ctx, "migrate"); err != nil {
		return backends.Failed("the migration "+m.name+" did not end", err)
	}
	m.b.mu.Lock()
	in, err := m.b.lookup(m.ref)
	if err == nil && in.inst.State != backends.StateRunning && in.inst.State != backends.StatePaused {
		err = fmt.Errorf("sim: %s stopped during its migration", m.ref.Name)
	}
	if err == nil {
		in.inst.Node = m.to
	}
	m.b.mu.Unlock()
	if err != nil {
		report("Failed")
		return backends.Failed("the migration "+m.name+" failed; the instance is no longer running", err)
	}
	report("Succeeded")
	return nil
}
