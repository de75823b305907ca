package qemu

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
)

// cmdError is a failed qemu or qemu-img run. Its text carries the command
// line and qemu's stderr, which name host paths: it is only ever a cause,
// never a safe message.
type cmdError struct {
	Args   []string
	Stderr string
	Err    error
}

func (e *cmdError) Error() string {
	return fmt.Sprintf("%s: %v: %s", strings.Join(e.Args, " "), e.Err, strings.TrimSpace(e.Stderr))
}

func (e *cmdError) Unwrap() error { return e.Err }

// missingBinary is returned when a qemu binary is not installed; errors.go
// maps it to Unavailable, since nothing in the context can work without it.
type missingBinary struct {
	Name string
	Err  error
}

func (e *missingBinary) Error() string { return "qemu: " + e.Name + " not found: " + e.Err.Error() }
func (e *missingBinary) Unwrap() error { return e.Err }

// binary resolves name (a path or a command in PATH).
func binary(name string) (string, error) {
	p, err := exec.LookPath(name)
	if err != nil {
		return "", &missingBinary{Name: name, Err: err}
	}
	return p, nil
}

// run runs bin with args and returns its stdout; a failure is a *cmdError
// with the stderr.
func run(ctx context.Context, bin string, args ...string) ([]byte, error) {
	path, err := binary(bin)
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
		return nil, &cmdError{Args: append([]string{bin}, args...), Stderr: stderr.String(), Err: err}
	}
	return stdout.Bytes(), nil
}

func (b *Backend) img(ctx context.Context, args ...string) ([]byte, error) {
	return run(ctx, b.opts.QEMUImgPath, args...)
}

// imageInfo is the part of `qemu-img info --output=json` Corral reads.
type imageInfo struct {
	Format      string `json:"format"`
	VirtualSize int64  `json:"virtual-size"`
	Snapshots   []struct {
		ID       string `json:"id"`
		Name     string `json:"name"`
		DateSec  int64  `json:"date-sec"`
		DateNsec int64  `json:"date-nsec"`
		VMState  int64  `json:"vm-state-size"`
	} `json:"snapshots"`
}

// info reads an image's format, size and snapshots. shared (-U) reads an
// image a running qemu holds locked; the answer may then be a moment stale,
// which is fine for a listing and never used to decide a write.
func (b *Backend) info(ctx context.Context, path string, shared bool) (imageInfo, error) {
	args := []string{"info", "--output=json"}
	if shared {
		args = append(args, "-U")
	}
	out, err := b.img(ctx, append(args, path)...)
	if err != nil {
		return imageInfo{}, err
	}
	var ii imageInfo
	if err := json.Unmarshal(out, &ii); err != nil {
		return imageInfo{}, fmt.Errorf("qemu: qemu-img info: %w", err)
	}
	return ii, nil
}

// createBlank makes an empty qcow2 of sizeMiB; qcow2 is sparse, so a large
// disk costs nothing until the guest writes.
func (b *Backend) createBlank(ctx context.Context, path string, sizeMiB int64) error {
	_, err := b.img(ctx, "create", "-q", "-f", "qcow2", path, mib(sizeMiB))
	return err
}

// convert copies src (of format srcFmt) into a new image dst of format
// dstFmt. It flattens backing chains and drops internal snapshots, which is
// what a copy handed to someone else should do.
func (b *Backend) convert(ctx context.Context, src, srcFmt, dst, dstFmt string) error {
	_, err := b.img(ctx, "convert", "-q", "-f", srcFmt, "-O", dstFmt, src, dst)
	return err
}

// resize grows an image to sizeMiB. Only ever a growth: shrinking would cut
// a guest's filesystem.
func (b *Backend) resize(ctx context.Context, path, format string, sizeMiB int64) error {
	_, err := b.img(ctx, "resize", "-q", "-f", format, path, mib(sizeMiB))
	return err
}

func mib(n int64) string { return strconv.FormatInt(n, 10) + "M" }

// toMiB rounds bytes up to whole MiB.
func toMiB(bytes int64) int64 { return (bytes + 1<<20 - 1) >> 20 }
