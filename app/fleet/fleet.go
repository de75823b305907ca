// Package fleet aggregates every configured context into one inventory. It
// fans out to the contexts in parallel with a per-context timeout and a
// circuit breaker, keeps an immutable snapshot that a background loop
// refreshes, and tells subscribers when the snapshot changes. A slow or
// dead context never delays a reader: it shows as stale or down with its
// error while the others stay current.
package fleet

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sony/gobreaker/v2"

	"github.com/corral-dev/corral/app/broadcast"
	"github.com/corral-dev/corral/backends"
)

// Health is the state of one context as the fleet last saw it.
type Health string

// The context health values.
const (
	// HealthLoading: the first refresh has not finished yet.
	HealthLoading Health = "loading"
	// HealthOK: the last refresh succeeded.
	HealthOK Health = "ok"
	// HealthStale: the last refresh failed; the instances shown are the
	// last ones the context reported.
	HealthStale Health = "stale"
	// HealthDown: the context has never answered, or its circuit is open.
	HealthDown Health = "down"
)

// ContextStatus describes one context in a snapshot.
type ContextStatus struct {
	Key         string // canonical context key, e.g. "libvirt/test"
	Peer        string
	Backend     backends.Kind
	Name        string
	Health      Health
	Error       string // safe to show; empty when healthy
	Count       int
	Running     int
	RefreshedAt time.Time // last successful refresh
	Took        time.Duration
}

// Snapshot is an immutable view of the whole fleet. Readers never lock.
type Snapshot struct {
	Version   uint64
	TakenAt   time.Time
	Instances []backends.Instance // by context key, then canonical ref
	Contexts  []ContextStatus     // sorted by key

	index map[string]int // canonical ref -> position in Instances
}

// Partial returns the keys of contexts that are not healthy, for the
// X-Corral-Partial header and the dashboard's warning.
func (s *Snapshot) Partial() []string {
	var out []string
	for _, c := range s.Contexts {
		if c.Health != HealthOK {
			out = append(out, c.Key)
		}
	}
	return out
}

// Find returns the instance with the given ref.
func (s *Snapshot) Find(ref backends.InstanceRef) (backends.Instance, bool) {
	i, ok := s.index[ref.String()]
	if !ok {
		return backends.Instance{}, false
	}
	return s.Instances[i], true
}

// Options configure a Fleet.
type Options struct {
	// Timeout bounds one call to one context; default 8 s.
	Timeout time.Duration
	// Interval is the background refresh period; default 10 s.
	Interval time.Duration
	// BreakerAfter is the number of consecutive failures that opens a
	// context's circuit; default 3. BreakerOpen is how long it stays open;
	// default 30 s.
	BreakerAfter uint32
	BreakerOpen  time.Duration
	Now          func() time.Time
	Logger       *slog.Logger
}

type member struct {
	b   backends.Backend
	key string
	cb  *gobreaker.CircuitBreaker[[]backends.Instance]

	mu         sync.Mutex
	refreshing bool
	again      bool          // a refresh was asked for while one ran: run once more
	done       chan struct{} // closed when the running refreshes end
	instances  []backends.Instance
	status     ContextStatus
	sum        uint64 // fingerprint of instances+status, to detect change
}

// Fleet is the aggregated inventory. It is safe for concurrent use.
type Fleet struct {
	opts Options

	mu      sync.RWMutex
	members map[string]*member
	order   []string

	snap    atomic.Pointer[Snapshot]
	version atomic.Uint64
	buildMu sync.Mutex

	hub broadcast.Hub
}

// New returns an empty fleet; Add contexts, then Run.
func New(opts Options) *Fleet {
	if opts.Timeout == 0 {
		opts.Timeout = 8 * time.Second
	}
	if opts.Interval == 0 {
		opts.Interval = 10 * time.Second
	}
	if opts.BreakerAfter == 0 {
		opts.BreakerAfter = 3
	}
	if opts.BreakerOpen == 0 {
		opts.BreakerOpen = 30 * time.Second
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	f := &Fleet{opts: opts, members: make(map[string]*member)}
	f.snap.Store(&Snapshot{TakenAt: opts.Now(), index: map[string]int{}})
	return f
}

// Add registers a backend context. Adding a key twice is an error.
func (f *Fleet) Add(b backends.Backend) error {
	key := backends.ContextKey("", b.Kind(), b.Context())
	f.mu.Lock()
	if _, ok := f.members[key]; ok {
		f.mu.Unlock()
		return fmt.Errorf("fleet: context %s added twice", key)
	}
	after := f.opts.BreakerAfter
	m := &member{
		b:   b,
		key: key,
		cb: gobreaker.NewCircuitBreaker[[]backends.Instance](gobreaker.Settings{
			Name:        key,
			Timeout:     f.opts.BreakerOpen,
			ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= after },
		}),
		status: ContextStatus{Key: key, Backend: b.Kind(), Name: b.Context(), Health: HealthLoading},
	}
	f.members[key] = m
	f.order = append(f.order, key)
	slices.Sort(f.order)
	f.mu.Unlock()
	f.rebuild()
	return nil
}

// Snapshot returns the current snapshot. It never blocks on a backend.
func (f *Fleet) Snapshot() *Snapshot { return f.snap.Load() }

// Backend returns the backend serving ref's context, or a NotFound error
// naming the context.
func (f *Fleet) Backend(ref backends.InstanceRef) (backends.Backend, error) {
	f.mu.RLock()
	m, ok := f.members[ref.ContextKey()]
	f.mu.RUnlock()
	if !ok {
		return nil, backends.NotFoundf("context %s is not configured", ref.ContextKey())
	}
	return m.b, nil
}

// Backends returns every configured backend in key order.
func (f *Fleet) Backends() []backends.Backend {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make([]backends.Backend, 0, len(f.order))
	for _, k := range f.order {
		out = append(out, f.members[k].b)
	}
	return out
}

// CallContext returns a context bounded by the per-context timeout, for
// one call to one backend.
func (f *Fleet) CallContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, f.opts.Timeout)
}

// Run refreshes every context at once and then every Interval until ctx
// ends. Watcher backends are also refreshed on each of their events.
func (f *Fleet) Run(ctx context.Context) {
	f.refreshAll(ctx)
	for _, b := range f.Backends() {
		if w, ok := b.(backends.Watcher); ok {
			go f.watch(ctx, w, backends.ContextKey("", b.Kind(), b.Context()))
		}
	}
	t := time.NewTicker(f.opts.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			f.refreshAll(ctx)
		}
	}
}

func (f *Fleet) watch(ctx context.Context, w backends.Watcher, key string) {
	ch, err := w.Watch(ctx)
	if err != nil {
		f.opts.Logger.Warn("fleet: watch failed; refreshing on the timer", "context", key, "err", err)
		return
	}
	for range ch {
		f.RefreshContext(ctx, key)
	}
}

// membersInOrder returns the members in key order, read under the lock
// once so that no backend call happens while it is held.
func (f *Fleet) membersInOrder() []*member {
	f.mu.RLock()
	defer f.mu.RUnlock()
	ms := make([]*member, 0, len(f.order))
	for _, k := range f.order {
		ms = append(ms, f.members[k])
	}
	return ms
}

// refreshAll starts a refresh of every context that is not refreshing
// already, without waiting: one slow context must not hold the others.
func (f *Fleet) refreshAll(ctx context.Context) {
	ms := f.membersInOrder()
	for _, m := range ms {
		go f.refresh(ctx, m)
	}
}

// Refresh refreshes every context and waits until each has answered or
// timed out. Tests and start-up use it.
func (f *Fleet) Refresh(ctx context.Context) {
	ms := f.membersInOrder()
	var wg sync.WaitGroup
	for _, m := range ms {
		wg.Go(func() { f.refresh(ctx, m) })
	}
	wg.Wait()
}

// RefreshContext refreshes one context (after a mutation, or on a watch
// event) and waits for it.
func (f *Fleet) RefreshContext(ctx context.Context, key string) {
	f.mu.RLock()
	m, ok := f.members[key]
	f.mu.RUnlock()
	if ok {
		f.refresh(ctx, m)
	}
}

func (f *Fleet) refresh(ctx context.Context, m *member) {
	m.mu.Lock()
	if m.refreshing {
		// A List that started before the caller's change may not see it:
		// ask the running refresh to list once more, and wait for that.
		m.again = true
		done := m.done
		m.mu.Unlock()
		select {
		case <-done:
		case <-ctx.Done():
		}
		return
	}
	m.refreshing = true
	m.done = make(chan struct{})
	m.mu.Unlock()
	for {
		f.refreshOnce(ctx, m)
		m.mu.Lock()
		if !m.again || ctx.Err() != nil {
			m.refreshing, m.again = false, false
			close(m.done)
			m.mu.Unlock()
			return
		}
		m.again = false
		m.mu.Unlock()
	}
}

// refreshOnce lists one context and rebuilds the snapshot when what it
// lists changed.
func (f *Fleet) refreshOnce(ctx context.Context, m *member) {
	start := f.opts.Now()
	list, err := m.cb.Execute(func() ([]backends.Instance, error) {
		cctx, cancel := context.WithTimeout(ctx, f.opts.Timeout)
		defer cancel()
		list, err := m.b.List(cctx)
		if err == nil && cctx.Err() != nil {
			err = cctx.Err()
		}
		return list, err
	})
	took := f.opts.Now().Sub(start)

	m.mu.Lock()
	st := m.status
	st.Took = took
	if err != nil {
		st.Error = f.describe(m, err)
		st.Health = HealthStale
		if st.RefreshedAt.IsZero() || errors.Is(err, gobreaker.ErrOpenState) {
			st.Health = HealthDown
		}
		if ctx.Err() == nil {
			f.opts.Logger.Warn("fleet: context refresh failed", "context", m.key, "err", err, "took", took)
		}
	} else {
		for i := range list {
			list[i].Ref.Peer = "" // a backend reports its own refs; peers set theirs
		}
		slices.SortFunc(list, func(a, b backends.Instance) int { return strings.Compare(a.Ref.String(), b.Ref.String()) })
		m.instances = list
		st.Health, st.Error, st.RefreshedAt = HealthOK, "", f.opts.Now()
		st.Count, st.Running = len(list), 0
		for _, in := range list {
			if in.State == backends.StateRunning {
				st.Running++
			}
		}
	}
	m.status = st
	sum := fingerprint(m.instances, st)
	changed := sum != m.sum
	m.sum = sum
	m.mu.Unlock()
	if changed {
		f.rebuild()
	}
}

// describe turns a refresh error into a message safe to show.
func (f *Fleet) describe(m *member, err error) string {
	switch {
	case errors.Is(err, gobreaker.ErrOpenState):
		return fmt.Sprintf("not asked: %d calls in a row failed; next try within %v", f.opts.BreakerAfter, f.opts.BreakerOpen)
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Sprintf("did not answer within %v", f.opts.Timeout)
	}
	if msg := backends.SafeMessage(err); msg != "" {
		return msg
	}
	return "the context failed; the server log has the cause"
}

func fingerprint(list []backends.Instance, st ContextStatus) uint64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "%s|%s|", st.Health, st.Error)
	for _, in := range list {
		// Every field a page or an API shows: one left out is a change
		// that never reaches the snapshot.
		fmt.Fprintf(h, "%s|%s|%s|%d|%d|%d|%s|%s|%v|%d|%t|%v;", in.Ref.String(), in.Type, in.State, in.CPUs, in.MemoryMiB, in.DiskMiB,
			in.IP, in.Node, in.Tags, in.Created.UnixNano(), in.Template, in.Facts)
	}
	return h.Sum64()
}

// rebuild composes a new snapshot from every member's latest data and
// notifies subscribers.
func (f *Fleet) rebuild() {
	f.buildMu.Lock()
	defer f.buildMu.Unlock()
	ms := f.membersInOrder()
	s := &Snapshot{Version: f.version.Add(1), TakenAt: f.opts.Now()}
	lists := make([][]backends.Instance, 0, len(ms))
	n := 0
	for _, m := range ms {
		m.mu.Lock()
		s.Contexts = append(s.Contexts, m.status)
		lists = append(lists, m.instances)
		n += len(m.instances)
		m.mu.Unlock()
	}
	// Each member's list is sorted by ref already: concatenating members in
	// key order gives the snapshot's order without sorting 10,000 rows.
	s.Instances = make([]backends.Instance, 0, n)
	s.index = make(map[string]int, n)
	for _, l := range lists {
		for _, in := range l {
			s.index[in.Ref.String()] = len(s.Instances)
			s.Instances = append(s.Instances, in)
		}
	}
	f.snap.Store(s)
	f.notify()
}

// Subscribe returns a channel that receives a value after each change
// (coalesced) and a function that ends the subscription.
func (f *Fleet) Subscribe() (<-chan struct{}, func()) { return f.hub.Subscribe() }

func (f *Fleet) notify() { f.hub.Notify() }
