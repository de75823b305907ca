package ui

import (
	"errors"
	"net/http"
	"strings"

	"github.com/corral-dev/corral/app/move"
	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/handlers/middleware"
	"github.com/corral-dev/corral/views"
)

// The move dialog's routes.
const (
	movePreflightURL = "/ui/move/preflight"
	moveCommitURL    = "/ui/move"
)

// moveDialog is the dialog of the instance page for ref: every configured
// context but the source's is offered; the preflight explains the rest.
func (s *server) moveDialog(ref backends.InstanceRef) *views.MoveDialog {
	if s.Move == nil {
		return nil
	}
	d := &views.MoveDialog{Ref: ref.String(), PreflightURL: movePreflightURL,
		Preflight: views.MovePreflight{CommitURL: moveCommitURL, Refusals: []string{}}}
	for _, b := range s.Fleet.Backends() {
		key := backends.ContextKey("", b.Kind(), b.Context())
		if key == ref.ContextKey() {
			continue
		}
		d.Options = append(d.Options, views.MoveOption{Value: key, Label: key})
	}
	return d
}

// moveRequest reads the dialog's form: ref, dest ("backend/context"),
// name, deleteSource.
func moveRequest(r *http.Request) (move.Request, error) {
	if err := r.ParseForm(); err != nil {
		return move.Request{}, backends.Invalidf("the form does not parse: send application/x-www-form-urlencoded")
	}
	req := move.Request{Ref: r.PostForm.Get("ref"), Name: strings.TrimSpace(r.PostForm.Get("name")),
		DeleteSource: r.PostForm.Get("deleteSource") != ""}
	if dest := r.PostForm.Get("dest"); dest != "" {
		kind, ctx, ok := strings.Cut(dest, "/")
		if !ok || kind == "" || ctx == "" {
			return req, backends.Invalidf("destination %q is not accepted: choose a context as backend/context", dest)
		}
		req.ToBackend, req.ToContext = kind, ctx
	}
	return req, nil
}

// preflightModel formats a preflight for the #move-preflight partial.
func preflightModel(p move.Preflight, req move.Request) views.MovePreflight {
	m := views.MovePreflight{CommitURL: moveCommitURL, Destination: p.Plan.Destination, Steps: p.Plan.Steps}
	for _, r := range p.Refusals {
		m.Refusals = append(m.Refusals, r.Reason)
	}
	for _, w := range p.Warnings {
		m.Warnings = append(m.Warnings, w.Message)
	}
	m.Ready = req.ToBackend != "" && !p.Refused()
	return m
}

// movePreflight is POST /ui/move/preflight: the #move-preflight partial
// for the form as it stands. It touches nothing.
func (s *server) movePreflight(w http.ResponseWriter, r *http.Request) error {
	if s.Move == nil {
		return backends.NotFoundf("moves are not configured on this server")
	}
	req, err := moveRequest(r)
	if err != nil {
		return err
	}
	p, err := s.Move.Preflight(r.Context(), req)
	if err != nil {
		return err
	}
	return renderPage(w, r, http.StatusOK, views.MovePreflightView(preflightModel(p, req)), "")
}

// moveCommit is POST /ui/move: the move starts as a task. With htmx it
// answers the partial with a notice (or the refusals, should the
// server-side preflight refuse now); without, it redirects to the task.
func (s *server) moveCommit(w http.ResponseWriter, r *http.Request) error {
	if s.Move == nil {
		return backends.NotFoundf("moves are not configured on this server")
	}
	req, err := moveRequest(r)
	if err != nil {
		return err
	}
	t, p, err := s.Move.Move(r.Context(), middleware.Origin(r, "dashboard"), req)
	var refused *move.RefusedError
	if errors.As(err, &refused) {
		status := http.StatusConflict
		if isHTMX(r) {
			status = http.StatusOK // htmx swaps 2xx answers only; the refusals are the answer
		}
		return renderPage(w, r, status, views.MovePreflightView(preflightModel(refused.Preflight, req)), "")
	}
	if err != nil {
		return err
	}
	taskURL := "/ui/tasks/" + t.ID
	if !isHTMX(r) {
		http.Redirect(w, r, taskURL, http.StatusSeeOther)
		return nil
	}
	m := preflightModel(p, req)
	m.Ready = false // started: a second click would only be refused
	m.Steps = nil
	m.Notice = "Move started: " + p.Plan.Source + " to " + p.Plan.Destination + "."
	m.TaskURL = taskURL
	w.Header().Set("HX-Trigger", tasksChanged)
	return renderPage(w, r, http.StatusOK, views.MovePreflightView(m), "")
}
