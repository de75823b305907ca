package qemu

import (
	"errors"
	"os/exec"
)

// Exported for the table tests in qemu_test, which check the mappings
// without running qemu.
var (
	MapError = mapError
	StateOf  = stateOf
)

// CmdError builds the error a failed qemu-img run returns.
func CmdError(stderr string) error {
	return &cmdError{Args: []string{"qemu-img"}, Stderr: stderr, Err: errors.New("exit status 1")}
}

// MissingBinary builds the error of a binary that is not installed.
func MissingBinary(name string) error { return &missingBinary{Name: name, Err: exec.ErrNotFound} }
