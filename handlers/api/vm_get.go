package api

import (
	"net/http"
)

// vmGet answers GET /api/vms/{ref}: the instance as its backend reports it
// now. {ref} is a canonical ref or an unambiguous bare name.
func (h *handler) vmGet(w http.ResponseWriter, r *http.Request) error {
	in, err := h.Instances.Get(r.Context(), refPath(r, "/vms/"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, toVM(in))
	return nil
}
