package ui

import (
	"net/http"
	"net/url"
	"strconv"

	"github.com/corral-dev/corral/store"
	"github.com/corral-dev/corral/views"
)

// auditLimit is the number of entries the audit page lists.
const auditLimit = 200

var auditOutcomes = []string{"ok", "error", "refused", "interrupted"}

// audit is GET /audit: the audit log, newest first, filtered by actor,
// action, target and outcome (exact matches, a GET form); an htmx request
// gets the #audit region.
func (s *server) audit(w http.ResponseWriter, r *http.Request) error {
	v := r.URL.Query()
	f := store.AuditFilter{Actor: v.Get("actor"), Action: v.Get("action"), Target: v.Get("target"), Outcome: v.Get("outcome"), Limit: auditLimit}
	entries, err := s.Tasks.Audit(r.Context(), f)
	if err != nil {
		return err
	}
	frag := fragmentFor(r, "audit", "audit")
	l := views.AuditLog{Self: auditURL(f), Actor: f.Actor, Action: f.Action, Target: f.Target, Outcome: f.Outcome}
	for _, o := range auditOutcomes {
		l.Outcomes = append(l.Outcomes, views.Option{Value: o, Label: o, Selected: f.Outcome == o})
	}
	for _, e := range entries {
		l.Rows = append(l.Rows, views.AuditRow{
			ID: strconv.FormatInt(e.ID, 10), When: e.At.Local().Format("Jan 2 15:04:05"), WhenISO: e.At.UTC().Format("2006-01-02T15:04:05Z"),
			Actor: e.Actor, Surface: e.Surface, Action: e.Action, Target: e.Target, Outcome: e.Outcome, Detail: e.Detail,
		})
	}
	switch n := len(entries); {
	case n == 0:
		l.Showing = "No matching entries"
	case n == auditLimit:
		l.Showing = "The " + strconv.Itoa(n) + " newest matching entries"
	default:
		l.Showing = plural(n, "entry", "entries")
	}
	a := views.Audit{Page: s.page(r.Context(), r, "Audit log", frag), Log: l}
	return renderPage(w, r, http.StatusOK, views.AuditPage(a), frag)
}

func auditURL(f store.AuditFilter) string {
	v := url.Values{}
	for k, s := range map[string]string{"actor": f.Actor, "action": f.Action, "target": f.Target, "outcome": f.Outcome} {
		if s != "" {
			v.Set(k, s)
		}
	}
	if len(v) == 0 {
		return "/audit"
	}
	return "/audit?" + v.Encode()
}
