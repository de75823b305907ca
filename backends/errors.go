package backends

import (
	"errors"
	"fmt"
)

// The closed set of error kinds. Every error a backend or a use case
// returns wraps exactly one of them; handlers map them to statuses in one
// place (handlers/middleware). The comment names the HTTP status.
var (
	ErrNotFound    = errors.New("not found")              // 404
	ErrConflict    = errors.New("conflict")               // 409
	ErrInvalid     = errors.New("invalid")                // 400
	ErrForbidden   = errors.New("forbidden")              // 403
	ErrUnsupported = errors.New("unsupported")            // 400: refused, retrying cannot help
	ErrFailed      = errors.New("backend failed")         // 502: the backend tried and failed
	ErrUnavailable = errors.New("backend unavailable")    // 503: the backend cannot be reached
	ErrTimeout     = errors.New("backend did not answer") // 503, a kind of ErrUnavailable
)

// Error carries a kind, a message safe to show to any caller, and the
// cause, which only reaches the log: a backend's own error text can carry
// hostnames, paths and credentials.
type Error struct {
	Kind error  // one of the Err* kinds above
	Msg  string // safe to show
	Err  error  // the cause; may be nil
}

func (e *Error) Error() string {
	if e.Err != nil {
		return e.Msg + ": " + e.Err.Error()
	}
	return e.Msg
}

// Unwrap returns the kind and the cause, so errors.Is matches both.
func (e *Error) Unwrap() []error {
	if e.Err != nil {
		return []error{e.Kind, e.Err}
	}
	return []error{e.Kind}
}

// Safe marks e as safe to show.
func (e *Error) Safe() string { return e.Msg }

func newf(kind error, format string, args ...any) *Error {
	return &Error{Kind: kind, Msg: fmt.Sprintf(format, args...)}
}

// NotFoundf returns a NotFound error whose message is safe to show; the
// arguments must be safe too (names the caller sent, not backend output).
func NotFoundf(format string, args ...any) error { return newf(ErrNotFound, format, args...) }

// Conflictf returns a Conflict error with a safe message.
func Conflictf(format string, args ...any) error { return newf(ErrConflict, format, args...) }

// Invalidf returns an Invalid error with a safe message. The message names
// what was wrong and what is accepted.
func Invalidf(format string, args ...any) error { return newf(ErrInvalid, format, args...) }

// Forbiddenf returns a Forbidden error with a safe message.
func Forbiddenf(format string, args ...any) error { return newf(ErrForbidden, format, args...) }

// Failed returns a backend-failed error: msg is shown, cause is logged.
func Failed(msg string, cause error) error { return &Error{Kind: ErrFailed, Msg: msg, Err: cause} }

// Unavailable returns a backend-unreachable error that names the context.
func Unavailable(context string, cause error) error {
	return &Error{Kind: ErrUnavailable, Msg: fmt.Sprintf("context %s is unreachable", context), Err: cause}
}

// Unsupported is the typed refusal: the backend cannot do Op, and Remedy
// says what the caller can do instead. It is a 400 on every surface.
type Unsupported struct {
	Op      string
	Backend string
	Remedy  string
}

func (u *Unsupported) Error() string {
	msg := fmt.Sprintf("%s is not supported by the %s backend", u.Op, u.Backend)
	if u.Remedy != "" {
		msg += ": " + u.Remedy
	}
	return msg
}

// Is makes errors.Is(err, ErrUnsupported) hold for every refusal.
func (u *Unsupported) Is(target error) bool { return target == ErrUnsupported }

// Safe marks a refusal as safe to show: it names only the operation, the
// backend kind and the remedy.
func (u *Unsupported) Safe() string { return u.Error() }

// Refuse returns an *Unsupported for op with a specific remedy.
func Refuse(kind Kind, op, remedy string) error {
	return &Unsupported{Op: op, Backend: string(kind), Remedy: remedy}
}

// SafeMessage returns the message of the outermost error in err's chain
// that is marked safe to show, or "" when there is none. Callers show a
// generic message with a request id in that case.
func SafeMessage(err error) string {
	var s interface{ Safe() string }
	if errors.As(err, &s) {
		return s.Safe()
	}
	return ""
}

// ProbeReason returns the safe message of a probe's error (a console
// that did not answer), or "it did not answer" when it has none: the
// reason shown for a skipped or refused console.
func ProbeReason(err error) string {
	if m := SafeMessage(err); m != "" {
		return m
	}
	return "it did not answer"
}

// KindOf returns the kind err wraps, or nil for an error of no kind (an
// internal error).
func KindOf(err error) error {
	for _, k := range []error{ErrUnsupported, ErrNotFound, ErrConflict, ErrInvalid, ErrForbidden, ErrTimeout, ErrUnavailable, ErrFailed} {
		if errors.Is(err, k) {
			return k
		}
	}
	return nil
}
