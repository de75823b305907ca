package proxmox

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"

	proxmox "github.com/luthermonson/go-proxmox"

	"github.com/corral-dev/corral/backends"
)

// guest is one row of GET /nodes/{node}/qemu?full=1 or .../lxc, decoded
// leniently: PVE sends numbers, some servers strings.
type guest struct {
	VMID      proxmox.StringOrUint64 `json:"vmid"`
	Name      string                 `json:"name"`
	Status    string                 `json:"status"`
	QMPStatus string                 `json:"qmpstatus"`
	Lock      string                 `json:"lock"`
	CPUs      float64                `json:"cpus"`
	MaxMem    uint64                 `json:"maxmem"`
	MaxDisk   uint64                 `json:"maxdisk"`
	Tags      string                 `json:"tags"`
	Template  proxmox.IntOrBool      `json:"template"`

	node string // set from the request, not the body
	kind string // "qemu" or "lxc": the path segment of its API
	name string // the reference's name: Name, or the vmid (see the package doc)
}

func (g *guest) vmid() int { return int(g.VMID) }

// path returns the guest's API path, "/nodes/NODE/qemu/VMID" + sub.
func (g *guest) path(sub string) string {
	p := fmt.Sprintf("/nodes/%s/%s/%d", url.PathEscape(g.node), g.kind, g.vmid())
	if sub != "" {
		p += "/" + sub
	}
	return p
}

// state maps PVE's status words: "status" is running or stopped, and for
// a running qemu guest "qmpstatus" says whether it is paused (suspend)
// or still starting (prelaunch, an incoming migration).
func (g *guest) state() backends.State {
	switch g.Status {
	case "stopped":
		return backends.StateStopped
	case "running":
		switch g.QMPStatus {
		case "", "running":
			return backends.StateRunning
		case "paused", "suspended":
			return backends.StatePaused
		case "prelaunch", "inmigrate":
			return backends.StateStarting
		}
	}
	return backends.StateUnknown
}

func (b *Backend) instance(g *guest) backends.Instance {
	in := backends.Instance{
		Ref:       backends.InstanceRef{Backend: backends.KindProxmox, Context: b.opts.Context, Namespace: g.node, Name: g.name},
		Type:      backends.TypeVM,
		State:     g.state(),
		CPUs:      int(math.Ceil(g.CPUs)), // an lxc CPU limit may be fractional
		MemoryMiB: int64(g.MaxMem >> 20),
		DiskMiB:   int64(g.MaxDisk >> 20),
		Node:      g.node,
		Facts:     []backends.Fact{{Label: "vmid", Value: strconv.Itoa(g.vmid())}},
	}
	if g.kind == "lxc" {
		in.Type = backends.TypeCT
	}
	for t := range strings.FieldsFuncSeq(g.Tags, func(r rune) bool { return r == ';' || r == ',' || r == ' ' }) {
		in.Tags = append(in.Tags, t)
	}
	if g.Template {
		in.Facts = append(in.Facts, backends.Fact{Label: "template", Value: "yes"})
	}
	if g.Lock != "" {
		in.Facts = append(in.Facts, backends.Fact{Label: "lock", Value: g.Lock})
	}
	return in
}

// nodeGuests lists the qemu and lxc guests of one node and names them.
// full=1 makes PVE report qmpstatus, so a paused guest is seen as paused.
func (b *Backend) nodeGuests(ctx context.Context, node string) ([]*guest, error) {
	var out []*guest
	for _, kind := range []string{"qemu", "lxc"} {
		var gs []*guest
		path := fmt.Sprintf("/nodes/%s/%s", url.PathEscape(node), kind)
		if kind == "qemu" {
			path += "?full=1"
		}
		if err := b.c.Get(ctx, path, &gs); err != nil {
			return nil, b.fail("list the guests of node "+node+" in", b.opts.Context, err)
		}
		for _, g := range gs {
			g.node, g.kind = node, kind
		}
		out = append(out, gs...)
	}
	nameGuests(out)
	return out, nil
}

// nameGuests sets each guest's reference name: its own name when that is
// unique on the node, its vmid otherwise (see the package doc).
func nameGuests(gs []*guest) {
	count := map[string]int{}
	for _, g := range gs {
		count[g.Name]++
	}
	for _, g := range gs {
		g.name = g.Name
		if g.Name == "" || count[g.Name] > 1 {
			g.name = strconv.Itoa(g.vmid())
		}
	}
}

// nodes returns the names of the cluster's online nodes.
func (b *Backend) nodes(ctx context.Context) ([]string, error) {
	ns, err := b.c.Nodes(ctx)
	if err != nil {
		return nil, b.fail("list the nodes of", b.opts.Context, err)
	}
	var out []string
	for _, n := range ns {
		// An offline node cannot answer for its guests; Doctor reports it.
		if n.Status == "" || n.Status == "online" {
			out = append(out, n.Node)
		}
	}
	slices.Sort(out)
	return out, nil
}

// List implements backends.Backend: GET /nodes, then per online node its
// qemu and lxc lists (no call per guest).
func (b *Backend) List(ctx context.Context) ([]backends.Instance, error) {
	nodes, err := b.nodes(ctx)
	if err != nil {
		return nil, err
	}
	var out []backends.Instance
	for _, n := range nodes {
		gs, err := b.nodeGuests(ctx, n)
		if err != nil {
			return nil, err
		}
		for _, g := range gs {
			out = append(out, b.instance(g))
		}
	}
	slices.SortFunc(out, func(x, y backends.Instance) int {
		return cmp.Or(cmp.Compare(x.Ref.Namespace, y.Ref.Namespace), cmp.Compare(x.Ref.Name, y.Ref.Name))
	})
	return out, nil
}

// Get implements backends.Backend. The state comes from status/current,
// which is exact where a list may not be.
func (b *Backend) Get(ctx context.Context, ref backends.InstanceRef) (backends.Instance, error) {
	g, err := b.lookup(ctx, ref)
	if err != nil {
		return backends.Instance{}, err
	}
	return b.instance(g), nil
}

// lookup finds the guest ref names on its node and refreshes its status.
func (b *Backend) lookup(ctx context.Context, ref backends.InstanceRef) (*guest, error) {
	missing := backends.NotFoundf("instance %s does not exist in context %s", ref, b.opts.Context)
	if ref.Backend != backends.KindProxmox || ref.Context != b.opts.Context || ref.Peer != "" || ref.Namespace == "" || ref.Name == "" {
		return nil, missing
	}
	gs, err := b.nodeGuests(ctx, ref.Namespace)
	if err != nil {
		if backends.KindOf(err) == backends.ErrNotFound { // no such node
			return nil, missing
		}
		return nil, err
	}
	i := slices.IndexFunc(gs, func(g *guest) bool { return g.name == ref.Name })
	if i < 0 {
		return nil, missing
	}
	g := gs[i]
	var cur guest
	if err := b.c.Get(ctx, g.path("status/current"), &cur); err != nil {
		return nil, b.fail("read", ref.Name, err)
	}
	g.Status, g.QMPStatus, g.Lock = cur.Status, cur.QMPStatus, cur.Lock
	return g, nil
}

// nameInUse reports whether a guest anywhere in the cluster is called
// name: one GET /cluster/resources.
func (b *Backend) nameInUse(ctx context.Context, name string) (bool, error) {
	cl := &proxmox.Cluster{}
	rs, err := cl.New(b.c).Resources(ctx, "vm")
	if err != nil {
		return false, b.fail("list the guests of", b.opts.Context, err)
	}
	return slices.ContainsFunc(rs, func(r *proxmox.ClusterResource) bool {
		return (r.Type == "qemu" || r.Type == "lxc") && r.Name == name
	}), nil
}
