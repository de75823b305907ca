package ui

import (
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/corral-dev/corral/app/schedule"
	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/handlers/middleware"
	"github.com/corral-dev/corral/views"
)

// schedules is GET /schedules: the schedules with their last results and,
// for admins, the create form; an htmx request gets the #schedules region.
func (s *server) schedules(w http.ResponseWriter, r *http.Request) error {
	return s.renderSchedules(w, r, http.StatusOK)
}

func (s *server) renderSchedules(w http.ResponseWriter, r *http.Request, status int) error {
	if s.Schedules == nil {
		return backends.NotFoundf("schedules are not enabled on this server")
	}
	list, err := s.Schedules.List(r.Context())
	if err != nil {
		return err
	}
	frag := fragmentFor(r, "schedules", "schedules")
	page := s.page(r.Context(), r, "Schedules", frag)
	l := views.ScheduleList{CanEdit: page.User.Admin, Grace: s.Schedules.Grace().String()}
	for _, sc := range list {
		l.Rows = append(l.Rows, scheduleRow(sc))
	}
	return renderPage(w, r, status, views.SchedulesPage(views.Schedules{Page: page, List: l}), frag)
}

func scheduleRow(sc schedule.Schedule) views.ScheduleRow {
	loc := sc.Loc // the service's cached zone; List and Get always set it (UTC for an unknown TZ)
	when := func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.In(loc).Format("Mon Jan 2 15:04 MST")
	}
	row := views.ScheduleRow{ID: strconv.FormatInt(sc.ID, 10), Target: schedule.Target(sc.Schedule), Cron: sc.Cron, TZ: sc.TZ,
		Enabled: sc.Enabled, InCluster: sc.InCluster, Next: when(sc.Next), LastRun: when(sc.LastRun),
		LastResult: sc.LastResult, LastMessage: sc.LastMessage, What: sc.Action}
	if sc.InCluster {
		row.Next = "by the cluster"
	}
	if sc.Kind == schedule.KindSnapshot {
		row.What = "snapshot (keep " + strconv.Itoa(sc.Keep) + ")"
	}
	if ref, err := backends.ParseRef(sc.Target); err == nil && sc.TargetKind == schedule.TargetInstance {
		row.TargetURL = vmURL(ref)
	}
	if sc.LastTask != "" {
		row.LastTaskURL = "/ui/tasks/" + sc.LastTask
	}
	row.ResultClass = map[string]string{schedule.ResultOK: "ok", schedule.ResultSkipped: "ok", schedule.ResultMissed: "stale",
		schedule.ResultFailed: "error", schedule.ResultUnreachable: "down"}[sc.LastResult]
	return row
}

// scheduleCreate is POST /schedules (ref or folder, what, cron, tz, keep,
// inCluster): the #schedules region to htmx with an HX-Trigger, a
// redirect to the page otherwise.
func (s *server) scheduleCreate(w http.ResponseWriter, r *http.Request) error {
	if s.Schedules == nil {
		return backends.NotFoundf("schedules are not enabled on this server")
	}
	req := schedule.Request{Ref: r.PostFormValue("ref"), Folder: r.PostFormValue("folder"), Kind: schedule.KindPower,
		Action: r.PostFormValue("what"), Cron: r.PostFormValue("cron"), TZ: r.PostFormValue("tz"), InCluster: r.PostFormValue("inCluster") != ""}
	if req.Action == "snapshot" {
		req.Kind, req.Action = schedule.KindSnapshot, ""
	}
	if k := r.PostFormValue("keep"); k != "" {
		n, err := strconv.Atoi(k)
		if err != nil {
			return backends.Invalidf("keep %q is not accepted: a whole number of snapshots, 1 to %d", k, schedule.MaxKeep)
		}
		req.Keep = n
	}
	if _, _, err := s.Schedules.Create(r.Context(), middleware.Origin(r, "dashboard"), req); err != nil {
		return err
	}
	return s.afterScheduleChange(w, r)
}

// scheduleChange is POST /schedules/{id}/{enable|disable|delete}.
func (s *server) scheduleChange(w http.ResponseWriter, r *http.Request) error {
	if s.Schedules == nil {
		return backends.NotFoundf("schedules are not enabled on this server")
	}
	text := chi.URLParam(r, "id")
	id, err := strconv.ParseInt(text, 10, 64)
	if err != nil {
		return backends.Invalidf("schedule id %q is not accepted: a schedule's number", text)
	}
	o := middleware.Origin(r, "dashboard")
	switch op := chi.URLParam(r, "op"); op {
	case "enable", "disable":
		_, err = s.Schedules.SetEnabled(r.Context(), o, id, op == "enable")
	case "delete":
		_, err = s.Schedules.Delete(r.Context(), o, id)
	default:
		return backends.NotFoundf("no schedule action %q: accepted are enable, disable, delete", op)
	}
	if err != nil {
		return err
	}
	return s.afterScheduleChange(w, r)
}

func (s *server) afterScheduleChange(w http.ResponseWriter, r *http.Request) error {
	if !isHTMX(r) {
		http.Redirect(w, r, "/schedules", http.StatusSeeOther)
		return nil
	}
	w.Header().Set("HX-Trigger", tasksChanged)
	r.Header.Set("HX-Target", "section#schedules")
	return s.renderSchedules(w, r, http.StatusOK)
}
