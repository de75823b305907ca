package api

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/handlers/middleware"
)

// vdiAPI is the self-service broker under /api/vdi (spec/vdi.md); its
// routes are in routes.go, each for signed-in users only. The caller is
// only ever the identity of the request pipeline: no body or query names
// a user.
type vdiAPI struct{ *handler }

func pathID(r *http.Request, last string) string {
	return chi.URLParam(r, "kind") + "/" + chi.URLParam(r, "ns") + "/" + chi.URLParam(r, last)
}

// pools answers GET /api/vdi/pools: the pools with member, claimed and
// free counts.
func (v vdiAPI) pools(w http.ResponseWriter, r *http.Request) error {
	ps, err := v.VDI.BrokerPools(r.Context())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, ps)
	return nil
}

// claim answers POST /api/vdi/pools/{kind}/{ns}/{pool}/claim: a member
// for the caller, started; the one the caller holds on a retry.
func (v vdiAPI) claim(w http.ResponseWriter, r *http.Request) error {
	d, err := v.VDI.Claim(r.Context(), middleware.IdentityFrom(r.Context()), "rest", pathID(r, "pool"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, d)
	return nil
}

// desktops answers GET /api/vdi/desktops: the caller's desktops, or with
// ?all=1 every user's (admins only).
func (v vdiAPI) desktops(w http.ResponseWriter, r *http.Request) error {
	all := r.URL.Query().Get("all")
	if all != "" && all != "1" && all != "0" {
		return backends.Invalidf("all=%q: accepted are 1 and 0", all)
	}
	ds, err := v.VDI.Desktops(r.Context(), middleware.IdentityFrom(r.Context()), all == "1")
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, ds)
	return nil
}

// desktop answers GET /api/vdi/desktops/{kind}/{ns}/{member}.
func (v vdiAPI) desktop(w http.ResponseWriter, r *http.Request) error {
	d, err := v.VDI.Desktop(r.Context(), middleware.IdentityFrom(r.Context()), pathID(r, "member"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, d)
	return nil
}

// start answers POST .../start: the desktop started (a running one is
// left alone).
func (v vdiAPI) start(w http.ResponseWriter, r *http.Request) error {
	d, err := v.VDI.Start(r.Context(), middleware.IdentityFrom(r.Context()), "rest", pathID(r, "member"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, d)
	return nil
}

// releaseJSON is the answer of a release: the task to follow.
type releaseJSON struct {
	Desktop string `json:"desktop"`
	Task    string `json:"task"`
}

// release answers POST .../release: 202 with the task of the release.
func (v vdiAPI) release(w http.ResponseWriter, r *http.Request) error {
	id := pathID(r, "member")
	t, err := v.VDI.Release(r.Context(), middleware.IdentityFrom(r.Context()), "rest", id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusAccepted, releaseJSON{Desktop: id, Task: t.ID})
	return nil
}
