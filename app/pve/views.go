package pve

import (
	"context"
	"strconv"
	"strings"

	"github.com/corral-dev/corral/app/fleet"
	"github.com/corral-dev/corral/backends"
)

// Version is what GET /version reports: a PVE 8 release, the level of
// the API this layer follows (reference: docs/proxmox-api.md).
var Version = map[string]any{"version": "8.2.4", "release": "8.2", "repoid": "corral", "console": "html5"}

// Resource is one row of /cluster/resources (and of the qemu list).
// Field order and types are PVE's; integers stay integers.
type Resource struct {
	ID        string  `json:"id"`
	Type      string  `json:"type"`
	VMID      int64   `json:"vmid,omitempty"`
	Node      string  `json:"node"`
	Name      string  `json:"name,omitempty"`
	Status    string  `json:"status"`
	MaxMem    int64   `json:"maxmem"`
	Mem       int64   `json:"mem"`
	MaxCPU    int     `json:"maxcpu"`
	CPU       float64 `json:"cpu"`
	MaxDisk   int64   `json:"maxdisk"`
	Disk      int64   `json:"disk"`
	DiskRead  int64   `json:"diskread"`
	DiskWrite int64   `json:"diskwrite"`
	NetIn     int64   `json:"netin"`
	NetOut    int64   `json:"netout"`
	Uptime    int64   `json:"uptime"`
	Template  int     `json:"template"`
	Tags      string  `json:"tags,omitempty"`
	Pool      string  `json:"pool,omitempty"`
	HAState   string  `json:"hastate,omitempty"`
	Storage   string  `json:"storage,omitempty"`
	Level     string  `json:"level,omitempty"`
	Content   string  `json:"content,omitempty"`
	PluginTyp string  `json:"plugintype,omitempty"`
	Shared    *int    `json:"shared,omitempty"`

	omitSizes bool // a pool row: id, type and pool only, as PVE writes it
}

const mib = 1 << 20

// pveStatus is the PVE status word of a Corral state: PVE guests are
// running (also when paused: qmpstatus says paused) or stopped.
func pveStatus(st backends.State) string {
	switch st {
	case backends.StateRunning, backends.StatePaused, backends.StateStopping:
		return "running"
	}
	return "stopped"
}

func (s *Service) uptime(in backends.Instance) int64 {
	if pveStatus(in.State) != "running" || in.Created.IsZero() {
		return 0
	}
	return max(int64(s.Now().Sub(in.Created).Seconds()), 0)
}

// guestResource returns the row of instance i of x.
func (s *Service) guestResource(x *index, i int) Resource {
	in := x.snap.Instances[i]
	typ := "qemu"
	if in.Type == backends.TypeCT {
		typ = "lxc"
	}
	vmid := x.vmids[i]
	r := Resource{ID: typ + "/" + strconv.FormatInt(vmid, 10), Type: typ, VMID: vmid, Node: NodeName(in.Ref.ContextKey()),
		Name: in.Ref.Name, Status: pveStatus(in.State), MaxMem: in.MemoryMiB * mib, MaxCPU: in.CPUs, MaxDisk: in.DiskMiB * mib,
		Uptime: s.uptime(in), Tags: strings.Join(in.Tags, ";")}
	if in.Template { // the backend's own mark (backends.Templater)
		r.Template = 1
	}
	if c, ok := x.configs[in.Ref.String()]; ok {
		if c["template"] == "1" {
			r.Template = 1
		}
		if t := c["tags"]; t != "" {
			r.Tags = t
		}
	}
	if r.Status == "running" {
		r.Mem = r.MaxMem // no balloon statistics: a running guest holds its memory
	}
	return r
}

// Resources answers /cluster/resources from the snapshot in one pass:
// kind "" (all), "vm", "node", "storage" or "pool". A guest in a folder
// carries its pool; one query reads the folders.
func (s *Service) Resources(ctx context.Context, kind string) (Resources, error) {
	x, err := s.view(ctx)
	if err != nil {
		return nil, err
	}
	var p poolIndex
	if kind == "" || kind == "vm" || kind == "pool" { // the folders are read only when shown
		if p, err = s.pools(ctx); err != nil {
			return nil, err
		}
	}
	out := make([]Resource, 0, len(x.snap.Instances)+2*len(x.nodes)+len(p.paths))
	if kind == "" || kind == "vm" {
		for i := range x.snap.Instances {
			r := s.guestResource(x, i)
			if len(p.byRef) > 0 {
				r.Pool = p.byRef[x.snap.Instances[i].Ref.String()]
			}
			out = append(out, r)
		}
	}
	if kind == "" || kind == "pool" {
		for _, path := range p.paths {
			out = append(out, Resource{ID: "/pool/" + path, Type: "pool", Pool: path, omitSizes: true})
		}
	}
	if kind == "" || kind == "node" {
		for _, n := range x.nodes {
			out = append(out, s.nodeResource(x, n))
		}
	}
	if kind == "" || kind == "storage" {
		for _, n := range x.nodes {
			st := s.storage(x, n)
			zero := 0
			out = append(out, Resource{ID: "storage/" + n + "/local", Type: "storage", Node: n, Storage: "local", Status: "available",
				MaxDisk: st.Total, Disk: st.Used, Content: st.Content, PluginTyp: st.Type, Shared: &zero})
		}
	}
	return out, nil
}

// Guests lists the guests of node of one type ("qemu" or "lxc") as
// GET /nodes/{node}/qemu answers: template only when set.
func (s *Service) Guests(ctx context.Context, node, typ string) ([]map[string]any, error) {
	x, err := s.view(ctx)
	if err != nil {
		return nil, err
	}
	cs, err := x.node(node)
	if err != nil {
		return nil, err
	}
	out := []map[string]any{}
	for i, in := range x.snap.Instances {
		if in.Ref.ContextKey() != cs.Key {
			continue
		}
		r := s.guestResource(x, i)
		if r.Type != typ {
			continue
		}
		m := guestMap(r)
		if typ == "lxc" {
			m["type"], m["maxswap"], m["swap"] = "lxc", 0, 0
		}
		if typ == "qemu" && in.State == backends.StatePaused {
			// What PVE's list adds with full=1: status says running,
			// qmpstatus says paused.
			m["qmpstatus"] = "paused"
		}
		out = append(out, m)
	}
	return out, nil
}

func guestMap(r Resource) map[string]any {
	m := map[string]any{"vmid": r.VMID, "name": r.Name, "status": r.Status, "maxmem": r.MaxMem, "mem": r.Mem, "cpus": r.MaxCPU,
		"cpu": r.CPU, "maxdisk": r.MaxDisk, "disk": r.Disk, "uptime": r.Uptime, "netin": 0, "netout": 0, "diskread": 0, "diskwrite": 0}
	if r.Template == 1 {
		m["template"] = 1
	}
	if r.Tags != "" {
		m["tags"] = r.Tags
	}
	return m
}

// Status answers GET .../status/current (see the reference, 3.3).
func (s *Service) Status(g Guest) map[string]any {
	in := g.In
	st := pveStatus(in.State)
	qmp := st
	if in.State == backends.StatePaused {
		qmp = "paused"
	}
	m := map[string]any{"vmid": g.VMID, "name": in.Ref.Name, "status": st, "qmpstatus": qmp, "cpus": in.CPUs,
		"maxmem": in.MemoryMiB * mib, "mem": 0, "maxdisk": in.DiskMiB * mib, "disk": 0, "cpu": 0, "uptime": s.uptime(in),
		"netin": 0, "netout": 0, "diskread": 0, "diskwrite": 0, "ha": map[string]any{"managed": 0}}
	if st == "running" {
		m["mem"] = in.MemoryMiB * mib
	}
	conf := g.Config()
	if a, _ := conf["agent"].(string); a != "" && a != "0" && !strings.HasPrefix(a, "enabled=0") && !strings.HasPrefix(a, "0,") {
		m["agent"] = 1
	}
	if conf["template"] != nil {
		m["template"] = 1
	}
	if t, _ := conf["tags"].(string); t != "" {
		m["tags"] = t
	}
	return m
}

// Interfaces answers agent/network-get-interfaces from the address the
// backend reports; without one, PVE's "QEMU guest agent is not running".
func (s *Service) Interfaces(g Guest) (map[string]any, error) {
	if g.In.IP == "" || pveStatus(g.In.State) != "running" {
		return nil, &Error{Status: 500, Msg: "QEMU guest agent is not running"}
	}
	typ, prefix := "ipv4", 32 // the backend does not report the prefix
	if strings.Contains(g.In.IP, ":") {
		typ, prefix = "ipv6", 128
	}
	mac := MAC(g.In.Ref.String(), 0)
	if n := g.Config()["net0"]; n != nil {
		if _, m, ok := strings.Cut(strings.Split(n.(string), ",")[0], "="); ok {
			mac = m
		}
	}
	return map[string]any{"result": []any{
		map[string]any{"name": "lo", "hardware-address": "00:00:00:00:00:00", "ip-addresses": []any{
			map[string]any{"ip-address": "127.0.0.1", "ip-address-type": "ipv4", "prefix": 8}}},
		map[string]any{"name": "eth0", "hardware-address": strings.ToLower(mac), "ip-addresses": []any{
			map[string]any{"ip-address": g.In.IP, "ip-address-type": typ, "prefix": prefix}}},
	}}, nil
}

// nodeTotals sums a context's instances: Corral knows what its guests
// are given, not the host's capacity, so a node's maxcpu and maxmem are
// the sums of its guests' (at least 1 CPU, 1 GiB).
type nodeTotals struct {
	cpus                 int
	maxMem, mem, maxDisk int64
}

func totals(snap *fleet.Snapshot, key string) nodeTotals {
	var t nodeTotals
	for _, in := range snap.Instances {
		if in.Ref.ContextKey() != key {
			continue
		}
		t.cpus += in.CPUs
		t.maxMem += in.MemoryMiB * mib
		t.maxDisk += in.DiskMiB * mib
		if pveStatus(in.State) == "running" {
			t.mem += in.MemoryMiB * mib
		}
	}
	t.cpus = max(t.cpus, 1)
	t.maxMem = max(t.maxMem, 1<<30)
	return t
}

func (s *Service) nodeResource(x *index, n string) Resource {
	cs := x.snap.Contexts[x.ctxOf[n]]
	t := totals(x.snap, cs.Key)
	st := "online"
	if cs.Health != fleet.HealthOK {
		st = "offline"
	}
	return Resource{ID: "node/" + n, Type: "node", Node: n, Status: st, MaxCPU: t.cpus, MaxMem: t.maxMem, Mem: t.mem,
		MaxDisk: t.maxDisk, Level: ""}
}
