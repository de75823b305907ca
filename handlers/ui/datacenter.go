package ui

import (
	"net/http"
	"net/url"
	"strconv"

	"github.com/corral-dev/corral/app/fleet"
	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/views"
)

// datacenter is GET /: the contexts tree and the inventory table. The
// query parameters (q, state, backend, context, tag, sort, desc, page)
// select the rows; an htmx request gets the region it targets.
func (s *server) datacenter(w http.ResponseWriter, r *http.Request) error {
	q, err := parseQuery(r.URL.Query())
	if err != nil {
		return err
	}
	var f *views.Folders
	if !isHTMX(r) { // htmx asks for the inventory or the contexts only
		if f, err = s.foldersModel(r, q.Folder); err != nil {
			return err
		}
	}
	return s.datacenterWith(w, r, q, f)
}

// datacenterWith renders the datacenter page for q with the folder tree f
// (nil when folders are not configured or not rendered).
func (s *server) datacenterWith(w http.ResponseWriter, r *http.Request, q fleet.Query, f *views.Folders) error {
	q, err := s.folderOnly(r.Context(), q)
	if err != nil {
		return err
	}
	snap := s.Fleet.Snapshot()
	pg, err := snap.Query(q)
	if err != nil {
		return err
	}
	q, _ = q.Normalize() // cannot fail: Query accepted it
	frag := fragmentFor(r, "inventory", "inventory", "contexts")
	d := views.Datacenter{
		Page:      s.page(r.Context(), r, "Datacenter", frag),
		Contexts:  contextRows(snap, q),
		Folders:   f,
		Inventory: inventoryModel(q, pg, snap),
	}
	return renderPage(w, r, http.StatusOK, views.DatacenterPage(d), frag)
}

// parseQuery reads the inventory parameters; a page that is not a
// positive number is Invalid. Sort and state are checked by Query.
func parseQuery(v url.Values) (fleet.Query, error) {
	q := fleet.Query{
		Search:  v.Get("q"),
		State:   v.Get("state"),
		Backend: v.Get("backend"),
		Context: v.Get("context"),
		Tag:     v.Get("tag"),
		Folder:  v.Get("folder"),
		Sort:    v.Get("sort"),
	}
	switch v.Get("desc") {
	case "", "0", "false":
	case "1", "true", "on":
		q.Desc = true
	default:
		return q, backends.Invalidf("desc %q is not accepted: use 1 or 0", v.Get("desc"))
	}
	if p := v.Get("page"); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 {
			return q, backends.Invalidf("page %q is not accepted: use a number from 1", p)
		}
		q.Page = n
	}
	return q, nil
}

// contextRows formats the tree: one row per context, with its counts,
// its health and, when it is stale or down, its safe error.
func contextRows(snap *fleet.Snapshot, q fleet.Query) []views.ContextRow {
	out := make([]views.ContextRow, 0, len(snap.Contexts))
	for _, c := range snap.Contexts {
		out = append(out, views.ContextRow{
			Key:       c.Key,
			Health:    string(c.Health),
			Healthy:   c.Health == fleet.HealthOK,
			Instances: plural(c.Count, "instance", "instances"),
			Running:   group(c.Running) + " running",
			Error:     c.Error,
			FilterURL: listURL(fleet.Query{Context: c.Key, Sort: q.Sort, Desc: q.Desc}),
			Active:    q.Context == c.Key,
		})
	}
	return out
}

// listURL is the canonical URL of a query: defaults are left out, so a
// URL names its query one way only.
func listURL(q fleet.Query) string {
	v := url.Values{}
	set := func(k, s string) {
		if s != "" {
			v.Set(k, s)
		}
	}
	set("q", q.Search)
	set("state", q.State)
	set("backend", q.Backend)
	set("context", q.Context)
	set("tag", q.Tag)
	set("folder", q.Folder)
	if q.Sort != "name" {
		set("sort", q.Sort)
	}
	if q.Desc {
		v.Set("desc", "1")
	}
	if q.Page > 1 {
		v.Set("page", strconv.Itoa(q.Page))
	}
	if len(v) == 0 {
		return "/"
	}
	return "/?" + v.Encode()
}

// group formats n with thousands separators: 10000 -> "10,000".
func group(n int) string {
	s := strconv.Itoa(n)
	if n < 0 {
		return "-" + group(-n)
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return group(n) + " " + many
}
