// Package snapshot holds the backend-independent rules of snapshots:
// retention prunes only what a schedule created.
package snapshot

import (
	"cmp"
	"context"
	"slices"
	"strings"

	"github.com/corral-dev/corral/backends"
)

// AutoPrefix marks the snapshots a schedule takes. Retention deletes only
// these: a snapshot an operator named by hand is never pruned.
const AutoPrefix = "auto-"

// Prune deletes the oldest AutoPrefix snapshots of ref beyond the newest
// keep, and returns their names oldest first. It lists and deletes through
// ref alone, so two contexts with a same-named instance prune
// independently. keep < 0 is refused.
func Prune(ctx context.Context, sn backends.Snapshotter, ref backends.InstanceRef, keep int) ([]string, error) {
	if keep < 0 {
		return nil, backends.Invalidf("keep %d: a number of snapshots from 0 is accepted", keep)
	}
	list, err := sn.Snapshots(ctx, ref)
	if err != nil {
		return nil, err
	}
	var auto []backends.Snapshot
	for _, s := range list {
		if strings.HasPrefix(s.Name, AutoPrefix) {
			auto = append(auto, s)
		}
	}
	// Oldest first; the name breaks ties so equal times prune predictably.
	slices.SortFunc(auto, func(a, b backends.Snapshot) int {
		return cmp.Or(a.Created.Compare(b.Created), strings.Compare(a.Name, b.Name))
	})
	var deleted []string
	for len(auto) > keep {
		s := auto[0]
		if err := sn.DeleteSnapshot(ctx, ref, s.Name); err != nil {
			return deleted, err
		}
		deleted = append(deleted, s.Name)
		auto = auto[1:]
	}
	return deleted, nil
}
