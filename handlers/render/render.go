// Package render holds what the HTML surfaces (the dashboard and the
// console pages) share: buffered templ rendering that serves a page or,
// to htmx, one of its fragments from the same URL; the frame's asset URLs;
// and the warnings about unhealthy contexts.
package render

import (
	"net/http"

	"github.com/a-h/templ"

	"github.com/corral-dev/corral/app/fleet"
	"github.com/corral-dev/corral/static"
	"github.com/corral-dev/corral/views"
)

// IsHTMX reports whether htmx made the request.
func IsHTMX(r *http.Request) bool { return r.Header.Get("HX-Request") == "true" }

// Page writes c with status, buffered, so a failed render is a clean
// error and not half a page. An htmx request gets only fragment (when
// not ""). The same URL serves both, hence Vary: HX-Request.
func Page(w http.ResponseWriter, r *http.Request, status int, c templ.Component, fragment string) error {
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
	if fragment != "" && IsHTMX(r) {
		opts = append(opts, templ.WithFragments(fragment))
	}
	templ.Handler(c, opts...).ServeHTTP(w, r)
	if renderErr != nil {
		w.Header().Del("Content-Type")
		return renderErr
	}
	return nil
}

// Assets returns the content-hashed URLs of the frame's files.
func Assets(a *static.Assets) views.AssetURLs {
	return views.AssetURLs{
		CSS:  a.Path("app.css"),
		HTMX: a.Path("htmx.min.js"),
		SSE:  a.Path("hx-sse.min.js"),
		JS:   a.Path("app.js"),
	}
}

// Warnings names each context that is not healthy, with its safe error.
func Warnings(snap *fleet.Snapshot) []views.Warning {
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
