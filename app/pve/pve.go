// Package pve is the use case behind the Proxmox-VE-compatible API
// (handlers/pve): it maps Corral's model onto PVE's. Contexts are nodes
// (NodeName), instances are guests numbered by the registry's vmids, tasks
// are UPIDs, and callers authenticate with tickets this server signs or
// with API tokens stored hashed. Every change runs through app/instances
// or app/tasks, so it is a task with an audit row like on every surface.
package pve

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/corral-dev/corral/app/auth"
	"github.com/corral-dev/corral/app/fleet"
	"github.com/corral-dev/corral/app/instances"
	"github.com/corral-dev/corral/app/tasks"
	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/store"
)

// Store is the slice of the store the compatibility layer uses.
type Store interface {
	VMIDs(ctx context.Context) (map[string]int64, error)
	EnsureInstance(ctx context.Context, ref string) (store.Instance, error)
	ReserveVMID(ctx context.Context, ref string, vmid int64) error
	DeleteInstance(ctx context.Context, ref string) error
	PVEGuestConfigs(ctx context.Context) (map[string]string, error)
	PVEGuestConfig(ctx context.Context, ref string) (string, error)
	SetPVEGuestConfig(ctx context.Context, ref, config string) error
	DeletePVEGuest(ctx context.Context, ref string) error
	CreatePVEToken(ctx context.Context, t store.PVEToken, secret string) error
	DeletePVEToken(ctx context.Context, userid, tokenid string) error
	PVETokens(ctx context.Context, userid string) ([]store.PVEToken, error)
	VerifyPVEToken(ctx context.Context, userid, tokenid, secret string) (bool, error)
	VerifyPVEUserSecret(ctx context.Context, userid, secret string) (string, error)
	Setting(ctx context.Context, key string) (string, error)
	SetSetting(ctx context.Context, key, value string) error
	// Folders are PVE's pools (pools.go).
	Folders(ctx context.Context) ([]string, error)
	FolderMembers(ctx context.Context) ([]store.FolderMember, error)
}

// Options configure a Service.
type Options struct {
	Fleet     *fleet.Fleet
	Instances *instances.Service
	Tasks     *tasks.Manager
	Store     Store
	Policy    *auth.Policy // nil: open mode
	Log       *slog.Logger
	Now       func() time.Time
	// ClusterName is what /cluster/status and tickets call the cluster;
	// default "corral".
	ClusterName string
}

// Service answers the Proxmox API's questions from the fleet snapshot and
// the registry. It is safe for concurrent use.
type Service struct {
	Options
	key []byte // HMAC key of tickets and CSRF tokens

	mu  sync.Mutex
	idx *index

	upids sync.Map // UPID -> task id, for task ids of another shape

	vnc grants // VNC consoles granted and not yet opened (console.go)
}

// settingTicketKey names the setting that holds the ticket signing key.
const settingTicketKey = "pve.ticket_key"

// New returns a Service, creating the ticket signing key in the store's
// settings on first start.
func New(ctx context.Context, o Options) (*Service, error) {
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Policy == nil {
		o.Policy = auth.NewPolicy(nil, false)
	}
	if o.ClusterName == "" {
		o.ClusterName = "corral"
	}
	s := &Service{Options: o}
	k, err := o.Store.Setting(ctx, settingTicketKey)
	if errors.Is(err, store.ErrNotFound) {
		b := make([]byte, 32)
		_, _ = rand.Read(b)
		k = hex.EncodeToString(b)
		if err := o.Store.SetSetting(ctx, settingTicketKey, k); err != nil {
			return nil, err
		}
	} else if err != nil {
		return nil, err
	}
	if s.key, err = hex.DecodeString(k); err != nil || len(s.key) < 16 {
		return nil, fmt.Errorf("pve: setting %s is not a hex key", settingTicketKey)
	}
	return s, nil
}

// NodeName returns the PVE node name of a context key: lowercase, every
// character outside [a-z0-9-] replaced by "-" ("libvirt/test" ->
// "libvirt-test", "peer:lab/qemu/local" -> "peer-lab-qemu-local").
func NodeName(contextKey string) string {
	b := []byte(strings.ToLower(contextKey))
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			b[i] = '-'
		}
	}
	return string(b)
}

// index is the vmid and node view of one fleet snapshot.
type index struct {
	snap    *fleet.Snapshot
	vmids   []int64         // parallel to snap.Instances
	byVMID  map[int64]int   // vmid -> position in snap.Instances
	nodes   []string        // node names, in context order
	ctxOf   map[string]int  // node name -> position in snap.Contexts
	configs map[string]Conf // stored guest configurations by ref
}

// view returns the index of the current snapshot, building it when the
// snapshot changed: one query for the vmids, one for the stored
// configurations, and a registry write only for instances seen for the
// first time.
func (s *Service) view(ctx context.Context) (*index, error) {
	snap := s.Fleet.Snapshot()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.idx != nil && s.idx.snap == snap {
		return s.idx, nil
	}
	ids, err := s.Store.VMIDs(ctx)
	if err != nil {
		return nil, err
	}
	raw, err := s.Store.PVEGuestConfigs(ctx)
	if err != nil {
		return nil, err
	}
	x := &index{snap: snap, vmids: make([]int64, len(snap.Instances)), byVMID: make(map[int64]int, len(snap.Instances)),
		ctxOf: make(map[string]int, len(snap.Contexts)), configs: make(map[string]Conf, len(raw))}
	for i, c := range snap.Contexts {
		n := NodeName(c.Key)
		if _, dup := x.ctxOf[n]; dup {
			s.Log.Warn("pve: two contexts map to one node name; the second is hidden", "node", n, "context", c.Key)
			continue
		}
		x.ctxOf[n] = i
		x.nodes = append(x.nodes, n)
	}
	for ref, text := range raw {
		x.configs[ref] = parseConf(text)
	}
	for i, in := range snap.Instances {
		ref := in.Ref.String()
		id, ok := ids[ref]
		if !ok {
			e, err := s.Store.EnsureInstance(ctx, ref)
			if err != nil {
				return nil, err
			}
			id = e.VMID
		}
		x.vmids[i] = id
		x.byVMID[id] = i
	}
	s.idx = x
	return x, nil
}

// node returns the context status of a node name, or the PVE error for a
// node that does not exist.
func (x *index) node(name string) (fleet.ContextStatus, error) {
	i, ok := x.ctxOf[name]
	if !ok {
		return fleet.ContextStatus{}, &Error{Status: 500, Msg: fmt.Sprintf("hostname lookup '%s' failed - failed to get address info for: %s: Name or service not known", name, name)}
	}
	return x.snap.Contexts[i], nil
}

// Guest is one guest as the API shows it.
type Guest struct {
	VMID int64
	Node string
	In   backends.Instance
	Conf Conf // stored configuration; nil for guests created elsewhere
}

// notExist is PVE's answer for a guest that is not there; clients match
// "does not exist". typ is "qemu" or "lxc".
func notExist(node string, vmid int64, typ string) error {
	dir := "qemu-server"
	if typ == "lxc" {
		dir = "lxc"
	}
	return &Error{Status: 500, Msg: fmt.Sprintf("Configuration file 'nodes/%s/%s/%d.conf' does not exist", node, dir, vmid)}
}

// Guest returns qemu guest vmid of node (a VM) as its backend reports it
// now (a live Get, so a guest just deleted is gone even while the
// snapshot lags). A CT's vmid does not exist here, as in PVE.
func (s *Service) Guest(ctx context.Context, node string, vmid int64) (Guest, error) {
	return s.guestOf(ctx, node, vmid, "qemu")
}

// Container returns lxc guest vmid of node (a CT), like Guest.
func (s *Service) Container(ctx context.Context, node string, vmid int64) (Guest, error) {
	return s.guestOf(ctx, node, vmid, "lxc")
}

func (s *Service) guestOf(ctx context.Context, node string, vmid int64, typ string) (Guest, error) {
	x, err := s.view(ctx)
	if err != nil {
		return Guest{}, err
	}
	if _, err := x.node(node); err != nil {
		return Guest{}, err
	}
	var ref backends.InstanceRef
	if i, ok := x.byVMID[vmid]; ok {
		ref = x.snap.Instances[i].Ref
	} else {
		// Not in the snapshot (yet): the registry may know it.
		ids, err := s.Store.VMIDs(ctx)
		if err != nil {
			return Guest{}, err
		}
		for r, id := range ids {
			if id == vmid {
				ref, err = backends.ParseRef(r)
				if err != nil {
					return Guest{}, notExist(node, vmid, typ)
				}
				break
			}
		}
	}
	if ref.IsZero() || NodeName(ref.ContextKey()) != node {
		return Guest{}, notExist(node, vmid, typ)
	}
	in, err := s.Instances.Get(ctx, ref.String())
	if errors.Is(err, backends.ErrNotFound) {
		return Guest{}, notExist(node, vmid, typ)
	}
	if err != nil {
		return Guest{}, err
	}
	if (in.Type == backends.TypeCT) != (typ == "lxc") {
		return Guest{}, notExist(node, vmid, typ)
	}
	g := Guest{VMID: vmid, Node: node, In: in}
	if text, err := s.Store.PVEGuestConfig(ctx, ref.String()); err == nil {
		g.Conf = parseConf(text)
	} else if !errors.Is(err, store.ErrNotFound) {
		return Guest{}, err
	}
	return g, nil
}

// NextID returns the lowest free vmid from 100, or checks that want is
// free (PVE's "VM N already exists" otherwise).
func (s *Service) NextID(ctx context.Context, want int64) (int64, error) {
	ids, err := s.Store.VMIDs(ctx)
	if err != nil {
		return 0, err
	}
	used := make(map[int64]bool, len(ids))
	for _, id := range ids {
		used[id] = true
	}
	if x, err := s.view(ctx); err == nil {
		for _, id := range x.vmids {
			used[id] = true
		}
	}
	if want != 0 {
		if used[want] {
			return 0, ParamError("vmid", fmt.Sprintf("VM %d already exists", want))
		}
		return want, nil
	}
	for id := int64(100); ; id++ {
		if !used[id] {
			return id, nil
		}
	}
}

// Error is an answer in PVE's error shape: Status with Msg as the reason
// phrase and message, and Errors per parameter for a 400.
type Error struct {
	Status int
	Msg    string
	Errors map[string]string
}

func (e *Error) Error() string { return "pve: " + e.Msg }

// Safe marks the message as safe to show: it names only what the caller
// sent and PVE's own words.
func (e *Error) Safe() string { return e.Msg }

// ParamError is PVE's 400 "Parameter verification failed." for one
// parameter.
func ParamError(param, msg string) error {
	return &Error{Status: 400, Msg: "Parameter verification failed.", Errors: map[string]string{param: msg}}
}
