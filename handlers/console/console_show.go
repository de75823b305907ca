package console

import (
	"net/http"
	"slices"
	"strings"

	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/handlers/middleware"
	"github.com/corral-dev/corral/handlers/render"
	"github.com/corral-dev/corral/views"
)

// offer is a console kind the page can show, with its link's label.
type offer struct {
	kind  backends.ConsoleKind
	label string
}

// kinds are the console kinds the page offers, in the order of its links.
var kinds = []offer{
	{backends.ConsoleVNC, "Screen (VNC)"},
	{backends.ConsoleSerial, "Serial"},
	{backends.ConsoleRDP, "Desktop (RDP)"},
}

// consoleShow is GET /console/{ref}?kind=vnc|serial|rdp (when absent, the
// first kind of the list above the instance offers; for a stopped one,
// vnc, or serial for a CT, whose console is a shell). A stopped instance still gets its page: the console element keeps
// retrying and connects once the instance runs.
func (s *server) consoleShow(w http.ResponseWriter, r *http.Request) error {
	// ?embed=1: the page inside another page's frame (the desktops page),
	// without the dashboard's header.
	embed := r.URL.Query().Get("embed")
	if embed != "" && embed != "1" {
		return backends.Invalidf("embed=%q: accepted is 1, or nothing", embed)
	}
	kind := backends.ConsoleKind(r.URL.Query().Get("kind"))
	if kind != "" && !slices.ContainsFunc(kinds, func(k offer) bool { return k.kind == kind }) {
		return backends.Invalidf("console kind %q is not accepted: use vnc, serial or rdp", kind)
	}
	t, err := s.resolve(r, "/console/")
	if err != nil {
		return err
	}
	in, err := s.Instances.Get(r.Context(), t.ref.String())
	if err != nil {
		return err
	}
	cctx, cancel := s.Fleet.CallContext(r.Context())
	offered, err := backends.ConsolesOf(cctx, t.dialer, in)
	cancel()
	if err != nil {
		return err
	}
	if kind == "" {
		kind = backends.ConsoleVNC
		if in.Type == backends.TypeCT { // a CT has no screen: its console is a shell
			kind = backends.ConsoleSerial
		}
		for _, k := range kinds {
			if slices.Contains(offered, k.kind) {
				kind = k.kind
				break
			}
		}
	}
	c := views.Console{
		Name:    in.Ref.Name,
		Ref:     in.Ref.String(),
		Context: in.Ref.ContextKey(),
		State:   string(in.State),
		VMURL:   "/vm/" + in.Ref.String(),
		Kind:    string(kind),
		Socket:  wsURL(kind, in.Ref),
		Assets: views.ConsoleAssets{
			Script:   s.Assets.Path("console.js"),
			CSS:      s.Assets.Path("console.css"),
			RFB:      s.Assets.Path("novnc/core/rfb.js"),
			Xterm:    s.Assets.Path("xterm.mjs"),
			Fit:      s.Assets.Path("addon-fit.mjs"),
			XtermCSS: s.Assets.Path("xterm.css"),
			RDP:      s.Assets.Path("rdp.js"),
			Iron:     s.Assets.Path("iron-remote-desktop.js"),
			IronRDP:  s.Assets.Path("iron-remote-desktop-rdp.js"),
		},
	}
	if kind == backends.ConsoleRDP {
		// The RDP element asks for a token when the user connects; the
		// proxy's socket comes with the token.
		c.Socket = "/rdp-token/" + in.Ref.String()
	}
	switch {
	case len(offered) == 0:
		c.Notice = in.Ref.Name + " offers no console now (it is " + string(in.State) + "); this page connects once it runs."
	case !slices.Contains(offered, kind):
		return backends.Refuse(in.Ref.Backend, string(kind)+" console", "open another console kind of this instance")
	}
	for _, k := range kinds {
		if len(offered) > 0 && !slices.Contains(offered, k.kind) {
			continue
		}
		u := pageURL(k.kind, in.Ref)
		if embed == "1" {
			u += "&embed=1"
		}
		c.Kinds = append(c.Kinds, views.ConsoleLink{Kind: string(k.kind), Label: k.label, URL: u, Current: k.kind == kind})
	}
	frag := fragmentFor(r, "console")
	c.Page = s.page(r, "Console · "+in.Ref.Name)
	c.Page.Embed = embed == "1"
	return render.Page(w, r, http.StatusOK, views.ConsolePage(c), frag)
}

// page builds the frame of the console page: the dashboard's assets (the
// console's own are on the element) and the warnings banner, without the
// activity panel, which would take the console's width.
func (s *server) page(r *http.Request, title string) views.Page {
	return views.Page{
		Title:    title,
		Assets:   render.Assets(s.Assets),
		Self:     r.URL.RequestURI(),
		Warnings: render.Warnings(s.Fleet.Snapshot()),
		User:     user(r),
	}
}

// user is the caller as the header shows it. Whether the server runs in
// open mode is the dashboard's Policy, which this surface does not hold:
// the open-mode banner shows on the dashboard's pages.
func user(r *http.Request) views.User {
	id := middleware.IdentityFrom(r.Context())
	return views.User{Display: id.Display(), Via: string(id.Via), Admin: id.Admin}
}

// fragmentFor picks the fragment an htmx request targets (HX-Target is
// "tag#id"): the banner every page has, or def.
func fragmentFor(r *http.Request, def string) string {
	if _, id, ok := strings.Cut(r.Header.Get("HX-Target"), "#"); ok && id == "banner" {
		return id
	}
	return def
}

// renderError answers a failed page request: the error partial in #flash
// for htmx (htmx 4 swaps error responses), the error page otherwise. The
// message is the safe one, never the error's own text.
func (s *server) renderError(w http.ResponseWriter, r *http.Request, err error) {
	status, msg := middleware.Public(s.Log, r, err)
	e := views.ErrorView{Status: status, StatusText: http.StatusText(status), Message: msg}
	var rerr error
	if r.Header.Get("HX-Request") == "true" {
		w.Header().Set("HX-Retarget", "#flash")
		w.Header().Set("HX-Reswap", "innerHTML")
		rerr = render.Page(w, r, status, views.ErrorPartial(e), "")
	} else {
		e.Page = views.Page{Title: e.StatusText, Assets: s.page(r, "").Assets, Self: r.URL.RequestURI()}
		rerr = render.Page(w, r, status, views.ErrorPage(e), "")
	}
	if rerr != nil {
		s.Log.Error("console: error page failed to render", "request_id", middleware.RequestIDFrom(r.Context()), "err", rerr)
		http.Error(w, msg, status)
	}
}
