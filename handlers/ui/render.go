package ui

import (
	"context"
	"net/http"
	"slices"
	"strings"

	"github.com/a-h/templ"

	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/handlers/render"
	"github.com/corral-dev/corral/views"
)

// activityLimit is the number of tasks the activity panel lists.
const activityLimit = 15

// isHTMX reports whether htmx made the request.
func isHTMX(r *http.Request) bool { return render.IsHTMX(r) }

// fragmentFor picks the fragment an htmx request asks for: the id of its
// target (HX-Target is "tag#id") when the page has a fragment of that
// name, else def. The regions every page has (banner, activity) are always
// allowed.
func fragmentFor(r *http.Request, def string, fragments ...string) string {
	_, id, ok := strings.Cut(r.Header.Get("HX-Target"), "#")
	if ok && (id == "banner" || id == "activity" || slices.Contains(fragments, id)) {
		return id
	}
	return def
}

// renderPage writes a page or, to htmx, its fragment (see render.Page).
func renderPage(w http.ResponseWriter, r *http.Request, status int, c templ.Component, fragment string) error {
	return render.Page(w, r, status, c, fragment)
}

// page builds the frame every page shares: asset URLs, the warnings about
// unhealthy contexts and the activity panel.
// The activity panel is read only when it will be sent: for a full page,
// or for an htmx request for the panel itself.
func (s *server) page(ctx context.Context, r *http.Request, title, fragment string) views.Page {
	p := views.Page{Title: title, Assets: render.Assets(s.Assets), Self: r.URL.RequestURI(), User: s.user(r), Desktops: s.VDI != nil}
	p.Warnings = render.Warnings(s.Fleet.Snapshot())
	if !isHTMX(r) || fragment == "activity" {
		a := s.activityModel(ctx)
		p.Activity = &a
	}
	return p
}

// vmURL is the dashboard page of an instance.
func vmURL(ref backends.InstanceRef) string { return "/vm/" + ref.String() }
