// Package qemuimg runs qemu-img, and the other qemu binaries, for the
// backends that keep disk files on this host (qemu and libvirt): one
// implementation of the image operations both need.
package qemuimg

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
)

// CmdError is a failed run of a qemu binary. Its text carries the command
// line and the binary's stderr, which name host paths: it is only ever a
// cause, never a safe message.
type CmdError struct {
	Args   []string
	Stderr string
	Err    error
}

func (e *CmdError) Error() string {
	return fmt.Sprintf("qemuimg: %s: %v: %s", strings.Join(e.Args, " "), e.Err, strings.TrimSpace(e.Stderr))
}

func (e *CmdError) Unwrap() error { return e.Err }

// MissingBinary is returned when a binary is not installed: nothing that
// needs it can work.
type MissingBinary struct {
	Name string
	Err  error
}

func (e *MissingBinary) Error() string { return "qemuimg: " + e.Name + " not found: " + e.Err.Error() }
func (e *MissingBinary) Unwrap() error { return e.Err }

// Binary resolves name (a path or a command in PATH), or returns a
// *MissingBinary.
func Binary(name string) (string, error) {
	p, err := exec.LookPath(name)
	if err != nil {
		return "", &MissingBinary{Name: name, Err: err}
	}
	return p, nil
}

// Run runs bin with args and returns its stdout; a failure is a
// *CmdError with the stderr (ctx's error when ctx ended the run).
func Run(ctx context.Context, bin string, args ...string) ([]byte, error) {
	path, err := Binary(bin)
	if err != nil {
		return nil, err
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return nil, &CmdError{Args: append([]string{bin}, args...), Stderr: stderr.String(), Err: err}
	}
	return stdout.Bytes(), nil
}

// Tool is the qemu-img binary: a path, or a command in PATH; "" is
// qemu-img.
type Tool string

func (t Tool) bin() string {
	if t == "" {
		return "qemu-img"
	}
	return string(t)
}

// Run runs qemu-img with args (see Run).
func (t Tool) Run(ctx context.Context, args ...string) ([]byte, error) {
	return Run(ctx, t.bin(), args...)
}

// Info is the part of `qemu-img info --output=json` Corral reads.
type Info struct {
	Format      string     `json:"format"`
	VirtualSize int64      `json:"virtual-size"`
	Snapshots   []Snapshot `json:"snapshots"`
}

// Snapshot is one internal snapshot of a qcow2 image.
type Snapshot struct {
	ID       string `json:"id"`
	Name     string `json:"name"`
	DateSec  int64  `json:"date-sec"`
	DateNsec int64  `json:"date-nsec"`
	VMState  int64  `json:"vm-state-size"`
}

// Info reads an image's format, size and snapshots. shared (-U) reads an
// image a running guest holds locked; the answer may then be a moment
// stale, which is fine for a listing and never used to decide a write.
func (t Tool) Info(ctx context.Context, path string, shared bool) (Info, error) {
	args := []string{"info", "--output=json"}
	if shared {
		args = append(args, "-U")
	}
	out, err := t.Run(ctx, append(args, path)...)
	if err != nil {
		return Info{}, err
	}
	var ii Info
	if err := json.Unmarshal(out, &ii); err != nil {
		return Info{}, fmt.Errorf("qemuimg: %s info: %w", t.bin(), err)
	}
	return ii, nil
}

// Create makes an empty qcow2 of sizeMiB at path; qcow2 is sparse, so a
// large disk costs nothing until the guest writes.
func (t Tool) Create(ctx context.Context, path string, sizeMiB int64) error {
	_, err := t.Run(ctx, "create", "-q", "-f", "qcow2", path, MiB(sizeMiB))
	return err
}

// Convert copies src (of format srcFmt) into a new image dst of format
// dstFmt. It flattens backing chains and drops internal snapshots, which
// is what a copy handed to someone else should do.
func (t Tool) Convert(ctx context.Context, src, srcFmt, dst, dstFmt string) error {
	_, err := t.Run(ctx, "convert", "-q", "-f", srcFmt, "-O", dstFmt, src, dst)
	return err
}

// Resize grows an image of format to sizeMiB. Callers only ever grow one:
// shrinking would cut a guest's filesystem.
func (t Tool) Resize(ctx context.Context, path, format string, sizeMiB int64) error {
	_, err := t.Run(ctx, "resize", "-q", "-f", format, path, MiB(sizeMiB))
	return err
}

// MiB is a size argument of qemu-img: n MiB.
func MiB(n int64) string { return strconv.FormatInt(n, 10) + "M" }

// ToMiB rounds bytes up to whole MiB.
func ToMiB(bytes int64) int64 { return (bytes + 1<<20 - 1) >> 20 }
