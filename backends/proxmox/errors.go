package proxmox

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	proxmox "github.com/luthermonson/go-proxmox"

	"github.com/corral-dev/corral/backends"
)

// mapError turns an error of a go-proxmox call into one of the shared
// kinds. op is a verb phrase ("start", "list the guests of") and name the
// object the caller named; both end up in the safe message, which
// therefore never carries the server's text, the URL or the token: PVE's
// messages name hosts, storage paths and users, and a transport error
// (*url.Error) names the URL. All of that travels only as the cause.
func mapError(contextName, op, name string, err error) error {
	if err == nil {
		return nil
	}
	if backends.KindOf(err) != nil { // already ours
		return err
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, proxmox.ErrTimeout) {
		return &backends.Error{Kind: backends.ErrTimeout, Msg: fmt.Sprintf("context %s did not answer in time", contextName), Err: err}
	}
	var tf *proxmox.TaskFailedError
	if errors.As(err, &tf) {
		return taskError(op, name, tf)
	}
	var api *proxmox.APIError
	if !errors.As(err, &api) {
		// No HTTP answer at all: refused, reset, DNS, TLS. The
		// context cannot be reached; retrying later may help.
		return backends.Unavailable(contextName, err)
	}
	switch {
	case api.StatusCode == http.StatusUnauthorized || api.StatusCode == http.StatusForbidden:
		return &backends.Error{Kind: backends.ErrForbidden, Msg: fmt.Sprintf("the API token of context %s is not accepted: check the token id, its secret and its privileges", contextName), Err: err}
	case errors.Is(err, proxmox.ErrNotFound):
		// A 404, or PVE's 500/400 whose text says the object is gone.
		return &backends.Error{Kind: backends.ErrNotFound, Msg: fmt.Sprintf("%s does not exist in context %s", name, contextName), Err: err}
	case alreadyExists(api):
		return &backends.Error{Kind: backends.ErrConflict, Msg: fmt.Sprintf("%s already exists in context %s", name, contextName), Err: err}
	case api.StatusCode == http.StatusBadRequest:
		return &backends.Error{Kind: backends.ErrInvalid, Msg: fmt.Sprintf("Proxmox VE refused the parameters to %s %s", op, name), Err: err}
	case api.StatusCode == proxmox.StatusNodeConnectFailed || api.StatusCode == proxmox.StatusNodeRequestFailed ||
		api.StatusCode == http.StatusBadGateway || api.StatusCode == http.StatusServiceUnavailable || api.StatusCode == http.StatusGatewayTimeout:
		// pveproxy could not reach the node, or a proxy in front of it
		// could not reach pveproxy.
		return backends.Unavailable(contextName, err)
	}
	return backends.Failed(fmt.Sprintf("Proxmox VE could not %s %s", op, name), err)
}

// alreadyExists reports PVE's "already exists" (a taken vmid) and
// "already used" (a snapshot name) answers.
func alreadyExists(api *proxmox.APIError) bool {
	texts := []string{api.Message}
	for _, v := range api.Errors {
		texts = append(texts, v)
	}
	for _, t := range texts {
		if strings.Contains(t, "already exists") || strings.Contains(t, "already used") {
			return true
		}
	}
	return false
}

// taskError maps a task that ran and failed. Its exit status is PVE's own
// text ("VM 105 already running", "storage 'x' does not exist") and stays
// in the cause; a state conflict that raced the adapter's own check is
// still reported as one.
func taskError(op, name string, tf *proxmox.TaskFailedError) error {
	s := strings.ToLower(tf.ExitStatus)
	switch {
	case strings.Contains(s, "already running"), strings.Contains(s, "not running"), strings.Contains(s, "is locked"),
		strings.Contains(s, "conflict"):
		return &backends.Error{Kind: backends.ErrConflict, Msg: fmt.Sprintf("cannot %s %s in its current state", op, name), Err: tf}
	}
	return backends.Failed(fmt.Sprintf("the Proxmox VE task to %s %s failed", op, name), tf)
}

// fail maps err of op on name.
func (b *Backend) fail(op, name string, err error) error {
	return mapError(b.opts.Context, op, name, err)
}
