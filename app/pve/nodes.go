package pve

import (
	"context"
	"slices"
	"strconv"
	"strings"

	"github.com/corral-dev/corral/app/fleet"
)

// Nodes answers GET /nodes: one node per context.
func (s *Service) Nodes(ctx context.Context) ([]map[string]any, error) {
	x, err := s.view(ctx)
	if err != nil {
		return nil, err
	}
	out := []map[string]any{}
	for _, n := range x.nodes {
		r := s.nodeResource(x, n)
		out = append(out, map[string]any{"node": n, "id": r.ID, "type": "node", "status": r.Status, "level": "",
			"maxcpu": r.MaxCPU, "cpu": 0, "maxmem": r.MaxMem, "mem": r.Mem, "maxdisk": r.MaxDisk, "disk": 0, "uptime": 0,
			"ssl_fingerprint": ""})
	}
	return out, nil
}

// NodeStatus answers GET /nodes/{node}/status.
func (s *Service) NodeStatus(ctx context.Context, node string) (map[string]any, error) {
	x, err := s.view(ctx)
	if err != nil {
		return nil, err
	}
	cs, err := x.node(node)
	if err != nil {
		return nil, err
	}
	t := totals(x.snap, cs.Key)
	return map[string]any{
		"cpu": 0, "uptime": 0, "wait": 0, "idle": 0,
		"cpuinfo":    map[string]any{"cpus": t.cpus, "cores": t.cpus, "sockets": 1, "model": "Corral " + string(cs.Backend) + " context " + cs.Key, "mhz": "0", "hvm": "1", "flags": "", "user_hz": 100},
		"memory":     map[string]any{"total": t.maxMem, "used": t.mem, "free": t.maxMem - t.mem},
		"swap":       map[string]any{"total": 0, "used": 0, "free": 0},
		"rootfs":     map[string]any{"total": t.maxDisk, "used": t.maxDisk, "free": 0, "avail": 0},
		"loadavg":    []string{"0.00", "0.00", "0.00"},
		"ksm":        map[string]any{"shared": 0},
		"kversion":   "Corral",
		"pveversion": "pve-manager/" + Version["version"].(string) + "/corral",
	}, nil
}

// ClusterStatus answers GET /cluster/status: the cluster, then one entry
// per node.
func (s *Service) ClusterStatus(ctx context.Context) ([]map[string]any, error) {
	x, err := s.view(ctx)
	if err != nil {
		return nil, err
	}
	out := []map[string]any{{"type": "cluster", "id": "cluster", "name": s.ClusterName, "nodes": len(x.nodes), "quorate": 1, "version": 1}}
	for i, n := range x.nodes {
		online := 0
		if x.snap.Contexts[x.ctxOf[n]].Health == fleet.HealthOK {
			online = 1
		}
		out = append(out, map[string]any{"type": "node", "id": "node/" + n, "name": n, "nodeid": i + 1, "online": online,
			"local": 0, "ip": "127.0.0.1", "level": ""})
	}
	return out, nil
}

// Storage is the one storage of a node, "local": it holds the node's
// guest disks. Corral does not know the host's capacity, so total is
// the sum of the disks and avail is 0.
type Storage struct {
	Storage string  `json:"storage"`
	Type    string  `json:"type"`
	Content string  `json:"content"`
	Enabled int     `json:"enabled"`
	Active  int     `json:"active"`
	Shared  int     `json:"shared"`
	Total   int64   `json:"total"`
	Used    int64   `json:"used"`
	Avail   int64   `json:"avail"`
	Frac    float64 `json:"used_fraction"`
}

func (s *Service) storage(x *index, node string) Storage {
	t := totals(x.snap, x.snap.Contexts[x.ctxOf[node]].Key)
	frac := 0.0
	if t.maxDisk > 0 {
		frac = 1
	}
	return Storage{Storage: "local", Type: "dir", Content: "images,rootdir", Enabled: 1, Active: 1, Total: t.maxDisk, Used: t.maxDisk, Frac: frac}
}

// Storages answers GET /nodes/{node}/storage[?content=...].
func (s *Service) Storages(ctx context.Context, node, content string) ([]Storage, error) {
	x, err := s.view(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := x.node(node); err != nil {
		return nil, err
	}
	st := s.storage(x, node)
	for _, c := range strings.Split(content, ",") {
		if c != "" && !slices.Contains(strings.Split(st.Content, ","), c) {
			return []Storage{}, nil
		}
	}
	return []Storage{st}, nil
}

// StorageStatus answers GET /nodes/{node}/storage/{storage}/status.
func (s *Service) StorageStatus(ctx context.Context, node, name string) (Storage, error) {
	x, err := s.view(ctx)
	if err != nil {
		return Storage{}, err
	}
	if _, err := x.node(node); err != nil {
		return Storage{}, err
	}
	if name != "local" {
		return Storage{}, &Error{Status: 500, Msg: "storage '" + name + "' does not exist"}
	}
	return s.storage(x, node), nil
}

// Volume is one entry of a storage's content.
type Volume struct {
	VolID   string `json:"volid"`
	Content string `json:"content"`
	Format  string `json:"format"`
	Size    int64  `json:"size"`
	Used    int64  `json:"used,omitempty"`
	CTime   int64  `json:"ctime"`
	VMID    int64  `json:"vmid"`
	Path    string `json:"path,omitempty"`
}

// Content answers GET /nodes/{node}/storage/{storage}/content: one raw
// volume per guest disk, named as the guest's config names it.
func (s *Service) Content(ctx context.Context, node, name, content string) ([]Volume, error) {
	x, err := s.view(ctx)
	if err != nil {
		return nil, err
	}
	cs, err := x.node(node)
	if err != nil {
		return nil, err
	}
	out := []Volume{}
	if content != "" && content != "images" {
		return out, nil
	}
	for i, in := range x.snap.Instances {
		if in.Ref.ContextKey() != cs.Key || in.DiskMiB == 0 {
			continue
		}
		vol := "local:vm-" + strconv.FormatInt(x.vmids[i], 10) + "-disk-0"
		g := Guest{VMID: x.vmids[i], Node: node, In: in, Conf: x.configs[in.Ref.String()]}
		for _, kv := range g.lines() {
			if diskKey.MatchString(kv[0]) && !strings.Contains(kv[1], "media=cdrom") {
				vol, _, _ = strings.Cut(kv[1], ",")
				break
			}
		}
		st, _, _ := strings.Cut(vol, ":")
		if st != name {
			continue
		}
		out = append(out, Volume{VolID: vol, Content: "images", Format: "raw", Size: in.DiskMiB * mib, CTime: in.Created.Unix(), VMID: x.vmids[i]})
	}
	return out, nil
}

// Volume answers GET .../content/{volid}.
func (s *Service) Volume(ctx context.Context, node, name, volid string) (Volume, error) {
	list, err := s.Content(ctx, node, name, "")
	if err != nil {
		return Volume{}, err
	}
	for _, v := range list {
		if v.VolID == volid || strings.TrimPrefix(v.VolID, name+":") == volid {
			v.Used, v.Path = v.Size, "/corral/"+node+"/"+strings.TrimPrefix(v.VolID, name+":")
			return v, nil
		}
	}
	return Volume{}, &Error{Status: 500, Msg: "volume '" + volid + "' does not exist"}
}

// The privileges of PVE's Administrator and PVEAuditor roles (a superset
// of what clients check at configure time).
var (
	adminPrivs = []string{"Datastore.Allocate", "Datastore.AllocateSpace", "Datastore.AllocateTemplate", "Datastore.Audit",
		"Group.Allocate", "Mapping.Audit", "Mapping.Modify", "Mapping.Use", "Permissions.Modify", "Pool.Allocate", "Pool.Audit",
		"Realm.Allocate", "Realm.AllocateUser", "SDN.Allocate", "SDN.Audit", "SDN.Use", "Sys.Audit", "Sys.Console", "Sys.Incoming",
		"Sys.Modify", "Sys.PowerMgmt", "Sys.Syslog", "User.Modify", "VM.Allocate", "VM.Audit", "VM.Backup", "VM.Clone",
		"VM.Config.CDROM", "VM.Config.CPU", "VM.Config.Cloudinit", "VM.Config.Disk", "VM.Config.HWType", "VM.Config.Memory",
		"VM.Config.Network", "VM.Config.Options", "VM.Console", "VM.GuestAgent.Audit", "VM.GuestAgent.FileRead",
		"VM.GuestAgent.FileSystemMgmt", "VM.GuestAgent.FileWrite", "VM.GuestAgent.Unrestricted", "VM.Migrate", "VM.Monitor",
		"VM.PowerMgmt", "VM.Snapshot", "VM.Snapshot.Rollback"}
	auditPrivs = []string{"Datastore.Audit", "Mapping.Audit", "Pool.Audit", "SDN.Audit", "Sys.Audit", "VM.Audit", "VM.GuestAgent.Audit"}
)

func privs(admin bool) map[string]int {
	list := auditPrivs
	if admin {
		list = adminPrivs
	}
	m := make(map[string]int, len(list))
	for _, p := range list {
		m[p] = 1
	}
	return m
}

// caps is the cap object of a ticket, by PVE's groups of privileges.
func caps(admin bool) map[string]map[string]int {
	all := privs(admin)
	out := map[string]map[string]int{"vms": {}, "storage": {}, "access": {}, "nodes": {}, "dc": {}, "sdn": {}, "mapping": {}}
	for p, v := range all {
		g := "dc"
		switch {
		case strings.HasPrefix(p, "VM."):
			g = "vms"
		case strings.HasPrefix(p, "Datastore."):
			g = "storage"
		case strings.HasPrefix(p, "User.") || strings.HasPrefix(p, "Group.") || strings.HasPrefix(p, "Realm.") || strings.HasPrefix(p, "Permissions."):
			g = "access"
		case strings.HasPrefix(p, "Sys."):
			g = "nodes"
		case strings.HasPrefix(p, "SDN."):
			g = "sdn"
		case strings.HasPrefix(p, "Mapping."):
			g = "mapping"
		}
		out[g][p] = v
	}
	return out
}

// Permissions answers GET /access/permissions: the privileges of userid
// (the caller when empty) on "/" and, for any path asked, the same.
func (s *Service) Permissions(userid, path string) map[string]map[string]int {
	if path == "" {
		path = "/"
	}
	return map[string]map[string]int{path: privs(s.Policy.IsAdmin(userid))}
}

// Users answers GET /access/users: root@pam, the admin allowlist and the
// owners of API tokens, each enabled; tokens listed with full=1.
func (s *Service) Users(ctx context.Context, full bool, admins []string) ([]map[string]any, error) {
	toks, err := s.Tokens(ctx, "")
	if err != nil {
		return nil, err
	}
	byUser := map[string][]map[string]any{}
	users := []string{"root@pam"}
	for _, a := range admins {
		if ValidUser(a) && !slices.Contains(users, a) {
			users = append(users, a)
		}
	}
	for _, t := range toks {
		if !slices.Contains(users, t.UserID) {
			users = append(users, t.UserID)
		}
		byUser[t.UserID] = append(byUser[t.UserID], map[string]any{"tokenid": t.TokenID, "expire": 0, "privsep": 0, "comment": t.Comment})
	}
	out := []map[string]any{}
	for _, u := range users {
		e := map[string]any{"userid": u, "enable": 1, "expire": 0, "realm-type": realmType(u)}
		if full {
			e["tokens"] = append([]map[string]any{}, byUser[u]...)
		}
		if s.Policy.IsAdmin(u) {
			e["groups"] = "corral-admins"
		}
		out = append(out, e)
	}
	return out, nil
}

func realmType(userid string) string {
	_, realm, _ := strings.Cut(userid, "@")
	if realm == "pam" || realm == "pve" {
		return realm
	}
	return "openid"
}

// Roles answers GET /access/roles.
func Roles() []map[string]any {
	return []map[string]any{
		{"roleid": "Administrator", "special": 1, "privs": strings.Join(adminPrivs, ",")},
		{"roleid": "NoAccess", "special": 1, "privs": ""},
		{"roleid": "PVEAuditor", "special": 1, "privs": strings.Join(auditPrivs, ",")},
	}
}
