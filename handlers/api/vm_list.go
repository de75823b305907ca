package api

import (
	"net/http"
	"strconv"

	"github.com/corral-dev/corral/app/fleet"
	"github.com/corral-dev/corral/backends"
)

// vmList answers GET /api/vms from the fleet snapshot: every instance, or
// a filtered, sorted page with ?q, state, backend, context, tag, sort,
// desc, page and per_page. X-Corral-Total carries the count before paging.
func (h *handler) vmList(w http.ResponseWriter, r *http.Request) error {
	q, paged, err := parseQuery(r)
	if err != nil {
		return err
	}
	snap := h.Fleet.Snapshot()
	q.All = !paged
	page, err := snap.Query(q)
	if err != nil {
		return err
	}
	out := make([]vmJSON, 0, len(page.Instances))
	for _, in := range page.Instances {
		out = append(out, toVM(in))
	}
	setPartial(w, snap)
	w.Header().Set("X-Corral-Total", strconv.Itoa(page.Total))
	writeJSON(w, http.StatusOK, out)
	return nil
}

func parseQuery(r *http.Request) (fleet.Query, bool, error) {
	v := r.URL.Query()
	q := fleet.Query{Search: v.Get("q"), State: v.Get("state"), Backend: v.Get("backend"), Context: v.Get("context"), Tag: v.Get("tag"), Sort: v.Get("sort")}
	paged := false
	for _, p := range []struct {
		name string
		dst  *int
	}{{"page", &q.Page}, {"per_page", &q.PerPage}} {
		s := v.Get(p.name)
		if s == "" {
			continue
		}
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return q, false, backends.Invalidf("%s %q: a whole number from 1 is accepted", p.name, s)
		}
		*p.dst, paged = n, true
	}
	if s := v.Get("desc"); s != "" {
		d, err := strconv.ParseBool(s)
		if err != nil {
			return q, false, backends.Invalidf("desc %q: accepted are true and false", s)
		}
		q.Desc = d
	}
	return q, paged, nil
}
