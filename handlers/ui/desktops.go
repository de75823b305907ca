package ui

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/corral-dev/corral/app/vdi"
	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/handlers/middleware"
	"github.com/corral-dev/corral/views"
)

// desktops is GET /desktops: the caller's desktops and the pools; an
// admin also sees everyone's. ?notice= carries the last action's result;
// ?connect=DESKTOP shows that desktop's console in the page (the region
// #desktop-console, which Connect fetches with htmx).
func (s *server) desktops(w http.ResponseWriter, r *http.Request) error {
	frag := fragmentFor(r, "", "desktops", "desktops-live", "desktop-console")
	if frag == "desktops-live" { // the live wrapper takes the region as its content
		frag = "desktops"
	}
	p, err := s.desktopsModel(r, frag, r.URL.Query().Get("notice"))
	if err != nil {
		return err
	}
	if c := r.URL.Query().Get("connect"); c != "" && frag != "desktops" {
		p.Console = s.desktopConsole(r, c, r.URL.Query().Get("kind"))
	}
	return renderPage(w, r, http.StatusOK, views.DesktopsPage(p), frag)
}

// desktopsModel reads what the page shows; the console region is left
// empty. frag is the fragment to render ("" for the page).
func (s *server) desktopsModel(r *http.Request, frag, notice string) (views.Desktops, error) {
	ctx := r.Context()
	who := middleware.IdentityFrom(ctx)
	p := views.Desktops{Page: s.page(ctx, r, "Desktops", frag), Notice: notice, Admin: who.Admin}
	if frag == "desktop-console" {
		return p, nil // the console region reads only the connect answer
	}
	// An admin's page shows everyone's desktops too: read them once and
	// pick the caller's own from them.
	desks, err := s.VDI.Desktops(ctx, who, who.Admin)
	if err != nil {
		return p, err
	}
	mine := desks
	if who.Admin {
		mine = nil
		for _, d := range desks {
			if d.Owner == who.Login {
				mine = append(mine, d)
			}
		}
	}
	p.Mine = desktopRows(mine)
	pools, err := s.VDI.BrokerPools(ctx)
	if err != nil {
		return p, err
	}
	for _, pl := range pools {
		mode := "persistent"
		if pl.Ephemeral {
			mode = "ephemeral: a release gives the next user a fresh copy"
		}
		p.Pools = append(p.Pools, views.DesktopPoolRow{ID: pl.ID, Mode: mode, Free: fmt.Sprintf("%d of %d", pl.Free, pl.Members),
			Claimed: fmt.Sprint(pl.Claimed), CanClaim: pl.Free > 0})
	}
	if who.Admin {
		p.All = desktopRows(desks)
		if p.All == nil {
			p.All = []views.DesktopRow{}
		}
	}
	return p, nil
}

// desktopConsole is the connect answer of desktop as the console region
// shows it, with kind (a fallback the user picked) in the frame instead
// of the target. A refusal or a stopped desktop is shown in the region.
func (s *server) desktopConsole(r *http.Request, desktop, kind string) *views.DesktopConsole {
	out := &views.DesktopConsole{Desktop: desktop}
	c, err := s.VDI.Connect(r.Context(), middleware.IdentityFrom(r.Context()), desktop)
	if err != nil {
		_, out.Error = middleware.Public(s.Log, r, err)
		return out
	}
	opts := append([]vdi.ConnectOption{c.Target}, c.Fallbacks...)
	cur := opts[0]
	for _, o := range opts {
		if o.Kind == kind {
			cur = o
			break
		}
	}
	out.Protocol, out.URL, out.Tab, out.Skipped = strings.ToUpper(cur.Protocol), cur.URL+"&embed=1", cur.URL, c.Skipped
	for i, o := range opts {
		label := strings.ToUpper(o.Protocol)
		if i == 0 {
			label += " (the target)"
		} else {
			label += " (fallback)"
		}
		out.Options = append(out.Options, views.DesktopConnectOption{Label: label, Protocol: o.Protocol, Current: o == cur,
			URL: connectURL(desktop) + "&kind=" + url.QueryEscape(o.Kind)})
	}
	return out
}

// connectURL is the desktops page connected to desktop.
func connectURL(desktop string) string { return "/desktops?connect=" + url.QueryEscape(desktop) }

func desktopRows(ds []vdi.Desktop) []views.DesktopRow {
	var out []views.DesktopRow
	for _, d := range ds {
		row := views.DesktopRow{ID: d.ID, Owner: d.Owner, Phase: d.Phase, Running: d.Running, Pool: d.PoolID,
			Claimed: d.ClaimedAt.UTC().Format("2006-01-02 15:04 UTC"), Connect: connectURL(d.ID)}
		switch {
		case d.Connected:
			row.Session = "connected"
		case d.DisconnectedAt != nil:
			row.Session = "disconnected since " + d.DisconnectedAt.UTC().Format("15:04 UTC")
		}
		if d.ReclaimAt != nil {
			row.Reclaim = fmt.Sprintf("given back at %s (%s)", d.ReclaimAt.UTC().Format(time.DateTime+" UTC"), d.ReclaimReason)
		}
		if d.Expired {
			row.Session += " (claim expired)"
		}
		out = append(out, row)
	}
	return out
}

// desktopsBack answers a form of the page: a redirect to the page with a
// notice, or to htmx the #desktops region with it, and, when closeConsole,
// the console region emptied out of band.
func (s *server) desktopsBack(w http.ResponseWriter, r *http.Request, notice string, closeConsole bool) error {
	if isHTMX(r) {
		p, err := s.desktopsModel(r, "desktops", notice)
		if err != nil {
			return err
		}
		if err := renderPage(w, r, http.StatusOK, views.DesktopsPage(p), "desktops"); err != nil {
			return err
		}
		if closeConsole {
			return views.DesktopConsoleClosed().Render(r.Context(), w)
		}
		return nil
	}
	u := "/desktops"
	if notice != "" {
		u += "?notice=" + url.QueryEscape(notice)
	}
	http.Redirect(w, r, u, http.StatusSeeOther)
	return nil
}

// desktopClaim is POST /desktops/claim (pool): a desktop of the pool for
// the caller, started.
func (s *server) desktopClaim(w http.ResponseWriter, r *http.Request) error {
	pool := r.PostFormValue("pool")
	if pool == "" {
		return backends.Invalidf("no pool named: the form sends pool=vm/NAMESPACE/POOL")
	}
	d, err := s.VDI.Claim(r.Context(), middleware.IdentityFrom(r.Context()), "dashboard", pool)
	if err != nil {
		return err
	}
	notice := "You hold " + d.ID + "."
	if d.StartError != "" {
		notice = "You hold " + d.ID + ", but it did not start: " + d.StartError + " Start it again."
	}
	return s.desktopsBack(w, r, notice, false)
}

// desktopStart is POST /desktops/start (desktop).
func (s *server) desktopStart(w http.ResponseWriter, r *http.Request) error {
	d, err := s.VDI.Start(r.Context(), middleware.IdentityFrom(r.Context()), "dashboard", r.PostFormValue("desktop"))
	if err != nil {
		return err
	}
	return s.desktopsBack(w, r, d.ID+" is starting.", false)
}

// desktopRelease is POST /desktops/release (desktop, and console: the
// desktop whose console the page shows): the release runs as a task,
// shown in the activity panel; the page updates when it ends.
func (s *server) desktopRelease(w http.ResponseWriter, r *http.Request) error {
	id := r.PostFormValue("desktop")
	if id == "" {
		return backends.Invalidf("no desktop named: the form sends desktop=vm/NAMESPACE/MEMBER")
	}
	if _, err := s.VDI.Release(r.Context(), middleware.IdentityFrom(r.Context()), "dashboard", id); err != nil {
		return err
	}
	// The console region sends the desktop it shows (hx-include): its
	// console closes with the release.
	return s.desktopsBack(w, r, id+" is being released.", r.PostFormValue("console") == id)
}
