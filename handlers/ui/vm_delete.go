package ui

import (
	"net/http"

	"github.com/corral-dev/corral/app/auth"
	"github.com/corral-dev/corral/handlers/middleware"
	"github.com/corral-dev/corral/views"
)

// vmDeleteConfirm is GET /vm/{ref}/delete: a page (or, with htmx, the
// #summary region) whose form is the only way to POST the delete.
func (s *server) vmDeleteConfirm(w http.ResponseWriter, r *http.Request, text string) error {
	if !middleware.IdentityFrom(r.Context()).Admin {
		return &auth.Refusal{Kind: auth.ErrForbidden, Msg: "only admins may delete instances"}
	}
	in, err := s.Instances.Get(r.Context(), text)
	if err != nil {
		return err
	}
	frag := fragmentFor(r, "summary", "summary")
	u := vmURL(in.Ref)
	d := views.DeleteConfirm{
		Page:      s.page(r.Context(), r, "Delete "+in.Ref.Name, frag),
		Name:      in.Ref.Name,
		Ref:       in.Ref.String(),
		Context:   in.Ref.ContextKey(),
		URL:       u,
		ActionURL: u + "/delete",
	}
	return renderPage(w, r, http.StatusOK, views.VMDeletePage(d), frag)
}

// vmDelete is POST /vm/{ref}/delete: it deletes the instance as a task
// and sends the browser to the datacenter page (303, or HX-Redirect).
func (s *server) vmDelete(w http.ResponseWriter, r *http.Request, text string) error {
	if _, err := s.Instances.Delete(r.Context(), middleware.Origin(r, "dashboard"), text); err != nil {
		return err
	}
	if isHTMX(r) {
		w.Header().Set("HX-Redirect", "/")
		w.WriteHeader(http.StatusOK)
		return nil
	}
	http.Redirect(w, r, "/", http.StatusSeeOther)
	return nil
}
