package qemuimg_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corral-dev/corral/backends/qemu/qemutest"
	"github.com/corral-dev/corral/internal/qemuimg"
)

// TestTool runs the real qemu-img: create, info, resize and convert an
// image, and a failure's error carries the command and its stderr.
func TestTool(t *testing.T) {
	qemutest.Tools(t)
	ctx := context.Background()
	var img qemuimg.Tool
	dir := t.TempDir()
	a := filepath.Join(dir, "a.qcow2")
	if err := img.Create(ctx, a, 64); err != nil {
		t.Fatal(err)
	}
	ii, err := img.Info(ctx, a, false)
	if err != nil || ii.Format != "qcow2" || qemuimg.ToMiB(ii.VirtualSize) != 64 {
		t.Fatalf("Info = %+v, %v; want a qcow2 of 64 MiB", ii, err)
	}
	if err := img.Resize(ctx, a, "qcow2", 96); err != nil {
		t.Fatal(err)
	}
	b := filepath.Join(dir, "b.raw")
	if err := img.Convert(ctx, a, "qcow2", b, "raw"); err != nil {
		t.Fatal(err)
	}
	if ii, err := img.Info(ctx, b, true); err != nil || ii.Format != "raw" || qemuimg.ToMiB(ii.VirtualSize) != 96 {
		t.Fatalf("Info of the copy = %+v, %v; want a raw of 96 MiB", ii, err)
	}

	_, err = img.Info(ctx, filepath.Join(dir, "none.qcow2"), false)
	var ce *qemuimg.CmdError
	if !errors.As(err, &ce) || !strings.HasPrefix(ce.Error(), "qemuimg: qemu-img info") || ce.Stderr == "" {
		t.Fatalf("Info of a missing file: %v; want a CmdError with qemu-img's stderr", err)
	}
	_, err = qemuimg.Tool("/nonexistent/qemu-img").Run(ctx, "--version")
	var mb *qemuimg.MissingBinary
	if !errors.As(err, &mb) || mb.Name != "/nonexistent/qemu-img" || !strings.HasPrefix(mb.Error(), "qemuimg: ") {
		t.Fatalf("a missing qemu-img: %v; want MissingBinary", err)
	}
}

// TestInfoUnreadable: output qemu-img should never give is an error of
// this package, prefixed like the others. The stand-in binary only prints
// the output; it tests the parsing, not qemu-img.
func TestInfoUnreadable(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "qemu-img")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\necho not json\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	_, err := qemuimg.Tool(bin).Info(context.Background(), "disk.qcow2", false)
	if err == nil || !strings.HasPrefix(err.Error(), "qemuimg: "+bin+" info: ") {
		t.Fatalf("Info of output that is not JSON: %v; want an error prefixed qemuimg: %s info", err, bin)
	}
}
