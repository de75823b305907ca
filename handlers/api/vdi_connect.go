package api

import (
	"net/http"

	"github.com/corral-dev/corral/handlers/middleware"
)

// connect answers GET /api/vdi/desktops/{kind}/{ns}/{member}/connect:
// the console to open (target), the others in the spec's order
// (fallbacks) and why any protocol was skipped, probed on each request;
// for the holder or an admin. 404 for a desktop without a claim, 409 for
// an expired claim or a stopped desktop.
func (v vdiAPI) connect(w http.ResponseWriter, r *http.Request) error {
	c, err := v.VDI.Connect(r.Context(), middleware.IdentityFrom(r.Context()), pathID(r, "member"))
	if err != nil {
		return err
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, c)
	return nil
}
