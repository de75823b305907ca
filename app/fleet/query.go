package fleet

import (
	"cmp"
	"slices"
	"strings"

	"github.com/corral-dev/corral/backends"
)

// Query selects, sorts and pages the inventory. The zero Query returns the
// first page of everything sorted by name.
type Query struct {
	Search  string // substring of name, ref, IP, node or tag; case-insensitive
	State   string // a backends.State, or "" for all
	Backend string // a backends.Kind, or "" for all
	Context string // a context key, or "" for all
	Tag     string
	// Only, when not nil, keeps the instances whose canonical ref it
	// holds (a folder's members); an empty non-nil set keeps none.
	Only map[string]bool
	// Folder is the folder path the caller resolved into Only; the fleet
	// knows no folders and ignores it, but a query's URL names it.
	Folder  string
	Sort    string // one of SortKeys; default "name"
	Desc    bool
	Page    int // 1-based; default 1
	PerPage int // default 50, at most 500
	// All returns every match on one page (scripts that want the whole
	// list); Page and PerPage are ignored.
	All bool
}

// SortKeys lists the accepted sort keys.
var SortKeys = []string{"name", "state", "backend", "context", "cpu", "memory", "disk", "ip", "node"}

// Page is one page of a query's result.
type Page struct {
	Instances []backends.Instance
	Total     int // matching instances before paging
	Page      int
	Pages     int
	PerPage   int
	// Facets count the instances of the whole snapshot, for the filter
	// controls.
	States   map[backends.State]int
	Backends map[backends.Kind]int
	Tags     []string
}

// Normalize fills defaults and clamps the query; an unknown sort key or
// state is an Invalid error naming the accepted values.
func (q Query) Normalize() (Query, error) {
	if q.Sort == "" {
		q.Sort = "name"
	}
	if !slices.Contains(SortKeys, q.Sort) {
		return q, backends.Invalidf("unknown sort key %q: accepted are %s", q.Sort, strings.Join(SortKeys, ", "))
	}
	if q.State != "" {
		ok := false
		for _, s := range []backends.State{backends.StateRunning, backends.StateStopped, backends.StatePaused, backends.StateStarting, backends.StateStopping, backends.StateUnknown} {
			ok = ok || string(s) == q.State
		}
		if !ok {
			return q, backends.Invalidf("unknown state %q: accepted are running, stopped, paused, starting, stopping, unknown", q.State)
		}
	}
	if q.Page < 1 {
		q.Page = 1
	}
	if q.PerPage <= 0 {
		q.PerPage = 50
	}
	q.PerPage = min(q.PerPage, 500)
	return q, nil
}

// Query runs q against the snapshot.
func (s *Snapshot) Query(q Query) (Page, error) {
	q, err := q.Normalize()
	if err != nil {
		return Page{}, err
	}
	p := Page{Page: q.Page, PerPage: q.PerPage, States: map[backends.State]int{}, Backends: map[backends.Kind]int{}}
	search := strings.ToLower(strings.TrimSpace(q.Search))
	tags := map[string]bool{}
	var out []backends.Instance
	for _, in := range s.Instances {
		p.States[in.State]++
		p.Backends[in.Ref.Backend]++
		for _, t := range in.Tags {
			tags[t] = true
		}
		if q.State != "" && string(in.State) != q.State ||
			q.Backend != "" && string(in.Ref.Backend) != q.Backend ||
			q.Context != "" && in.Ref.ContextKey() != q.Context ||
			q.Tag != "" && !slices.Contains(in.Tags, q.Tag) ||
			q.Only != nil && !q.Only[in.Ref.String()] ||
			search != "" && !matches(in, search) {
			continue
		}
		out = append(out, in)
	}
	for t := range tags {
		p.Tags = append(p.Tags, t)
	}
	slices.Sort(p.Tags)
	less := comparator(q.Sort)
	slices.SortStableFunc(out, func(a, b backends.Instance) int {
		c := less(a, b)
		if c == 0 {
			c = cmp.Compare(a.Ref.Name, b.Ref.Name)
		}
		if q.Desc {
			return -c
		}
		return c
	})
	p.Total = len(out)
	if q.All {
		p.Page, p.PerPage = 1, max(1, len(out))
	}
	p.Pages = max(1, (p.Total+p.PerPage-1)/p.PerPage)
	if p.Page > p.Pages {
		p.Page = p.Pages
	}
	lo := min((p.Page-1)*p.PerPage, len(out))
	hi := min(lo+p.PerPage, len(out))
	p.Instances = out[lo:hi]
	return p, nil
}

func matches(in backends.Instance, s string) bool {
	if strings.Contains(strings.ToLower(in.Ref.Name), s) || strings.Contains(in.IP, s) ||
		strings.Contains(strings.ToLower(in.Node), s) || strings.Contains(strings.ToLower(in.Ref.Context), s) {
		return true
	}
	for _, t := range in.Tags {
		if strings.Contains(strings.ToLower(t), s) {
			return true
		}
	}
	return false
}

func comparator(key string) func(a, b backends.Instance) int {
	switch key {
	case "state":
		return func(a, b backends.Instance) int { return cmp.Compare(a.State, b.State) }
	case "backend":
		return func(a, b backends.Instance) int { return cmp.Compare(a.Ref.Backend, b.Ref.Backend) }
	case "context":
		return func(a, b backends.Instance) int { return cmp.Compare(a.Ref.ContextKey(), b.Ref.ContextKey()) }
	case "cpu":
		return func(a, b backends.Instance) int { return cmp.Compare(a.CPUs, b.CPUs) }
	case "memory":
		return func(a, b backends.Instance) int { return cmp.Compare(a.MemoryMiB, b.MemoryMiB) }
	case "disk":
		return func(a, b backends.Instance) int { return cmp.Compare(a.DiskMiB, b.DiskMiB) }
	case "ip":
		return func(a, b backends.Instance) int { return cmp.Compare(a.IP, b.IP) }
	case "node":
		return func(a, b backends.Instance) int { return cmp.Compare(a.Node, b.Node) }
	default:
		return func(a, b backends.Instance) int { return 0 } // name: the tie-breaker
	}
}
