package libvirt

import (
	"context"
	"errors"
	"fmt"

	"libvirt.org/go/libvirt"

	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/internal/qemuimg"
)

// unavailableCodes are libvirt's error codes that mean the daemon (or the
// library itself) could not be reached, rather than that it refused or
// failed one operation: retrying later may help, so they map to
// ErrUnavailable (503) and name the context.
var unavailableCodes = []libvirt.ErrorNumber{
	libvirt.ERR_NO_CONNECT,
	libvirt.ERR_INVALID_CONN,
	libvirt.ERR_SYSTEM_ERROR, // socket, fork or file errors while talking to the daemon
	libvirt.ERR_RPC,
	libvirt.ERR_NO_SERVER,
	libvirt.ERR_NO_CLIENT,
	libvirt.ERR_AUTH_FAILED,
	libvirt.ERR_AUTH_CANCELLED,
	libvirt.ERR_AUTH_UNAVAILABLE,
	libvirt.ERR_OPERATION_TIMEOUT,
}

// mapError turns an error of a libvirt call into one of the shared kinds.
// op is a verb phrase ("start", "delete snapshot before of") and name the
// object the caller named; both end up in the safe message, which
// therefore never carries libvirt's own text: that text can hold paths,
// hostnames and URIs, so it travels only as the wrapped cause.
func mapError(contextName, op, name string, err error) error {
	if err == nil {
		return nil
	}
	// Already one of ours (a Conflict found by a state check, a refusal):
	// keep it rather than wrapping it as a failure.
	if backends.KindOf(err) != nil {
		return err
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return backends.Unavailable(contextName, err)
	}
	var missing *qemuimg.MissingBinary
	if errors.As(err, &missing) {
		return backends.Unavailable(contextName, err)
	}
	var lv libvirt.Error
	if !errors.As(err, &lv) {
		return backends.Failed(fmt.Sprintf("libvirt could not %s %s", op, name), err)
	}
	switch lv.Code {
	case libvirt.ERR_NO_DOMAIN:
		return &backends.Error{Kind: backends.ErrNotFound, Msg: fmt.Sprintf("instance %s does not exist in context %s", name, contextName), Err: err}
	case libvirt.ERR_NO_DOMAIN_SNAPSHOT:
		return &backends.Error{Kind: backends.ErrNotFound, Msg: fmt.Sprintf("snapshot %s does not exist", name), Err: err}
	case libvirt.ERR_OPERATION_INVALID:
		// libvirt's word for "not in this state": already running, not
		// running, has snapshots, and so on.
		return &backends.Error{Kind: backends.ErrConflict, Msg: fmt.Sprintf("cannot %s %s in its current state", op, name), Err: err}
	case libvirt.ERR_DOM_EXIST:
		return &backends.Error{Kind: backends.ErrConflict, Msg: fmt.Sprintf("%s already exists in context %s", name, contextName), Err: err}
	case libvirt.ERR_OPERATION_UNSUPPORTED, libvirt.ERR_NO_SUPPORT:
		// A refusal carries no cause of its own; wrap both so the log keeps
		// libvirt's reason while SafeMessage finds the refusal.
		refusal := backends.Refuse(backends.KindLibvirt, op, fmt.Sprintf("the hypervisor of context %s does not offer it; use virsh on the host", contextName))
		return fmt.Errorf("%w: %w", refusal, err)
	}
	for _, c := range unavailableCodes {
		if lv.Code == c {
			return backends.Unavailable(contextName, err)
		}
	}
	return backends.Failed(fmt.Sprintf("libvirt could not %s %s", op, name), err)
}

// isCode reports whether err is a libvirt error with one of codes.
func isCode(err error, codes ...libvirt.ErrorNumber) bool {
	var lv libvirt.Error
	if !errors.As(err, &lv) {
		return false
	}
	for _, c := range codes {
		if lv.Code == c {
			return true
		}
	}
	return false
}

// diskError maps an error of qemu-img on a disk of this host: a qemu-img
// that is not installed, or a run cut short by ctx, leaves the context
// unable to do anything with disks (Unavailable, as the qemu backend
// answers); any other failure is a Failed with msg as its safe text.
func diskError(contextName, msg string, err error) error {
	var missing *qemuimg.MissingBinary
	if errors.As(err, &missing) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return backends.Unavailable(contextName, err)
	}
	return backends.Failed(msg, err)
}
