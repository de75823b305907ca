package ui

import (
	"net/http"
	"net/url"

	"github.com/corral-dev/corral/handlers/middleware"
	"github.com/corral-dev/corral/handlers/render"
	"github.com/corral-dev/corral/views"
)

// renderError answers a failed request. htmx 4 swaps 4xx and 5xx
// responses, so an htmx request gets the error partial aimed at #flash
// with HX-Retarget and HX-Reswap, whatever its own target was; a plain
// request gets the full error page. The message is the safe one from
// middleware.Public, never the error's own text.
func (s *server) renderError(w http.ResponseWriter, r *http.Request, err error) {
	status, msg := middleware.Public(s.Log, r, err)
	e := views.ErrorView{Status: status, StatusText: http.StatusText(status), Message: msg}
	h := w.Header()
	h.Del("HX-Trigger")
	h.Del("HX-Push-Url")
	var rerr error
	if isHTMX(r) {
		h.Set("HX-Retarget", "#flash")
		h.Set("HX-Reswap", "innerHTML")
		rerr = renderPage(w, r, status, views.ErrorPartial(e), "")
	} else {
		e.Page = views.Page{Title: e.StatusText, Assets: render.Assets(s.Assets), Self: r.URL.RequestURI(), User: s.user(r)}
		rerr = renderPage(w, r, status, views.ErrorPage(e), "")
	}
	if rerr != nil {
		s.Log.Error("ui: error page failed to render", "request_id", middleware.RequestIDFrom(r.Context()), "err", rerr)
		http.Error(w, msg, status)
	}
}

// refuse answers a request its route's rule refused. An anonymous caller
// of a page is sent to the sign-in page when OIDC is configured (htmx
// follows HX-Redirect); everything else gets the 401 or 403 error with
// its safe message.
func (s *server) refuse(w http.ResponseWriter, r *http.Request, err error) {
	if s.OIDC != nil && middleware.Status(err) == http.StatusUnauthorized && r.Method == http.MethodGet &&
		middleware.IdentityFrom(r.Context()).Rejected == "" {
		to := "/login?next=" + url.QueryEscape(r.URL.RequestURI())
		if isHTMX(r) {
			to = "/login?next=" + url.QueryEscape(localPath(r.Header.Get("HX-Current-URL")))
			w.Header().Set("HX-Redirect", to)
		}
		http.Redirect(w, r, to, http.StatusSeeOther)
		return
	}
	s.renderError(w, r, err)
}
