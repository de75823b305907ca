package ui

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/corral-dev/corral/app/vdi"
	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/handlers/middleware"
	"github.com/corral-dev/corral/views"
)

// desktopPools is GET /desktops/pools (admins): every pool with its
// members, their power state and holder, and the create, resize and
// delete forms; to htmx (HX-Target #admin-pools) the pools region only.
func (s *server) desktopPools(w http.ResponseWriter, r *http.Request) error {
	frag := fragmentFor(r, "", "admin-pools")
	p, err := s.desktopPoolsModel(r, frag, r.URL.Query().Get("notice"))
	if err != nil {
		return err
	}
	return renderPage(w, r, http.StatusOK, views.DesktopPoolsPage(p), frag)
}

// desktopPoolsModel reads what the pools page shows.
func (s *server) desktopPoolsModel(r *http.Request, frag, notice string) (views.DesktopPools, error) {
	pools, err := s.VDI.Pools(r.Context())
	if err != nil {
		return views.DesktopPools{}, err
	}
	p := views.DesktopPools{Page: s.page(r.Context(), r, "Desktop pools", frag), Notice: notice, MaxSize: vdi.MaxPoolSize}
	for _, pl := range pools {
		mode := "persistent"
		if pl.Ephemeral {
			mode = "ephemeral"
		}
		a := views.DesktopPoolAdmin{ID: pl.ID, Golden: pl.Golden, Mode: mode, Size: len(pl.Members)}
		for _, m := range pl.Members {
			holder := "free"
			if m.Holder != "" {
				holder = m.Holder
				if m.Expired {
					holder += " (expired)"
				}
			}
			a.Members = append(a.Members, views.DesktopMemberRow{Desktop: m.Desktop, Ref: m.Ref, State: m.State, Holder: holder})
		}
		p.Pools = append(p.Pools, a)
	}
	return p, nil
}

func poolsBack(w http.ResponseWriter, r *http.Request, notice string) {
	http.Redirect(w, r, "/desktops/pools?notice="+url.QueryEscape(notice), http.StatusSeeOther)
}

// desktopPoolCreate is POST /desktops/pools (name, from, size,
// ephemeral): the clones are made before the answer (a task, "vdi pool
// create"); a failure leaves no half pool.
func (s *server) desktopPoolCreate(w http.ResponseWriter, r *http.Request) error {
	size, err := strconv.Atoi(strings.TrimSpace(r.PostFormValue("size")))
	if err != nil {
		return backends.Invalidf("size %q: accepted is a number from 1 to %d", r.PostFormValue("size"), vdi.MaxPoolSize)
	}
	eph := r.PostFormValue("ephemeral")
	if eph != "" && eph != "1" && eph != "on" {
		return backends.Invalidf("ephemeral=%q: accepted are 1 and on, or nothing", eph)
	}
	pl, err := s.VDI.CreatePool(r.Context(), middleware.Origin(r, "dashboard"), vdi.PoolRequest{
		Name: strings.TrimSpace(r.PostFormValue("name")), Golden: strings.TrimSpace(r.PostFormValue("from")), Size: size, Ephemeral: eph != ""})
	if err != nil {
		return err
	}
	poolsBack(w, r, "Pool "+pl.ID+" created with "+strconv.Itoa(len(pl.Members))+" members.")
	return nil
}

// desktopPoolDelete is POST /desktops/pools/delete (pool): every claim
// ends and every member is deleted; the golden VM is not touched.
func (s *server) desktopPoolDelete(w http.ResponseWriter, r *http.Request) error {
	id := r.PostFormValue("pool")
	if id == "" {
		return backends.Invalidf("no pool named: the form sends pool=vm/NAMESPACE/POOL")
	}
	if err := s.VDI.DeletePool(r.Context(), middleware.Origin(r, "dashboard"), id); err != nil {
		return err
	}
	poolsBack(w, r, "Pool "+id+" deleted.")
	return nil
}
