package api

import (
	"errors"
	"net/http"

	"github.com/corral-dev/corral/app/move"
	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/handlers/middleware"
)

// moveAPI serves the cold move between backends (ADR-0010).
type moveAPI struct {
	*handler
	svc *move.Service
}

func (m moveAPI) service() (*move.Service, error) {
	if m.svc == nil {
		return nil, backends.NotFoundf("moves are not configured on this server")
	}
	return m.svc, nil
}

// destinations answers GET /api/move/destinations?ref=...: every context
// with whether it can receive the instance and, if not, why.
func (m moveAPI) destinations(w http.ResponseWriter, r *http.Request) error {
	svc, err := m.service()
	if err != nil {
		return err
	}
	ref := r.URL.Query().Get("ref")
	ds, err := svc.Destinations(r.Context(), ref)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"ref": ref, "destinations": ds})
	return nil
}

// preflight answers POST /api/move/preflight: always 200 with the plan,
// the refusals and the warnings; it touches nothing. A malformed body is a
// 400, an unknown ref a 404.
func (m moveAPI) preflight(w http.ResponseWriter, r *http.Request) error {
	svc, err := m.service()
	if err != nil {
		return err
	}
	var req move.Request
	if err := decode(r, &req); err != nil {
		return err
	}
	p, err := svc.Preflight(r.Context(), req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, p)
	return nil
}

// moveRefused is the body of a refused commit: the error and the same
// lists the preflight gives.
type moveRefused struct {
	Error    string         `json:"error"`
	Refusals []move.Refusal `json:"refusals"`
	Warnings []move.Warning `json:"warnings"`
}

// commit answers POST /api/move: 202 with the task once the server-side
// preflight passed, 409 with the refusal list when it refused.
func (m moveAPI) commit(w http.ResponseWriter, r *http.Request) error {
	svc, err := m.service()
	if err != nil {
		return err
	}
	var req move.Request
	if err := decode(r, &req); err != nil {
		return err
	}
	t, p, err := svc.Move(r.Context(), middleware.Origin(r, "rest"), req)
	var refused *move.RefusedError
	if errors.As(err, &refused) {
		writeJSON(w, http.StatusConflict, moveRefused{Error: refused.Error(), Refusals: refused.Preflight.Refusals, Warnings: refused.Preflight.Warnings})
		return nil
	}
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/api/tasks/"+t.ID)
	writeJSON(w, http.StatusAccepted, map[string]any{"task": t.ID, "source": p.Plan.Source, "destination": p.Plan.Destination, "warnings": p.Warnings})
	return nil
}
