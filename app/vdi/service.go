package vdi

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/corral-dev/corral/app/broadcast"
	"github.com/corral-dev/corral/app/fleet"
	"github.com/corral-dev/corral/app/tasks"
	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/store"
)

// Store is the slice of the store the VDI uses: pools, members and the
// SQLite claims.
type Store interface {
	SQLStore
	CreateVDIPool(ctx context.Context, p store.VDIPool) error
	AddVDIMember(ctx context.Context, m store.VDIMember) error
	DeleteVDIMember(ctx context.Context, desktop string) error
	VDIPools(ctx context.Context) ([]store.VDIPool, error)
	VDIPool(ctx context.Context, id string) (store.VDIPool, error)
	VDIMemberByRef(ctx context.Context, ref string) (store.VDIMember, error)
	DeleteVDIPool(ctx context.Context, id string) error
	AppendAudit(ctx context.Context, e store.AuditEntry) (store.AuditEntry, error)
}

// Kube returns the clients of a KubeVirt context: the typed one for
// Leases, the dynamic one for the members' labels.
type Kube func(context string) (kubernetes.Interface, dynamic.Interface, error)

// Options configure a Service.
type Options struct {
	Fleet *fleet.Fleet
	Tasks *tasks.Manager
	Store Store
	// Kube reaches KubeVirt contexts; nil means pools on KubeVirt are
	// refused.
	Kube Kube
	// Grace is the disconnect grace (CORRAL_VDI_DISCONNECT_GRACE; 0 turns
	// disconnect reclaim off); MaxSession the maximum age of a claim
	// (CORRAL_VDI_MAX_SESSION; 0: none).
	Grace      time.Duration
	MaxSession time.Duration
	// Interval is how often the broker applies the policy; default 30 s.
	Interval time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	Log *slog.Logger
	// CT serves the CT pools (app/vdi/ctpool); nil: VM pools only.
	CT CTPools
	// Namespaces are the namespaces whose pools the broker serves
	// (CORRAL_VDI_NAMESPACES; "-" for the pools on backends without
	// namespaces); none: every registered pool. The broker's routes, its
	// desktops lists, the console session count and the policy loop leave
	// the pools of other namespaces alone; the admin's pool commands,
	// assign and unassign work on every pool (namespaces.go).
	Namespaces []string
}

// DefaultGrace is the disconnect grace when none is configured.
const DefaultGrace = 15 * time.Minute

// Service is the VDI core: pools, claims, the broker and its sessions.
// The CLI and the REST handlers call the same methods.
type Service struct {
	opts   Options
	sql    *SQLClaims
	picker *Picker

	mu     sync.Mutex
	leases map[string]*LeaseClaims // by KubeVirt context
	open   map[DesktopID]int       // open consoles, this process only
	// consoles maps the ref of an instance with open consoles to its
	// desktop, so the close finds the desktop the open counted.
	consoles map[string]DesktopID
	// lookups are the holders' console access checks not yet followed by
	// their open (consolelookup.go).
	lookups map[string]consoleLookup
	// opLocks serializes the changes of one desktop in this process
	// (a release and a reclaim of the same desktop).
	opLocks map[DesktopID]*sync.Mutex
	loads   singleflight.Group // VDIPool reads, by pool ID
	labels  singleflight.Group // KubeVirt assignment-label Lists, by context and namespace (kubelabels.go)
	hub     broadcast.Hub      // claims and pools changed (changes.go)
}

// New returns the VDI service.
func New(opts Options) *Service {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	opts.Interval = cmp.Or(opts.Interval, 30*time.Second)
	return &Service{opts: opts, sql: NewSQLClaims(opts.Store), picker: NewPicker(),
		leases: map[string]*LeaseClaims{}, open: map[DesktopID]int{}, consoles: map[string]DesktopID{}, opLocks: map[DesktopID]*sync.Mutex{}}
}

// Options returns the service's configuration (the policy's durations).
func (s *Service) Options() Options { return s.opts }

func (s *Service) now() time.Time { return s.opts.Now() }

// lock serializes the changes of one desktop in this process.
func (s *Service) lock(d DesktopID) func() {
	s.mu.Lock()
	l, ok := s.opLocks[d]
	if !ok {
		l = &sync.Mutex{}
		s.opLocks[d] = l
	}
	s.mu.Unlock()
	l.Lock()
	return l.Unlock
}

// pool is a registered pool with what its operations need.
type pool struct {
	store.VDIPool
	id     PoolID
	golden backends.InstanceRef
	b      backends.Backend
	claims ClaimStore
}

func (p *pool) desktops() []DesktopID {
	out := make([]DesktopID, len(p.Members))
	for i, m := range p.Members {
		out[i], _ = ParseDesktopID(m.Desktop)
	}
	return out
}

func (p *pool) member(d DesktopID) (store.VDIMember, backends.InstanceRef, bool) {
	for _, m := range p.Members {
		if m.Desktop == d.String() {
			ref, err := backends.ParseRef(m.Ref)
			return m, ref, err == nil
		}
	}
	return store.VDIMember{}, backends.InstanceRef{}, false
}

func (p *pool) kubevirt() bool {
	return p.golden.Backend == backends.KindKubeVirt && p.golden.Peer == ""
}

// load returns the pool with its backend and claim store. Concurrent
// loads of one pool share one read.
func (s *Service) load(ctx context.Context, id PoolID) (*pool, error) {
	v, err, _ := s.loads.Do(id.String(), func() (any, error) {
		return s.opts.Store.VDIPool(context.WithoutCancel(ctx), id.String())
	})
	row, _ := v.(store.VDIPool)
	if errors.Is(err, store.ErrNotFound) {
		return nil, backends.NotFoundf("pool %s does not exist", id)
	}
	if err != nil {
		return nil, err
	}
	return s.wrap(row)
}

// fresh reads the pool now, not through the shared load: a change of the
// pool (a resize, a delete) decides on rows read under its lock, never on
// a load begun before the previous change committed.
func (s *Service) fresh(ctx context.Context, id PoolID) (*pool, error) {
	row, err := s.opts.Store.VDIPool(ctx, id.String())
	if errors.Is(err, store.ErrNotFound) {
		return nil, backends.NotFoundf("pool %s does not exist", id)
	}
	if err != nil {
		return nil, err
	}
	return s.wrap(row)
}

// poolLock serializes the changes of one pool in this process: its
// resizes and its delete.
func (s *Service) poolLock(id PoolID) func() {
	return s.lock(DesktopID{Kind: "pool", Namespace: id.Namespace, Member: id.Pool})
}

func (s *Service) wrap(row store.VDIPool) (*pool, error) {
	id, err := ParsePoolID(row.ID)
	if err != nil {
		return nil, err
	}
	golden, err := backends.ParseRef(row.Golden)
	if err != nil {
		return nil, fmt.Errorf("vdi: pool %s: golden %q: %w", row.ID, row.Golden, err)
	}
	p := &pool{VDIPool: row, id: id, golden: golden}
	if p.b, err = s.opts.Fleet.Backend(golden); err != nil {
		return nil, err
	}
	if p.claims, err = s.claimsFor(golden); err != nil {
		return nil, err
	}
	return p, nil
}

// claimsFor returns the claim store of pools on ref's context: its
// Leases on KubeVirt, SQLite rows elsewhere.
func (s *Service) claimsFor(ref backends.InstanceRef) (ClaimStore, error) {
	if ref.Backend != backends.KindKubeVirt || ref.Peer != "" {
		return s.sql, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if l, ok := s.leases[ref.Context]; ok {
		return l, nil
	}
	if s.opts.Kube == nil {
		return nil, backends.Invalidf("context kubevirt/%s has no Kubernetes client for Leases", ref.Context)
	}
	kube, _, err := s.opts.Kube(ref.Context)
	if err != nil {
		return nil, backends.Unavailable(ref.Context, err)
	}
	l := NewLeaseClaims(kube, ref.Context)
	s.leases[ref.Context] = l
	return l, nil
}

// pools returns every registered pool; a pool whose context is gone is
// skipped with a warning, so one broken context does not hide the others.
func (s *Service) pools(ctx context.Context) ([]*pool, error) {
	rows, err := s.opts.Store.VDIPools(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]*pool, 0, len(rows))
	for _, r := range rows {
		p, err := s.wrap(r)
		if err != nil {
			s.opts.Log.Warn("vdi: pool skipped", "pool", r.ID, "err", err)
			continue
		}
		out = append(out, p)
	}
	return out, nil
}

// power performs action on ref, taking "already in that state" as done.
func (s *Service) power(ctx context.Context, b backends.Backend, ref backends.InstanceRef, action backends.Action) error {
	cctx, cancel := s.opts.Fleet.CallContext(ctx)
	defer cancel()
	err := b.Power(cctx, ref, action)
	if errors.Is(err, backends.ErrConflict) {
		in, gerr := b.Get(cctx, ref)
		if gerr == nil && (action == backends.ActionStart && in.State == backends.StateRunning ||
			action == backends.ActionStop && in.State == backends.StateStopped) {
			return nil
		}
	}
	return err
}
