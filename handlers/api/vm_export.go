package api

import (
	"net/http"
	"slices"

	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/handlers/middleware"
)

// vmExport answers GET /api/vms/{ref}/export?format=raw.gz|qcow2 with the
// disk as a streamed download (raw.gz by default when the backend offers
// it). A running VM on local QEMU is refused with a 400 before anything is
// sent; the response headers go out with the first byte of the disk.
func (h *handler) vmExport(w http.ResponseWriter, r *http.Request, text string) error {
	ref, formats, err := h.Instances.ExportFormats(text)
	if err != nil {
		return err
	}
	format := r.URL.Query().Get("format")
	if format == "" {
		format = formats[0]
		if slices.Contains(formats, "raw.gz") {
			format = "raw.gz" // spec/api.md's default
		}
	}
	if !slices.Contains(formats, format) {
		return backends.Invalidf("export format %q: accepted are %v", format, formats)
	}
	ct, file := "application/octet-stream", ref.Name+"."+format
	if format == "raw.gz" {
		ct, file = "application/gzip", ref.Name+".img.gz"
	}
	dw := &deferredWriter{w: w, header: func(h http.Header) {
		h.Set("Content-Type", ct)
		h.Set("Content-Disposition", `attachment; filename="`+file+`"`)
	}}
	_, _, err = h.Instances.Export(r.Context(), middleware.Origin(r, "rest"), text, format, dw)
	if err != nil {
		if dw.started {
			// Too late for a status: cut the stream so the client sees a
			// truncated download, not a complete-looking one.
			panic(http.ErrAbortHandler)
		}
		return err
	}
	if !dw.started { // an empty disk: still a valid, empty download
		dw.start()
	}
	return nil
}

// deferredWriter sends the response headers only with the first byte, so
// an error before any data can still become a JSON error response.
type deferredWriter struct {
	w       http.ResponseWriter
	header  func(http.Header)
	started bool
}

func (d *deferredWriter) start() {
	d.started = true
	d.header(d.w.Header())
	d.w.WriteHeader(http.StatusOK)
}

func (d *deferredWriter) Write(b []byte) (int, error) {
	if !d.started {
		d.start()
	}
	return d.w.Write(b)
}
