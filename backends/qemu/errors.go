package qemu

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/corral-dev/corral/backends"
)

// fail maps an error of op ("start", "export") on the VM name to a shared
// kind. The safe message names only the operation and the VM: qemu's and
// qemu-img's own text carries host paths, so it travels as the cause.
func (b *Backend) fail(op, name string, err error) error {
	return mapError(b.opts.Context, op, name, err)
}

func mapError(contextName, op, name string, err error) error {
	if err == nil {
		return nil
	}
	// Already one of ours (a Conflict from a state check, a refusal).
	if backends.KindOf(err) != nil {
		return err
	}
	var missing *missingBinary
	if errors.As(err, &missing) {
		return backends.Unavailable(contextName, err)
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return &backends.Error{Kind: backends.ErrTimeout, Msg: fmt.Sprintf("qemu did not %s %s in time", op, name), Err: err}
	}
	var ce *cmdError
	if errors.As(err, &ce) && lockFailure(ce.Stderr) {
		return &backends.Error{Kind: backends.ErrConflict, Msg: fmt.Sprintf("cannot %s %s: the disk is in use", op, name), Err: err}
	}
	return backends.Failed(fmt.Sprintf("qemu could not %s %s", op, name), err)
}

// lockFailure reports whether qemu or qemu-img failed because another
// process holds the image's lock: a running qemu, or a second Corral.
func lockFailure(stderr string) bool {
	return strings.Contains(stderr, `Failed to get "write" lock`) ||
		strings.Contains(stderr, `Failed to get "consistent read" lock`) ||
		strings.Contains(stderr, `Failed to get shared "write" lock`)
}
