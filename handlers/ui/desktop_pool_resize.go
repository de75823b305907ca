package ui

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/corral-dev/corral/app/vdi"
	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/handlers/middleware"
	"github.com/corral-dev/corral/views"
)

// desktopPoolResize is POST /desktops/pools/resize (pool, size): the
// pool grows by clones or loses unclaimed members before the answer (a
// task, "vdi pool resize"); to htmx the #admin-pools region with the
// notice and the tasks-changed event, else a redirect to the page with
// it.
func (s *server) desktopPoolResize(w http.ResponseWriter, r *http.Request) error {
	id := r.PostFormValue("pool")
	if id == "" {
		return backends.Invalidf("no pool named: the form sends pool=vm/NAMESPACE/POOL")
	}
	size, err := strconv.Atoi(strings.TrimSpace(r.PostFormValue("size")))
	if err != nil {
		return backends.Invalidf("size %q: accepted is a number from 1 to %d", r.PostFormValue("size"), vdi.MaxPoolSize)
	}
	res, err := s.VDI.ResizePool(r.Context(), middleware.IdentityFrom(r.Context()), "dashboard", id, size)
	if err != nil {
		return err
	}
	notice := "Pool " + res.Pool + " has " + strconv.Itoa(res.To) + " members (was " + strconv.Itoa(res.From) + ")."
	if len(res.Added) > 0 {
		notice += " Added " + strings.Join(res.Added, ", ") + "."
	}
	if len(res.Removed) > 0 {
		notice += " Removed " + strings.Join(res.Removed, ", ") + "."
	}
	if !isHTMX(r) {
		poolsBack(w, r, notice)
		return nil
	}
	p, err := s.desktopPoolsModel(r, "admin-pools", notice)
	if err != nil {
		return err
	}
	w.Header().Set("HX-Trigger", tasksChanged) // the activity panel shows the resize's task
	return renderPage(w, r, http.StatusOK, views.DesktopPoolsPage(p), "admin-pools")
}
