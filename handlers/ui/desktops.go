package ui

import (
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/corral-dev/corral/app/vdi"
	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/handlers/middleware"
	"github.com/corral-dev/corral/views"
)

// desktops is GET /desktops: the caller's desktops and the pools; an
// admin also sees everyone's. ?notice= carries the last action's result.
func (s *server) desktops(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	who := middleware.IdentityFrom(ctx)
	mine, err := s.VDI.Desktops(ctx, who, false)
	if err != nil {
		return err
	}
	pools, err := s.VDI.BrokerPools(ctx)
	if err != nil {
		return err
	}
	p := views.Desktops{Page: s.page(ctx, r, "Desktops", ""), Mine: desktopRows(mine, s.VDI.Options().Now), Notice: r.URL.Query().Get("notice")}
	for _, pl := range pools {
		mode := "persistent"
		if pl.Ephemeral {
			mode = "ephemeral: a release gives the next user a fresh copy"
		}
		p.Pools = append(p.Pools, views.DesktopPoolRow{ID: pl.ID, Mode: mode, Free: fmt.Sprintf("%d of %d", pl.Free, pl.Members),
			Claimed: fmt.Sprint(pl.Claimed), CanClaim: pl.Free > 0})
	}
	if who.Admin {
		all, err := s.VDI.Desktops(ctx, who, true)
		if err != nil {
			return err
		}
		p.All = desktopRows(all, s.VDI.Options().Now)
		if p.All == nil {
			p.All = []views.DesktopRow{}
		}
	}
	return renderPage(w, r, http.StatusOK, views.DesktopsPage(p), "")
}

func desktopRows(ds []vdi.Desktop, now func() time.Time) []views.DesktopRow {
	var out []views.DesktopRow
	for _, d := range ds {
		row := views.DesktopRow{ID: d.ID, Owner: d.Owner, Phase: d.Phase, Running: d.Running,
			Claimed: d.ClaimedAt.Local().Format("2006-01-02 15:04")}
		switch {
		case d.Connected:
			row.Session = "connected"
		case d.DisconnectedAt != nil:
			row.Session = "disconnected since " + d.DisconnectedAt.Local().Format("15:04")
		}
		if d.ReclaimAt != nil {
			row.Reclaim = fmt.Sprintf("given back at %s (%s)", d.ReclaimAt.Local().Format("2006-01-02 15:04"), d.ReclaimReason)
		}
		if d.Expired {
			row.Session += " (claim expired)"
		}
		out = append(out, row)
	}
	return out
}

// desktopsBack redirects to the desktops page with a notice.
func desktopsBack(w http.ResponseWriter, r *http.Request, notice string) {
	u := "/desktops"
	if notice != "" {
		u += "?notice=" + url.QueryEscape(notice)
	}
	http.Redirect(w, r, u, http.StatusSeeOther)
}

// desktopClaim is POST /desktops/claim (pool): a desktop of the pool for
// the caller, started.
func (s *server) desktopClaim(w http.ResponseWriter, r *http.Request) error {
	d, err := s.VDI.Claim(r.Context(), middleware.IdentityFrom(r.Context()), "dashboard", r.PostFormValue("pool"))
	if err != nil {
		return err
	}
	notice := "You hold " + d.ID + "."
	if d.StartError != "" {
		notice = "You hold " + d.ID + ", but it did not start: " + d.StartError + " Start it again."
	}
	desktopsBack(w, r, notice)
	return nil
}

// desktopStart is POST /desktops/start (desktop).
func (s *server) desktopStart(w http.ResponseWriter, r *http.Request) error {
	d, err := s.VDI.Start(r.Context(), middleware.IdentityFrom(r.Context()), "dashboard", r.PostFormValue("desktop"))
	if err != nil {
		return err
	}
	desktopsBack(w, r, d.ID+" is starting.")
	return nil
}

// desktopRelease is POST /desktops/release (desktop): the release runs
// as a task, shown in the activity panel.
func (s *server) desktopRelease(w http.ResponseWriter, r *http.Request) error {
	id := r.PostFormValue("desktop")
	if id == "" {
		return backends.Invalidf("no desktop named: the form sends desktop=vm/NAMESPACE/MEMBER")
	}
	if _, err := s.VDI.Release(r.Context(), middleware.IdentityFrom(r.Context()), "dashboard", id); err != nil {
		return err
	}
	desktopsBack(w, r, id+" is being released.")
	return nil
}
