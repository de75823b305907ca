package api

import (
	"net/http"
	"strings"

	"github.com/corral-dev/corral/backends"
)

// splitVM returns the instance named after /vms/ and the sub-path after
// it, e.g. ("libvirt/lab/-/web", "snapshots/s1/restore").
func splitVM(r *http.Request) (ref, rest string, err error) {
	return backends.SplitRefPath(refPath(r, "/vms/"))
}

// vmGet answers GET /api/vms/{ref} (the instance as its backend reports it
// now; {ref} is a canonical ref or an unambiguous bare name) and
// GET /api/vms/{ref}/snapshots.
func (h *handler) vmGet(w http.ResponseWriter, r *http.Request) error {
	ref, rest, err := splitVM(r)
	if err != nil {
		return err
	}
	switch rest {
	case "":
	case "snapshots":
		return h.snapshotList(w, r, ref)
	default:
		return backends.NotFoundf("no such API route: GET /api/vms/{ref}/%s (accepted: snapshots, export)", rest)
	}
	in, err := h.Instances.Get(r.Context(), ref)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, toVM(in))
	return nil
}

// vmExportRoute answers GET /api/vms/{ref}/export, a route of its own
// because downloading a disk is privileged although it is a GET.
func (h *handler) vmExportRoute(w http.ResponseWriter, r *http.Request) error {
	ref, rest, err := splitVM(r)
	if err != nil {
		return err
	}
	if rest != "export" {
		return backends.NotFoundf("no such API route")
	}
	return h.vmExport(w, r, ref)
}

// subPath splits a sub-path such as "snapshots/s1/restore" into its parts.
func subPath(rest string) []string {
	if rest == "" {
		return nil
	}
	return strings.Split(rest, "/")
}
