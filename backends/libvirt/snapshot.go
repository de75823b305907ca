package libvirt

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"libvirt.org/go/libvirt"
	"libvirt.org/go/libvirtxml"

	"github.com/corral-dev/corral/backends"
)

// Snapshots are libvirt's internal snapshots only: the disk state and, for
// a running domain, its memory live inside the qcow2 image. External
// (--disk-only) snapshots leave overlays that later deletes cannot merge
// back, so Corral never makes them.

// Snapshots implements backends.Snapshotter, oldest first.
func (b *Backend) Snapshots(ctx context.Context, ref backends.InstanceRef) ([]backends.Snapshot, error) {
	d, err := b.lookup(ctx, ref)
	if err != nil {
		return nil, err
	}
	defer d.Free()
	snaps, err := d.ListAllSnapshots(0)
	if err != nil {
		return nil, b.fail("list the snapshots of", ref.Name, err)
	}
	defer func() {
		for i := range snaps {
			_ = snaps[i].Free()
		}
	}()
	out := make([]backends.Snapshot, 0, len(snaps))
	for i := range snaps {
		s, err := readSnapshot(&snaps[i])
		if err != nil {
			if isCode(err, libvirt.ERR_NO_DOMAIN_SNAPSHOT) {
				continue // deleted while we listed
			}
			return nil, b.fail("read the snapshots of", ref.Name, err)
		}
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, c backends.Snapshot) int {
		return cmp.Or(a.Created.Compare(c.Created), cmp.Compare(a.Name, c.Name))
	})
	return out, nil
}

// CreateSnapshot implements backends.Snapshotter. libvirt records the
// domain's state in the snapshot; a stopped domain gives an offline
// snapshot, a running or paused one a crash-consistent one (nothing in
// the guest is quiesced).
func (b *Backend) CreateSnapshot(ctx context.Context, ref backends.InstanceRef, name string) (backends.Snapshot, error) {
	if err := backends.ValidateName("snapshot", name); err != nil {
		return backends.Snapshot{}, err
	}
	d, err := b.lookup(ctx, ref)
	if err != nil {
		return backends.Snapshot{}, err
	}
	defer d.Free()
	what := snapshotName(name, ref.Name)
	// libvirt reports a clash as a generic operation failure: check first.
	if s, err := d.SnapshotLookupByName(name, 0); err == nil {
		_ = s.Free()
		return backends.Snapshot{}, backends.Conflictf("snapshot %s already exists", what)
	} else if !isCode(err, libvirt.ERR_NO_DOMAIN_SNAPSHOT) {
		return backends.Snapshot{}, b.fail("look up snapshot", what, err)
	}
	doc, err := (&libvirtxml.DomainSnapshot{Name: name}).Marshal()
	if err != nil {
		return backends.Snapshot{}, b.fail("describe snapshot", what, err)
	}
	s, err := d.CreateSnapshotXML(doc, 0)
	if err != nil {
		return backends.Snapshot{}, b.fail("take snapshot", what, err)
	}
	defer s.Free()
	out, err := readSnapshot(s)
	if err != nil {
		return backends.Snapshot{}, b.fail("read snapshot", what, err)
	}
	return out, nil
}

// RevertSnapshot implements backends.Snapshotter. The domain returns to
// the state the snapshot recorded: running, paused or stopped.
func (b *Backend) RevertSnapshot(ctx context.Context, ref backends.InstanceRef, name string) error {
	return b.withSnapshot(ctx, ref, name, "revert to snapshot", func(s *libvirt.DomainSnapshot) error {
		return s.RevertToSnapshot(0)
	})
}

// DeleteSnapshot implements backends.Snapshotter. Only this snapshot goes;
// its children are re-parented by libvirt.
func (b *Backend) DeleteSnapshot(ctx context.Context, ref backends.InstanceRef, name string) error {
	return b.withSnapshot(ctx, ref, name, "delete snapshot", func(s *libvirt.DomainSnapshot) error {
		return s.Delete(0)
	})
}

func (b *Backend) withSnapshot(ctx context.Context, ref backends.InstanceRef, name, op string, f func(*libvirt.DomainSnapshot) error) error {
	d, err := b.lookup(ctx, ref)
	if err != nil {
		return err
	}
	defer d.Free()
	what := snapshotName(name, ref.Name)
	s, err := d.SnapshotLookupByName(name, 0)
	if err != nil {
		return b.fail(op, what, err)
	}
	defer s.Free()
	if err := f(s); err != nil {
		return b.fail(op, what, err)
	}
	return nil
}

// snapshotName is how messages name a snapshot: "before of web".
func snapshotName(snap, dom string) string { return fmt.Sprintf("%s of %s", snap, dom) }

// readSnapshot reports s from its XML.
func readSnapshot(s *libvirt.DomainSnapshot) (backends.Snapshot, error) {
	doc, err := s.GetXMLDesc(0)
	if err != nil {
		return backends.Snapshot{}, err
	}
	var def libvirtxml.DomainSnapshot
	if err := def.Unmarshal(doc); err != nil {
		return backends.Snapshot{}, fmt.Errorf("libvirt: snapshot XML: %w", err)
	}
	out := backends.Snapshot{Name: def.Name, Description: def.Description, Consistency: consistencyOf(def.State)}
	if sec, err := strconv.ParseInt(def.CreationTime, 10, 64); err == nil {
		out.Created = time.Unix(sec, 0).UTC()
	}
	return out, nil
}

// consistencyOf maps the domain state a snapshot recorded to what it
// captured. Only a domain that was off is offline-consistent; anything
// else, including a state this code does not know, claims the weakest
// level rather than a better one it cannot vouch for.
func consistencyOf(state string) backends.Consistency {
	if state == "shutoff" {
		return backends.ConsistencyOffline
	}
	return backends.ConsistencyCrash
}
