package proxmox

import (
	"context"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/corral-dev/corral/backends"
)

// consistencyKey starts the line of a snapshot's description where
// Corral records the snapshot's consistency. PVE keeps no such fact: it
// knows whether RAM was saved (vmstate), not whether the guest ran, so
// the adapter writes it at creation and reads it back.
const consistencyKey = "corral-consistency: "

// snapshot is one entry of GET .../snapshot.
type snapshot struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Snaptime    int64  `json:"snaptime"`
	Vmstate     int    `json:"vmstate"`
}

// parse returns the entry as Corral reports it. Without Corral's line,
// a snapshot with RAM (vmstate) restores the running guest with memory
// and disks that agree, reported as filesystem; anything else may have
// been taken from a running guest with nothing quiesced, so the weaker
// claim, crash, is made.
func (s snapshot) parse() backends.Snapshot {
	out := backends.Snapshot{Name: s.Name, Consistency: backends.ConsistencyCrash}
	if s.Snaptime > 0 {
		out.Created = time.Unix(s.Snaptime, 0)
	}
	if s.Vmstate != 0 {
		out.Consistency = backends.ConsistencyFilesystem
	}
	var desc []string
	for line := range strings.Lines(s.Description) {
		if v, ok := strings.CutPrefix(line, consistencyKey); ok {
			switch c := backends.Consistency(strings.TrimSpace(v)); c {
			case backends.ConsistencyOffline, backends.ConsistencyFilesystem, backends.ConsistencyCrash:
				out.Consistency = c
			}
			continue
		}
		desc = append(desc, line)
	}
	out.Description = strings.TrimSpace(strings.Join(desc, ""))
	return out
}

// snapGuest returns the qemu guest ref names; CT snapshots are refused.
func (b *Backend) snapGuest(ctx context.Context, ref backends.InstanceRef) (*guest, error) {
	g, err := b.lookup(ctx, ref)
	if err != nil {
		return nil, err
	}
	if g.kind != "qemu" {
		return nil, backends.Refuse(backends.KindProxmox, "snapshot of a CT", "take it in Proxmox VE (pct snapshot)")
	}
	return g, nil
}

func (b *Backend) snapshots(ctx context.Context, g *guest) ([]backends.Snapshot, error) {
	var list []snapshot
	if err := b.c.Get(ctx, g.path("snapshot"), &list); err != nil {
		return nil, b.fail("list the snapshots of", g.name, err)
	}
	out := make([]backends.Snapshot, 0, len(list))
	for _, s := range list {
		if s.Name != "current" { // PVE's "You are here!" entry
			out = append(out, s.parse())
		}
	}
	return out, nil
}

// Snapshots implements backends.Snapshotter.
func (b *Backend) Snapshots(ctx context.Context, ref backends.InstanceRef) ([]backends.Snapshot, error) {
	g, err := b.snapGuest(ctx, ref)
	if err != nil {
		return nil, err
	}
	return b.snapshots(ctx, g)
}

// CreateSnapshot implements backends.Snapshotter. RAM is never saved
// (vmstate=0): a stopped guest gives an offline snapshot, a running one
// a crash-consistent one, as PVE itself describes a disk-only snapshot of
// a running guest. (PVE freezes the guest's filesystems when its agent
// is enabled and running; the adapter does not check that and makes the
// weaker claim.)
func (b *Backend) CreateSnapshot(ctx context.Context, ref backends.InstanceRef, name string) (backends.Snapshot, error) {
	if err := backends.ValidateName("snapshot", name); err != nil {
		return backends.Snapshot{}, err
	}
	g, err := b.snapGuest(ctx, ref)
	if err != nil {
		return backends.Snapshot{}, err
	}
	list, err := b.snapshots(ctx, g)
	if err != nil {
		return backends.Snapshot{}, err
	}
	if slices.ContainsFunc(list, func(s backends.Snapshot) bool { return s.Name == name }) {
		return backends.Snapshot{}, backends.Conflictf("snapshot %s of %s already exists", name, ref.Name)
	}
	c := backends.ConsistencyCrash
	if g.state() == backends.StateStopped {
		c = backends.ConsistencyOffline
	}
	params := map[string]any{"snapname": name, "vmstate": 0, "description": consistencyKey + string(c)}
	if err := b.do(ctx, "POST", g.path("snapshot"), params, "snapshot", ref.Name); err != nil {
		return backends.Snapshot{}, err
	}
	return backends.Snapshot{Name: name, Created: b.opts.Now(), Consistency: c}, nil
}

// RevertSnapshot implements backends.Snapshotter. PVE stops a running
// guest to roll it back (and starts it again only with RAM saved).
func (b *Backend) RevertSnapshot(ctx context.Context, ref backends.InstanceRef, name string) error {
	g, err := b.existing(ctx, ref, name)
	if err != nil {
		return err
	}
	return b.do(ctx, "POST", g.path("snapshot/"+url.PathEscape(name)+"/rollback"), nil, "revert to snapshot "+name+" of", ref.Name)
}

// DeleteSnapshot implements backends.Snapshotter.
func (b *Backend) DeleteSnapshot(ctx context.Context, ref backends.InstanceRef, name string) error {
	g, err := b.existing(ctx, ref, name)
	if err != nil {
		return err
	}
	return b.do(ctx, "DELETE", g.path("snapshot/"+url.PathEscape(name)), nil, "delete snapshot "+name+" of", ref.Name)
}

// existing returns the guest when it has a snapshot called name, and a
// NotFound naming the snapshot otherwise (PVE's own answer names paths).
func (b *Backend) existing(ctx context.Context, ref backends.InstanceRef, name string) (*guest, error) {
	g, err := b.snapGuest(ctx, ref)
	if err != nil {
		return nil, err
	}
	list, err := b.snapshots(ctx, g)
	if err != nil {
		return nil, err
	}
	if !slices.ContainsFunc(list, func(s backends.Snapshot) bool { return s.Name == name }) {
		return nil, backends.NotFoundf("snapshot %s of %s does not exist", name, ref.Name)
	}
	return g, nil
}
