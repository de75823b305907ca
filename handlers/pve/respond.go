package pve

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/corral-dev/corral/app/auth"
	"github.com/corral-dev/corral/app/pve"
	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/handlers/middleware"
)

// maxBody is PVE's request body limit.
const maxBody = 64 << 10

// wrap turns a handler returning (data, error) into an http.Handler: the
// one place answers get PVE's envelope and errors PVE's shape.
func (h *handler) wrap(fn func(*http.Request, pve.Params) (any, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, err := params(r)
		if err == nil {
			var data any
			if data, err = fn(r, p); err == nil {
				if rs, ok := data.(pve.Resources); ok { // big lists: encoded once, not re-validated
					b, _ := rs.MarshalJSON()
					w.Header().Set("Content-Type", "application/json;charset=UTF-8")
					_, _ = w.Write(append(append([]byte(`{"data":`), b...), "}\n"...))
					return
				}
				writeJSON(w, http.StatusOK, envelope{Data: data})
				return
			}
		}
		h.fail(w, r, err)
	})
}

type envelope struct {
	Data any `json:"data"`
}

type errorBody struct {
	Data    any               `json:"data"`
	Errors  map[string]string `json:"errors,omitempty"`
	Message string            `json:"message"`
}

// fail answers err in PVE's shape. The status line's reason phrase is the
// message (go-proxmox shows only that), written over the hijacked
// connection where the server allows it.
func (h *handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	var pe *pve.Error
	if !errors.As(err, &pe) {
		status, msg := middleware.Public(h.Log, r, err)
		pe = &pve.Error{Status: status, Msg: msg}
		if status == http.StatusBadRequest {
			pe = &pve.Error{Status: status, Msg: "Parameter verification failed.", Errors: map[string]string{"request": msg}}
		}
	}
	if pe.Status == http.StatusUnauthorized {
		h.Audit.Record(r.Context(), middleware.IdentityFrom(r.Context()), "pve", r.Method+" "+routePattern(r), r.URL.EscapedPath(), auth.OutcomeRefused, "401 "+pe.Msg)
	}
	writeError(w, pe)
}

func routePattern(r *http.Request) string {
	if rc := chi.RouteContext(r.Context()); rc != nil {
		return rc.RoutePattern()
	}
	return r.URL.Path
}

func writeError(w http.ResponseWriter, pe *pve.Error) {
	body, _ := json.Marshal(errorBody{Errors: pe.Errors, Message: pe.Msg + "\n"})
	reason, _, _ := strings.Cut(pe.Msg, "\n")
	reason = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, reason)
	if conn, buf, err := http.NewResponseController(w).Hijack(); err == nil {
		defer conn.Close()
		writeRaw(buf, pe.Status, reason, body)
		return
	}
	w.Header().Set("Content-Type", "application/json;charset=UTF-8")
	w.WriteHeader(pe.Status)
	_, _ = w.Write(body)
}

// writeRaw writes an HTTP/1.1 response with a reason phrase of its own,
// which net/http cannot, and closes the connection after it.
func writeRaw(buf *bufio.ReadWriter, status int, reason string, body []byte) {
	fmt.Fprintf(buf, "HTTP/1.1 %d %s\r\nContent-Type: application/json;charset=UTF-8\r\nContent-Length: %d\r\nConnection: close\r\nCache-Control: max-age=0\r\n\r\n",
		status, reason, len(body))
	_, _ = buf.Write(body)
	_ = buf.Flush()
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json;charset=UTF-8")
	w.Header().Set("Cache-Control", "max-age=0")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

// params merges the query and the body: a form
// (application/x-www-form-urlencoded, also with no content type) or a
// JSON object whose numbers and booleans become text (go-proxmox).
func params(r *http.Request) (pve.Params, error) {
	p := pve.Params{}
	for k, v := range r.URL.Query() {
		if len(v) > 0 {
			p[k] = v[len(v)-1]
		}
	}
	if r.Body == nil || r.Method == http.MethodGet || r.Method == http.MethodHead {
		return p, nil
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil {
		return nil, &pve.Error{Status: 400, Msg: "unable to read the request body"}
	}
	if len(body) > maxBody {
		return nil, &pve.Error{Status: 413, Msg: "request too large"}
	}
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch {
	case len(strings.TrimSpace(string(body))) == 0:
	case ct == "application/json":
		var m map[string]any
		dec := json.NewDecoder(strings.NewReader(string(body)))
		dec.UseNumber()
		if err := dec.Decode(&m); err != nil {
			return nil, &pve.Error{Status: 400, Msg: "Parameter verification failed.", Errors: map[string]string{"body": "not a JSON object"}}
		}
		for k, v := range m {
			switch v := v.(type) {
			case nil:
			case string:
				p[k] = v
			case json.Number:
				p[k] = v.String()
			case bool:
				p[k] = map[bool]string{true: "1", false: "0"}[v]
			default:
				b, _ := json.Marshal(v)
				p[k] = string(b)
			}
		}
	case ct == "" || ct == "application/x-www-form-urlencoded":
		vals, err := url.ParseQuery(string(body))
		if err != nil {
			return nil, &pve.Error{Status: 400, Msg: "Parameter verification failed.", Errors: map[string]string{"body": "not a form"}}
		}
		for k, v := range vals {
			if len(v) > 0 {
				p[k] = v[len(v)-1]
			}
		}
	default:
		return nil, &pve.Error{Status: 415, Msg: "Unsupported content type '" + ct + "'"}
	}
	return p, nil
}

// param returns the path parameter name, percent-decoded (chi routes on
// the escaped path when the request had %21 and the like).
func param(r *http.Request, name string) string {
	v := chi.URLParam(r, name)
	if u, err := url.PathUnescape(v); err == nil {
		return u
	}
	return v
}

// vmid returns the {vmid} path parameter.
func vmid(r *http.Request) (int64, error) {
	n, err := strconv.ParseInt(param(r, "vmid"), 10, 64)
	if err != nil || n < 100 {
		return 0, pve.ParamError("vmid", "type check ('integer') failed - got '"+param(r, "vmid")+"'")
	}
	return n, nil
}

// caller returns the authenticated caller of r.
func caller(r *http.Request) pve.Caller {
	id := middleware.IdentityFrom(r.Context())
	return pve.Caller{Login: id.Login, PVEUser: id.Name}
}

// identify resolves the caller from PVE credentials only (see
// pve.Service.Authenticate): no cookie or header of the other surfaces
// counts here.
func (h *handler) identify(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := h.Service.Authenticate(r)
		next.ServeHTTP(w, r.WithContext(middleware.WithIdentity(r.Context(), id)))
	})
}

// refuse answers a request its route's rule refused, in PVE's words.
func (h *handler) refuse(w http.ResponseWriter, r *http.Request, err error) {
	status := middleware.Status(err)
	msg := backends.SafeMessage(err)
	if status == http.StatusForbidden {
		msg = "Permission check failed (" + r.URL.Path + ", " + middleware.IdentityFrom(r.Context()).Actor() + " is not an admin)"
	}
	w.Header().Del("WWW-Authenticate")
	writeError(w, &pve.Error{Status: status, Msg: msg})
}
