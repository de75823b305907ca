// Package sim is an in-memory backend: a fleet of simulated instances with
// configurable size, per-call latency and failure injection. It serves
// `corral serve --demo`, UI tests and benchmarks. It is never the only
// backend a feature is tested against.
package sim

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/corral-dev/corral/backends"
)

var (
	_ backends.Backend     = (*Backend)(nil)
	_ backends.Snapshotter = (*Backend)(nil)
	_ backends.Cloner      = (*Backend)(nil)
	_ backends.Tagger      = (*Backend)(nil)
	_ backends.Doctor      = (*Backend)(nil)
)

// Options configure a simulated context.
type Options struct {
	// Context names the context; default "sim".
	Context string
	// Size is the number of instances generated at construction.
	Size int
	// Latency is added to every call; the call returns early with the
	// context's error if ctx ends first.
	Latency time.Duration
	// Fail, when set, is asked before every call with the operation's name
	// ("list", "get", "create", "power", "delete", ...) and its error, if
	// any, is returned instead of doing the operation.
	Fail func(op string) error
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// RDPAddr is the "host:port" of an RDP server that every running
	// instance of a context made with NewRDP offers as its RDP console
	// (an xrdp a test started, say). New ignores it.
	RDPAddr string
}

type instance struct {
	inst      backends.Instance
	snapshots []backends.Snapshot
}

// Backend is a simulated context. It is safe for concurrent use.
type Backend struct {
	opts Options

	mu        sync.Mutex
	instances map[string]*instance // by name
	latency   time.Duration
	fail      func(string) error
}

// New returns a simulated context with opts.Size generated instances:
// deterministic names, a mix of states, CPUs and sizes.
func New(opts Options) *Backend {
	if opts.Context == "" {
		opts.Context = "sim"
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	b := &Backend{opts: opts, instances: make(map[string]*instance), latency: opts.Latency, fail: opts.Fail}
	roles := []string{"web", "db", "cache", "build", "desk", "mail", "proxy", "worker"}
	states := []backends.State{backends.StateRunning, backends.StateRunning, backends.StateStopped, backends.StateRunning, backends.StatePaused}
	for i := range opts.Size {
		name := fmt.Sprintf("%s-%s-%04d", roles[i%len(roles)], opts.Context, i)
		st := states[i%len(states)]
		in := backends.Instance{
			Ref:       b.ref(name),
			Type:      backends.TypeVM,
			State:     st,
			CPUs:      1 << (i % 4),
			MemoryMiB: 512 << (i % 5),
			DiskMiB:   10240 << (i % 3),
			Node:      fmt.Sprintf("node-%d", i%3),
			Tags:      []string{[]string{"prod", "dev", "test"}[i%3]},
			Created:   opts.Now().Add(-time.Duration(i) * time.Hour),
		}
		if st == backends.StateRunning {
			in.IP = fmt.Sprintf("10.%d.%d.%d", 1+i/65536%200, i/256%256, 1+i%254)
		}
		b.instances[name] = &instance{inst: in}
	}
	return b
}

// SetLatency changes the per-call latency; tests use it to make a context
// slow after start.
func (b *Backend) SetLatency(d time.Duration) {
	b.mu.Lock()
	b.latency = d
	b.mu.Unlock()
}

// SetFail replaces the failure injector.
func (b *Backend) SetFail(f func(op string) error) {
	b.mu.Lock()
	b.fail = f
	b.mu.Unlock()
}

func (b *Backend) ref(name string) backends.InstanceRef {
	return backends.InstanceRef{Backend: backends.KindSim, Context: b.opts.Context, Name: name}
}

// Kind implements backends.Backend.
func (b *Backend) Kind() backends.Kind { return backends.KindSim }

// Context implements backends.Backend.
func (b *Backend) Context() string { return b.opts.Context }

// enter applies latency and failure injection for op.
func (b *Backend) enter(ctx context.Context, op string) error {
	b.mu.Lock()
	lat, fail := b.latency, b.fail
	b.mu.Unlock()
	if lat > 0 {
		t := time.NewTimer(lat)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return backends.Unavailable(b.opts.Context, ctx.Err())
		case <-t.C:
		}
	}
	if fail != nil {
		if err := fail(op); err != nil {
			return err
		}
	}
	return ctx.Err()
}

func (b *Backend) lookup(ref backends.InstanceRef) (*instance, error) {
	if ref.Backend != backends.KindSim || ref.Context != b.opts.Context || ref.Peer != "" {
		return nil, backends.NotFoundf("instance %s is not in context %s", ref, b.opts.Context)
	}
	in, ok := b.instances[ref.Name]
	if !ok {
		return nil, backends.NotFoundf("instance %s does not exist", ref)
	}
	return in, nil
}

// List implements backends.Backend.
func (b *Backend) List(ctx context.Context) ([]backends.Instance, error) {
	if err := b.enter(ctx, "list"); err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]backends.Instance, 0, len(b.instances))
	for _, in := range b.instances {
		out = append(out, clone(in.inst))
	}
	slices.SortFunc(out, func(a, c backends.Instance) int { return cmp.Compare(a.Ref.Name, c.Ref.Name) })
	return out, nil
}

// Get implements backends.Backend.
func (b *Backend) Get(ctx context.Context, ref backends.InstanceRef) (backends.Instance, error) {
	if err := b.enter(ctx, "get"); err != nil {
		return backends.Instance{}, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	in, err := b.lookup(ref)
	if err != nil {
		return backends.Instance{}, err
	}
	return clone(in.inst), nil
}

// Create implements backends.Backend.
func (b *Backend) Create(ctx context.Context, spec backends.Spec) (backends.Instance, error) {
	if err := backends.ValidateName("instance", spec.Name); err != nil {
		return backends.Instance{}, err
	}
	if err := b.enter(ctx, "create"); err != nil {
		return backends.Instance{}, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.instances[spec.Name]; ok {
		return backends.Instance{}, backends.Conflictf("an instance named %s already exists in context %s", spec.Name, b.opts.Context)
	}
	in := backends.Instance{
		Ref:       b.ref(spec.Name),
		Type:      cmp.Or(spec.Type, backends.TypeVM),
		State:     backends.StateStopped,
		CPUs:      cmp.Or(spec.CPUs, 1),
		MemoryMiB: cmp.Or(spec.MemoryMiB, 512),
		DiskMiB:   cmp.Or(spec.DiskMiB, 10240),
		Tags:      slices.Clone(spec.Tags),
		Created:   b.opts.Now(),
	}
	if spec.Start {
		in.State = backends.StateRunning
	}
	b.instances[spec.Name] = &instance{inst: in}
	return clone(in), nil
}

// transitions lists, per action, the states it applies to and the state
// it leaves.
var transitions = map[backends.Action]struct {
	from []backends.State
	to   backends.State
}{
	backends.ActionStart:    {[]backends.State{backends.StateStopped}, backends.StateRunning},
	backends.ActionStop:     {[]backends.State{backends.StateRunning, backends.StatePaused}, backends.StateStopped},
	backends.ActionShutdown: {[]backends.State{backends.StateRunning}, backends.StateStopped},
	backends.ActionRestart:  {[]backends.State{backends.StateRunning}, backends.StateRunning},
	backends.ActionPause:    {[]backends.State{backends.StateRunning}, backends.StatePaused},
	backends.ActionResume:   {[]backends.State{backends.StatePaused}, backends.StateRunning},
}

// Power implements backends.Backend.
func (b *Backend) Power(ctx context.Context, ref backends.InstanceRef, action backends.Action) error {
	tr, ok := transitions[action]
	if !ok {
		return backends.Invalidf("unknown action %q", action)
	}
	if err := b.enter(ctx, "power"); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	in, err := b.lookup(ref)
	if err != nil {
		return err
	}
	if action == backends.ActionStart && in.inst.Template {
		return backends.Refuse(backends.KindSim, "start", ref.Name+" is a template: clone it and start the clone, or unmark it first")
	}
	if !slices.Contains(tr.from, in.inst.State) {
		return backends.Conflictf("cannot %s %s: it is %s", action, ref.Name, in.inst.State)
	}
	in.inst.State = tr.to
	if tr.to == backends.StateStopped {
		in.inst.IP = ""
	}
	return nil
}

// Delete implements backends.Backend.
func (b *Backend) Delete(ctx context.Context, ref backends.InstanceRef) error {
	if err := b.enter(ctx, "delete"); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, err := b.lookup(ref); err != nil {
		return err
	}
	delete(b.instances, ref.Name)
	return nil
}

func clone(in backends.Instance) backends.Instance {
	in.Tags = slices.Clone(in.Tags)
	in.Facts = slices.Clone(in.Facts)
	return in
}

// Doctor implements backends.Doctor.
func (b *Backend) Doctor(ctx context.Context) []backends.Check {
	err := b.enter(ctx, "doctor")
	c := backends.Check{Name: "simulated context answers", OK: err == nil, Message: "the simulated fleet answers"}
	if err != nil {
		c.Message = cmp.Or(backends.SafeMessage(err), "the simulated context failed")
	}
	return []backends.Check{c}
}

// SetTag implements backends.Tagger.
func (b *Backend) SetTag(ctx context.Context, ref backends.InstanceRef, tag string, on bool) error {
	if tag == "" || strings.ContainsAny(tag, " /") {
		return backends.Invalidf("tag %q is not accepted: use letters, digits and dashes", tag)
	}
	if err := b.enter(ctx, "tag"); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	in, err := b.lookup(ref)
	if err != nil {
		return err
	}
	i := slices.Index(in.inst.Tags, tag)
	switch {
	case on && i < 0:
		in.inst.Tags = append(in.inst.Tags, tag)
	case !on && i >= 0:
		in.inst.Tags = slices.Delete(in.inst.Tags, i, i+1)
	}
	return nil
}
