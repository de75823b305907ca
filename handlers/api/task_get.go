package api

import (
	"net/http"
	"strconv"

	"github.com/go-chi/chi/v5"

	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/store"
)

// taskGet answers GET /api/tasks/{id} with the task, its progress and log.
func (h *handler) taskGet(w http.ResponseWriter, r *http.Request) error {
	t, lines, err := h.Tasks.Get(r.Context(), chi.URLParam(r, "id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, toTask(t, lines))
	return nil
}

// taskLog answers GET /api/tasklog: the audit log, newest first, filtered
// by actor, action, target and outcome; limit defaults to 100 (at most
// 1000).
func (h *handler) taskLog(w http.ResponseWriter, r *http.Request) error {
	v := r.URL.Query()
	f := store.AuditFilter{Actor: v.Get("actor"), Action: v.Get("action"), Target: v.Get("target"), Outcome: v.Get("outcome"), Limit: 100}
	if s := v.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 1000 {
			return backends.Invalidf("limit %q: a whole number from 1 to 1000 is accepted", s)
		}
		f.Limit = n
	}
	entries, err := h.Tasks.Audit(r.Context(), f)
	if err != nil {
		return err
	}
	out := make([]auditJSON, 0, len(entries))
	for _, e := range entries {
		out = append(out, auditJSON{ID: e.ID, At: e.At.UTC(), Actor: e.Actor, Surface: e.Surface, Action: e.Action, Target: e.Target, Outcome: e.Outcome, Detail: e.Detail, Hash: e.Hash})
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// contextList answers GET /api/contexts with every context's health.
func (h *handler) contextList(w http.ResponseWriter, r *http.Request) error {
	snap := h.Fleet.Snapshot()
	out := make([]contextJSON, 0, len(snap.Contexts))
	for _, c := range snap.Contexts {
		out = append(out, toContext(c))
	}
	setPartial(w, snap)
	writeJSON(w, http.StatusOK, out)
	return nil
}
