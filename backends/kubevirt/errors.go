package kubevirt

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/corral-dev/corral/backends"
)

// mapError turns an error of a client-go call into one of the shared
// kinds. op is a verb phrase ("start", "create the DataVolume of") and
// what names the object the caller named; both go into the safe message.
// The API server's own text never does: it can name users, service
// accounts and, for transport errors, the server's URL, so it travels
// only as the wrapped cause, which reaches the log.
func mapError(contextName, op, what string, err error) error {
	if err == nil {
		return nil
	}
	// Already one of ours (a Conflict found by a state check, a refusal).
	if backends.KindOf(err) != nil {
		return err
	}
	wrap := func(kind error, format string, args ...any) error {
		return &backends.Error{Kind: kind, Msg: fmt.Sprintf(format, args...), Err: err}
	}
	var status apierrors.APIStatus
	switch {
	case errors.Is(err, context.DeadlineExceeded), apierrors.IsTimeout(err), apierrors.IsServerTimeout(err):
		return wrap(backends.ErrTimeout, "context %s did not answer in time to %s %s", contextName, op, what)
	case errors.Is(err, context.Canceled):
		return backends.Unavailable(contextName, err)
	case isNamespaceMissing(err):
		return wrap(backends.ErrInvalid, "namespace %s does not exist in context %s", namespaceOf(err), contextName)
	case apierrors.IsNotFound(err):
		return wrap(backends.ErrNotFound, "%s does not exist in context %s", what, contextName)
	case apierrors.IsAlreadyExists(err):
		return wrap(backends.ErrConflict, "%s already exists in context %s", what, contextName)
	case apierrors.IsConflict(err):
		// A 409 that is not AlreadyExists is a stale resourceVersion:
		// someone changed the object between our read and our write.
		return wrap(backends.ErrConflict, "%s changed while Corral tried to %s it; reload and retry", what, op)
	case apierrors.IsInvalid(err):
		return wrap(backends.ErrInvalid, "the API server refused to %s %s: %s", op, what, invalidFields(err))
	case apierrors.IsBadRequest(err):
		return wrap(backends.ErrInvalid, "the API server refused to %s %s as a bad request", op, what)
	case apierrors.IsForbidden(err):
		return wrap(backends.ErrForbidden, "the credentials of context %s may not %s %s", contextName, op, what)
	case apierrors.IsUnauthorized(err):
		return wrap(backends.ErrForbidden, "context %s refused Corral's credentials; renew them in the kubeconfig", contextName)
	case apierrors.IsServiceUnavailable(err), apierrors.IsTooManyRequests(err):
		return backends.Unavailable(contextName, err)
	case errors.As(err, &status):
		// Any other answer from the server: it tried and failed.
		return backends.Failed(fmt.Sprintf("the API server of context %s could not %s %s", contextName, op, what), err)
	case isTransport(err):
		return backends.Unavailable(contextName, err)
	}
	return backends.Failed(fmt.Sprintf("could not %s %s in context %s", op, what, contextName), err)
}

// isTransport reports whether err happened before the server answered:
// connection refused, a DNS failure, TLS, a dropped connection. client-go
// reports all of these as *url.Error or net errors.
func isTransport(err error) bool {
	var ue *url.Error
	var ne net.Error
	return errors.As(err, &ue) || errors.As(err, &ne)
}

// isNamespaceMissing reports whether err is the NotFound the API server
// answers when an object is created in a namespace that does not exist.
func isNamespaceMissing(err error) bool {
	if !apierrors.IsNotFound(err) {
		return false
	}
	d := details(err)
	return d != nil && d.Kind == "namespaces" && d.Group == ""
}

func namespaceOf(err error) string {
	if d := details(err); d != nil {
		return d.Name
	}
	return ""
}

func details(err error) *metav1.StatusDetails {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return nil
	}
	return status.Status().Details
}

// invalidFields names the fields a 422 complains about, without the
// values: the field paths are safe to show, the messages quote what was
// sent and the server's reasoning.
func invalidFields(err error) string {
	var fields []string
	if d := details(err); d != nil {
		for _, c := range d.Causes {
			if c.Field != "" && !slices.Contains(fields, c.Field) {
				fields = append(fields, c.Field)
			}
		}
	}
	if len(fields) == 0 {
		return "the object is not valid"
	}
	return "invalid " + strings.Join(fields, ", ")
}
