// Package middleware holds what every surface's request pipeline shares:
// request ids, access logging, panic recovery, the caller's identity and
// the access rules of the route tables (auth.go), cross-site request
// protection, and the one mapping from error kinds to HTTP statuses and
// safe messages.
package middleware

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/corral-dev/corral/app/auth"
	"github.com/corral-dev/corral/app/tasks"
	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/store"
)

type ctxKey int

const (
	requestIDKey ctxKey = iota
	identityKey
)

// RequestID gives every request an id, echoed in X-Request-Id, shown in
// error messages and logged with the cause, so a user's report finds the
// log line.
func RequestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var b [8]byte
		_, _ = rand.Read(b[:])
		id := hex.EncodeToString(b[:])
		w.Header().Set("X-Request-Id", id)
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), requestIDKey, id)))
	})
}

// RequestIDFrom returns the request's id, or "" outside RequestID.
func RequestIDFrom(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey).(string)
	return id
}

type statusWriter struct {
	http.ResponseWriter
	status int
	bytes  int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(b)
	w.bytes += n
	return n, err
}

// Unwrap lets http.ResponseController reach Flush and Hijack.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Log writes one access log line per request and turns a panic into a 500
// with the request id, logging the panic.
func Log(log *slog.Logger) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			start := time.Now()
			sw := &statusWriter{ResponseWriter: w}
			defer func() {
				if p := recover(); p != nil {
					if p == http.ErrAbortHandler {
						panic(p)
					}
					log.Error("http: handler panicked", "request_id", RequestIDFrom(r.Context()), "path", r.URL.Path, "panic", p)
					if sw.status == 0 {
						http.Error(sw, "internal error (request "+RequestIDFrom(r.Context())+")", http.StatusInternalServerError)
					}
				}
				log.Debug("http", "method", r.Method, "path", r.URL.Path, "status", sw.status, "bytes", sw.bytes,
					"took", time.Since(start), "request_id", RequestIDFrom(r.Context()))
			}()
			next.ServeHTTP(sw, r)
		})
	}
}

// Status returns the HTTP status for err's kind: the one place where
// error kinds become statuses.
func Status(err error) int {
	if errors.Is(err, auth.ErrUnauthenticated) {
		return http.StatusUnauthorized
	}
	switch backends.KindOf(err) {
	case backends.ErrNotFound:
		return http.StatusNotFound
	case backends.ErrConflict:
		return http.StatusConflict
	case backends.ErrInvalid, backends.ErrUnsupported:
		return http.StatusBadRequest
	case backends.ErrForbidden:
		return http.StatusForbidden
	case backends.ErrFailed:
		return http.StatusBadGateway
	case backends.ErrUnavailable, backends.ErrTimeout:
		return http.StatusServiceUnavailable
	}
	if errors.Is(err, store.ErrNotFound) {
		return http.StatusNotFound
	}
	return http.StatusInternalServerError
}

// Public returns the status and the message to show for err. The message
// is the error's safe message, or a generic one with the request id; the
// cause is logged at the level its status deserves and never shown.
func Public(log *slog.Logger, r *http.Request, err error) (int, string) {
	status := Status(err)
	id := RequestIDFrom(r.Context())
	msg := backends.SafeMessage(err)
	if msg == "" {
		msg = http.StatusText(status)
		if status == http.StatusNotFound {
			msg = "not found"
		}
	}
	if status >= 500 {
		msg += " (request " + id + ")"
		log.Error("http: request failed", "request_id", id, "method", r.Method, "path", r.URL.Path, "status", status, "err", err)
	} else {
		log.Info("http: request refused", "request_id", id, "method", r.Method, "path", r.URL.Path, "status", status, "err", err)
	}
	return status, msg
}

// Origin returns who is calling through which surface: the identity that
// Identify resolved from the request pipeline ("anonymous" outside it).
func Origin(r *http.Request, surface string) tasks.Origin {
	return tasks.Origin{Actor: IdentityFrom(r.Context()).Actor(), Surface: surface}
}
