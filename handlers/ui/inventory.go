package ui

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/corral-dev/corral/app/fleet"
	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/views"
)

// column describes a table column; sort is "" for one that cannot sort.
type column struct {
	key, label, class string
	sortable          bool
}

var columns = []column{
	{"name", "Name", "c-name", true},
	{"state", "State", "c-state", true},
	{"backend", "Backend", "c-backend", true},
	{"context", "Context", "c-context", true},
	{"cpu", "CPU", "c-num", true},
	{"memory", "Memory", "c-num", true},
	{"disk", "Disk", "c-num c-opt", true},
	{"ip", "IP", "c-ip", true},
	{"node", "Node", "c-opt", true},
	{"tags", "Tags", "c-opt", false},
}

// stateOrder is the order of the state filter's options.
var stateOrder = []backends.State{backends.StateRunning, backends.StateStopped, backends.StatePaused,
	backends.StateStarting, backends.StateStopping, backends.StateUnknown}

// inventoryModel formats one page of the query q (normalized) for the
// table, with the links that sort, page and filter it.
func inventoryModel(q fleet.Query, pg fleet.Page, snap *fleet.Snapshot) views.Inventory {
	q.Page = pg.Page
	inv := views.Inventory{Self: listURL(q), Q: q.Search, Folder: q.Folder, Desc: q.Desc, ResetURL: "/"}
	if q.Sort != "name" {
		inv.Sort = q.Sort
	}
	for _, st := range stateOrder {
		if n := pg.States[st]; n > 0 || q.State == string(st) {
			inv.States = append(inv.States, views.Option{Value: string(st), Label: fmt.Sprintf("%s (%s)", st, group(n)), Selected: q.State == string(st)})
		}
	}
	kinds := make([]string, 0, len(pg.Backends))
	for k := range pg.Backends {
		kinds = append(kinds, string(k))
	}
	slices.Sort(kinds)
	for _, k := range kinds {
		inv.Backends = append(inv.Backends, views.Option{Value: k, Label: fmt.Sprintf("%s (%s)", k, group(pg.Backends[backends.Kind(k)])), Selected: q.Backend == k})
	}
	for _, c := range snap.Contexts {
		inv.Contexts = append(inv.Contexts, views.Option{Value: c.Key, Label: c.Key, Selected: q.Context == c.Key})
	}
	for _, t := range pg.Tags {
		inv.Tags = append(inv.Tags, views.Option{Value: t, Label: t, Selected: q.Tag == t})
	}
	for _, c := range columns {
		col := views.Column{Key: c.key, Label: c.label, Class: c.class}
		if c.sortable {
			next := q
			next.Page = 1
			next.Sort, next.Desc = c.key, false
			if q.Sort == c.key {
				next.Desc = !q.Desc
				col.Sort = "ascending"
				if q.Desc {
					col.Sort = "descending"
				}
			}
			col.URL = listURL(next)
		}
		inv.Columns = append(inv.Columns, col)
	}
	inv.Rows = make([]views.Row, 0, len(pg.Instances))
	for _, in := range pg.Instances {
		inv.Rows = append(inv.Rows, row(in))
	}
	if pg.Total == 0 {
		inv.Showing = "No instances"
	} else {
		lo := (pg.Page-1)*pg.PerPage + 1
		inv.Showing = fmt.Sprintf("%s–%s of %s", group(lo), group(lo+len(pg.Instances)-1), plural(pg.Total, "instance", "instances"))
	}
	inv.PageInfo = fmt.Sprintf("page %s of %s", group(pg.Page), group(pg.Pages))
	if pg.Page > 1 {
		prev := q
		prev.Page = pg.Page - 1
		inv.PrevURL = listURL(prev)
	}
	if pg.Page < pg.Pages {
		next := q
		next.Page = pg.Page + 1
		inv.NextURL = listURL(next)
	}
	return inv
}

func row(in backends.Instance) views.Row {
	r := views.Row{
		Name:    in.Ref.Name,
		URL:     vmURL(in.Ref),
		Ref:     in.Ref.String(),
		State:   string(in.State),
		Backend: string(in.Ref.Backend),
		Context: in.Ref.ContextKey(),
		CPU:     strconv.Itoa(in.CPUs),
		Memory:  sizeOrDash(in.MemoryMiB),
		Disk:    sizeOrDash(in.DiskMiB),
		IP:      in.IP,
		Node:    in.Node,
		Tags:    strings.Join(in.Tags, ", "),
	}
	r.Template = in.Template
	return r
}
