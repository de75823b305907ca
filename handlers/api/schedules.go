package api

import (
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/corral-dev/corral/app/schedule"
	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/handlers/middleware"
)

// scheduleAPI answers /api/schedules.
type scheduleAPI struct {
	*handler
	svc *schedule.Service // nil: every schedule route answers 404
}

// scheduleJSON is one schedule. Exactly one of ref and folder is set.
// Times are RFC 3339 in the schedule's zone; empty when there is none.
type scheduleJSON struct {
	ID          int64  `json:"id"`
	Ref         string `json:"ref,omitempty"`
	Folder      string `json:"folder,omitempty"`
	Kind        string `json:"kind"`
	Action      string `json:"action,omitempty"`
	Cron        string `json:"cron"`
	TZ          string `json:"tz"`
	Keep        int    `json:"keep,omitempty"`
	Enabled     bool   `json:"enabled"`
	InCluster   bool   `json:"inCluster"`
	Next        string `json:"next,omitempty"`
	LastRun     string `json:"lastRun,omitempty"`
	LastResult  string `json:"lastResult,omitempty"`
	LastMessage string `json:"lastMessage,omitempty"`
	LastTask    string `json:"lastTask,omitempty"`
	CreatedBy   string `json:"createdBy"`
	CreatedAt   string `json:"createdAt"`
}

func toScheduleJSON(s schedule.Schedule) scheduleJSON {
	loc := s.Loc // the service's cached zone; List and Get always set it (UTC for an unknown TZ)
	ts := func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.In(loc).Format(time.RFC3339)
	}
	out := scheduleJSON{ID: s.ID, Kind: s.Kind, Action: s.Action, Cron: s.Cron, TZ: s.TZ, Keep: s.Keep, Enabled: s.Enabled,
		InCluster: s.InCluster, Next: ts(s.Next), LastRun: ts(s.LastRun), LastResult: s.LastResult, LastMessage: s.LastMessage,
		LastTask: s.LastTask, CreatedBy: s.CreatedBy, CreatedAt: ts(s.CreatedAt)}
	if s.TargetKind == schedule.TargetFolder {
		out.Folder = s.Target
	} else {
		out.Ref = s.Target
	}
	return out
}

func (h scheduleAPI) service() (*schedule.Service, error) {
	if h.svc == nil {
		return nil, backends.NotFoundf("schedules are not enabled on this server")
	}
	return h.svc, nil
}

func scheduleID(r *http.Request) (int64, error) {
	text := chi.URLParam(r, "id")
	id, err := strconv.ParseInt(text, 10, 64)
	if err != nil || id < 1 {
		return 0, backends.Invalidf("schedule id %q is not accepted: a schedule's number, as GET /api/schedules lists it", text)
	}
	return id, nil
}

// list answers GET /api/schedules.
func (h scheduleAPI) list(w http.ResponseWriter, r *http.Request) error {
	svc, err := h.service()
	if err != nil {
		return err
	}
	list, err := svc.List(r.Context())
	if err != nil {
		return err
	}
	out := make([]scheduleJSON, 0, len(list))
	for _, s := range list {
		out = append(out, toScheduleJSON(s))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// get answers GET /api/schedules/{id}.
func (h scheduleAPI) get(w http.ResponseWriter, r *http.Request) error {
	svc, err := h.service()
	if err != nil {
		return err
	}
	id, err := scheduleID(r)
	if err != nil {
		return err
	}
	s, err := svc.Get(r.Context(), id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, toScheduleJSON(s))
	return nil
}

// create answers POST /api/schedules: 201 with the schedule and the task
// that created it.
func (h scheduleAPI) create(w http.ResponseWriter, r *http.Request) error {
	var req struct {
		Ref       string `json:"ref"`
		Folder    string `json:"folder"`
		Kind      string `json:"kind"`
		Action    string `json:"action"`
		Cron      string `json:"cron"`
		TZ        string `json:"tz"`
		Keep      int    `json:"keep"`
		Enabled   *bool  `json:"enabled"`
		InCluster bool   `json:"inCluster"`
	}
	svc, err := h.service()
	if err == nil {
		err = decode(r, &req)
	}
	if err != nil {
		return err
	}
	t, sc, err := svc.Create(r.Context(), middleware.Origin(r, "rest"), schedule.Request{Ref: req.Ref, Folder: req.Folder,
		Kind: req.Kind, Action: req.Action, Cron: req.Cron, TZ: req.TZ, Keep: req.Keep,
		Disabled: req.Enabled != nil && !*req.Enabled, InCluster: req.InCluster})
	if err != nil {
		return err
	}
	got, err := svc.Get(r.Context(), sc.ID)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, struct {
		scheduleJSON
		Task string `json:"task"`
	}{toScheduleJSON(got), t.ID})
	return nil
}

// delete answers DELETE /api/schedules/{id}; an in-cluster schedule's
// CronJob goes with it.
func (h scheduleAPI) delete(w http.ResponseWriter, r *http.Request) error {
	svc, err := h.service()
	if err != nil {
		return err
	}
	id, err := scheduleID(r)
	if err != nil {
		return err
	}
	t, err := svc.Delete(r.Context(), middleware.Origin(r, "rest"), id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "deleted", "task": t.ID})
	return nil
}

// enable answers POST /api/schedules/{id}/enable and …/disable.
func (h scheduleAPI) enable(on bool) func(http.ResponseWriter, *http.Request) error {
	return func(w http.ResponseWriter, r *http.Request) error {
		svc, err := h.service()
		if err != nil {
			return err
		}
		id, err := scheduleID(r)
		if err != nil {
			return err
		}
		t, err := svc.SetEnabled(r.Context(), middleware.Origin(r, "rest"), id, on)
		if err != nil {
			return err
		}
		s, err := svc.Get(r.Context(), id)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, struct {
			scheduleJSON
			Task string `json:"task"`
		}{toScheduleJSON(s), t.ID})
		return nil
	}
}
