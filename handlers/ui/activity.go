package ui

import (
	"context"
	"net/http"
	"strconv"

	"github.com/go-chi/chi/v5"

	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/handlers/middleware"
	"github.com/corral-dev/corral/store"
	"github.com/corral-dev/corral/views"
)

// activity is GET /ui/activity: the #activity panel for htmx, a page
// around it otherwise.
func (s *server) activity(w http.ResponseWriter, r *http.Request) error {
	frag := fragmentFor(r, "activity")
	return renderPage(w, r, http.StatusOK, views.ActivityPage(s.page(r.Context(), r, "Activity", frag)), frag)
}

// taskShow is GET /ui/tasks/{id}: one task and its log.
func (s *server) taskShow(w http.ResponseWriter, r *http.Request) error {
	t, lines, err := s.Tasks.Get(r.Context(), chi.URLParam(r, "id"))
	if err != nil {
		return err
	}
	frag := fragmentFor(r, "task", "task")
	d := views.TaskDetail{Page: s.page(r.Context(), r, "Task "+t.Action, frag), Task: taskRow(t)}
	for _, l := range lines {
		d.Log = append(d.Log, views.LogRow{At: l.At.Local().Format("15:04:05.000"), Line: l.Line})
	}
	return renderPage(w, r, http.StatusOK, views.TaskPage(d), frag)
}

// activityModel reads the recent tasks for the panel. A failure does not
// fail the page: the panel says so and the log has the cause.
func (s *server) activityModel(ctx context.Context) views.Activity {
	ts, err := s.Tasks.Recent(ctx, activityLimit)
	if err != nil {
		s.Log.Error("ui: recent tasks", "request_id", middleware.RequestIDFrom(ctx), "err", err)
		return views.Activity{Error: "The task list could not be read; the server log has the cause."}
	}
	a := views.Activity{Tasks: make([]views.TaskRow, 0, len(ts))}
	for _, t := range ts {
		row := taskRow(t)
		if t.Status == store.TaskRunning {
			row.Last = s.lastLine(ctx, t.ID)
		}
		a.Tasks = append(a.Tasks, row)
	}
	return a
}

// lastLine is the latest log line of a running task, so the panel shows
// where it is (a migration's phase); only running tasks pay the read.
func (s *server) lastLine(ctx context.Context, id string) string {
	_, lines, err := s.Tasks.Get(ctx, id)
	if err != nil || len(lines) == 0 {
		return ""
	}
	return lines[len(lines)-1].Line
}

func taskRow(t store.Task) views.TaskRow {
	row := views.TaskRow{
		ID:       t.ID,
		URL:      "/ui/tasks/" + t.ID,
		Action:   t.Action,
		Target:   t.Target,
		Actor:    t.Actor,
		Status:   string(t.Status),
		Progress: strconv.Itoa(t.Progress) + "%",
		Percent:  t.Progress,
		When:     t.CreatedAt.Local().Format("Jan 2 15:04:05"),
		WhenISO:  t.CreatedAt.UTC().Format("2006-01-02T15:04:05Z"),
		Error:    t.Error,
	}
	if ref, err := backends.ParseRef(t.Target); err == nil && t.Action != "delete" {
		row.TargetURL = vmURL(ref)
	}
	return row
}
