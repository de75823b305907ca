package pve

import (
	"context"
	"slices"
)

// Pools are Corral's folders. A pool id is the folder's path as it is,
// slashes included: Proxmox VE 8.1 and later name nested pools the same
// way ("team/web"), and the API level Corral reports is 8.2. Folder
// segments ([a-z0-9][a-z0-9-._]*) are valid pool id characters, so no
// other encoding is needed. Clients that put the id in the path
// (/pools/{poolid}: go-proxmox, Telmate, proxmoxer) may send the slashes
// raw or as %2F; bpg sends it in the query (/pools?poolid=). PVE nests
// pools 3 deep and Corral folders 8: deeper folders are listed with the
// longer id. A pool's members are the folder's own instances, not its
// subfolders', as in PVE. Pools are read only here: folders are changed
// on the dashboard or the REST API.

// poolIndex is the folder tree as the API needs it: every path, and the
// folder of each instance in one.
type poolIndex struct {
	paths []string
	byRef map[string]string
}

func (s *Service) pools(ctx context.Context) (poolIndex, error) {
	paths, err := s.Store.Folders(ctx)
	if err != nil {
		return poolIndex{}, err
	}
	members, err := s.Store.FolderMembers(ctx)
	if err != nil {
		return poolIndex{}, err
	}
	p := poolIndex{paths: paths, byRef: make(map[string]string, len(members))}
	for _, m := range members {
		p.byRef[m.Ref] = m.Path
	}
	return p, nil
}

// Pools answers GET /pools: every folder, as a list that is never null.
func (s *Service) Pools(ctx context.Context) ([]map[string]any, error) {
	p, err := s.pools(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]map[string]any, 0, len(p.paths))
	for _, path := range p.paths {
		out = append(out, map[string]any{"poolid": path})
	}
	return out, nil
}

// PoolMembers answers GET /pools/{poolid} and /pools?poolid=: the
// folder's instances the fleet knows, as /cluster/resources rows (id,
// type qemu or lxc, vmid, node, name, status and the sizes), of one type
// when typ is "qemu" or "lxc". A folder that does not exist is PVE's 500
// "pool 'X' does not exist".
func (s *Service) PoolMembers(ctx context.Context, poolid, typ string) ([]map[string]any, error) {
	p, err := s.pools(ctx)
	if err != nil {
		return nil, err
	}
	if !slices.Contains(p.paths, poolid) {
		return nil, &Error{Status: 500, Msg: "pool '" + poolid + "' does not exist"}
	}
	x, err := s.view(ctx)
	if err != nil {
		return nil, err
	}
	out := []map[string]any{}
	for i, in := range x.snap.Instances {
		if p.byRef[in.Ref.String()] != poolid {
			continue
		}
		if _, ok := x.ctxOf[NodeName(in.Ref.ContextKey())]; !ok {
			continue
		}
		r := s.guestResource(x, i)
		if typ != "" && r.Type != typ {
			continue
		}
		m := guestMap(r)
		m["id"], m["type"], m["node"], m["maxcpu"] = r.ID, r.Type, r.Node, r.MaxCPU
		delete(m, "cpus")
		m["template"] = r.Template
		m["pool"] = poolid
		out = append(out, m)
	}
	return out, nil
}
