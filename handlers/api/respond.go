package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/corral-dev/corral/app/fleet"
	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/handlers/middleware"
)

// errorBody is the shape of every REST error.
type errorBody struct {
	Error      string   `json:"error"`
	Candidates []string `json:"candidates,omitempty"`
}

// wrap turns a handler that returns an error into an http.HandlerFunc:
// the one place REST errors become responses.
func (h *handler) wrap(fn func(http.ResponseWriter, *http.Request) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		err := fn(w, r)
		if err == nil {
			return
		}
		status, msg := middleware.Public(h.Log, r, err)
		body := errorBody{Error: msg}
		var amb *fleet.Ambiguous
		if errors.As(err, &amb) {
			body.Candidates = amb.Candidates
		}
		writeJSON(w, status, body)
	}
}

// refuse answers a request its route's rule refused: 401 or 403 with the
// refusal's safe message.
func (h *handler) refuse(w http.ResponseWriter, r *http.Request, err error) {
	status, msg := middleware.Public(h.Log, r, err)
	writeJSON(w, status, errorBody{Error: msg})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

const maxBody = 1 << 20

// decode reads a JSON body into v, refusing unknown fields, trailing data
// and bodies over 1 MiB with an Invalid error that says what was wrong.
func decode(r *http.Request, v any) error {
	if ct := r.Header.Get("Content-Type"); ct != "" && !strings.HasPrefix(ct, "application/json") {
		return backends.Invalidf("content type %q is not accepted: send application/json", ct)
	}
	dec := json.NewDecoder(io.LimitReader(r.Body, maxBody+1))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var syn *json.SyntaxError
		var typ *json.UnmarshalTypeError
		switch {
		case errors.Is(err, io.EOF):
			return backends.Invalidf("request body is empty: a JSON object is expected")
		case errors.As(err, &syn):
			return backends.Invalidf("request body is not valid JSON (at byte %d)", syn.Offset)
		case errors.As(err, &typ):
			return backends.Invalidf("field %q must be %s, not %s", typ.Field, typ.Type, typ.Value)
		case strings.HasPrefix(err.Error(), "json: unknown field "):
			return backends.Invalidf("unknown field %s", strings.TrimPrefix(err.Error(), "json: unknown field "))
		case errors.Is(err, io.ErrUnexpectedEOF):
			return backends.Invalidf("request body is truncated JSON")
		}
		return backends.Invalidf("request body does not decode: %s", err.Error())
	}
	if dec.More() {
		return backends.Invalidf("request body has data after the JSON object")
	}
	if n, _ := io.Copy(io.Discard, io.LimitReader(r.Body, 1)); n > 0 {
		return backends.Invalidf("request body is larger than %d bytes", maxBody)
	}
	return nil
}

// refPath returns the escaped path after prefix, for routes whose tail is
// a canonical ref (which contains slashes and %-escapes).
func refPath(r *http.Request, prefix string) string {
	p := r.URL.EscapedPath()
	i := strings.Index(p, prefix)
	if i < 0 {
		return ""
	}
	return strings.Trim(p[i+len(prefix):], "/")
}

// setPartial names the contexts that did not answer, so a script can tell
// a complete list from a partial one.
func setPartial(w http.ResponseWriter, s *fleet.Snapshot) {
	if p := s.Partial(); len(p) > 0 {
		w.Header().Set("X-Corral-Partial", strings.Join(p, ","))
	}
}

func (h *handler) notFound(w http.ResponseWriter, r *http.Request) error {
	return backends.NotFoundf("no such API route: %s %s", r.Method, r.URL.Path)
}

func (h *handler) methodNotAllowed(w http.ResponseWriter, r *http.Request) error {
	writeJSON(w, http.StatusMethodNotAllowed, errorBody{Error: fmt.Sprintf("method %s is not allowed on %s", r.Method, r.URL.Path)})
	return nil
}
