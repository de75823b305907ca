package api

import (
	"net/http"

	"github.com/corral-dev/corral/app/images"
)

// imageList answers GET /api/images: the built-in catalog. A VM can also be
// created from an http(s) URL (optionally ending in #sha256=HEX) or from
// the path of a qcow2 or raw file on the server.
func (h *handler) imageList(w http.ResponseWriter, r *http.Request) error {
	writeJSON(w, http.StatusOK, images.Catalog)
	return nil
}
