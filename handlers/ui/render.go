package ui

import (
	"context"
	"net/http"
	"slices"
	"strings"

	"github.com/a-h/templ"

	"github.com/corral-dev/corral/app/fleet"
	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/views"
)

// activityLimit is the number of tasks the activity panel lists.
const activityLimit = 15

// isHTMX reports whether htmx made the request.
func isHTMX(r *http.Request) bool { return r.Header.Get("HX-Request") == "true" }

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

// render writes c with status, buffered, so a failed render is a clean
// error and not half a page. An htmx request gets only fragment (when
// not ""). The same URL serves both, hence Vary: HX-Request.
func render(w http.ResponseWriter, r *http.Request, status int, c templ.Component, fragment string) error {
	w.Header().Add("Vary", "HX-Request")
	w.Header().Set("Cache-Control", "no-store")
	var renderErr error
	opts := []func(*templ.ComponentHandler){
		templ.WithStatus(status),
		templ.WithErrorHandler(func(_ *http.Request, err error) http.Handler {
			renderErr = err
			return http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
		}),
	}
	if fragment != "" && isHTMX(r) {
		opts = append(opts, templ.WithFragments(fragment))
	}
	templ.Handler(c, opts...).ServeHTTP(w, r)
	if renderErr != nil {
		w.Header().Del("Content-Type")
		return renderErr
	}
	return nil
}

// page builds the frame every page shares: asset URLs, the warnings about
// unhealthy contexts and the activity panel.
// The activity panel is read only when it will be sent: for a full page,
// or for an htmx request for the panel itself.
func (s *server) page(ctx context.Context, r *http.Request, title, fragment string) views.Page {
	p := views.Page{Title: title, Assets: s.assetURLs(), Self: r.URL.RequestURI(), User: s.user(r)}
	p.Warnings = warnings(s.Fleet.Snapshot())
	if !isHTMX(r) || fragment == "activity" {
		a := s.activityModel(ctx)
		p.Activity = &a
	}
	return p
}

func (s *server) assetURLs() views.AssetURLs {
	return views.AssetURLs{
		CSS:  s.Assets.Path("app.css"),
		HTMX: s.Assets.Path("htmx.min.js"),
		SSE:  s.Assets.Path("hx-sse.min.js"),
		JS:   s.Assets.Path("app.js"),
	}
}

// warnings names each context that is not healthy with its safe error.
func warnings(snap *fleet.Snapshot) []views.Warning {
	var out []views.Warning
	for _, c := range snap.Contexts {
		if c.Health == fleet.HealthOK || c.Health == fleet.HealthLoading {
			continue
		}
		msg := c.Error
		if msg == "" {
			msg = "no answer yet"
		}
		out = append(out, views.Warning{Context: c.Key, Health: string(c.Health), Message: msg})
	}
	return out
}

// vmURL is the dashboard page of an instance.
func vmURL(ref backends.InstanceRef) string { return "/vm/" + ref.String() }
