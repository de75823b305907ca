package qemu

import (
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"os"

	"github.com/corral-dev/corral/backends"
)

// ExportFormats implements backends.Exporter: qcow2 is the native format.
func (b *Backend) ExportFormats() []string { return []string{"qcow2", "raw.gz"} }

// Export implements backends.Exporter. Only a stopped VM is exported:
// copying a disk the guest is writing to gives a torn image, so a running
// one is refused rather than exported crash-consistent. The copy is made
// with qemu-img convert into a temporary file in Dir (qcow2 output needs a
// seekable file, and raw output is sparse there) and then streamed to w.
func (b *Backend) Export(ctx context.Context, ref backends.InstanceRef, format string, w io.Writer) (backends.Consistency, error) {
	if format != "qcow2" && format != "raw.gz" {
		return "", backends.Invalidf("export format %q is not accepted: use qcow2 or raw.gz", format)
	}
	v, err := b.lookup(ref)
	if err != nil {
		return "", err
	}
	tmp, err := b.exportCopy(ctx, v, format)
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp)
	f, err := os.Open(tmp)
	if err != nil {
		return "", b.fail("export", ref.Name, err)
	}
	defer f.Close()
	if format == "qcow2" {
		_, err = io.Copy(w, &ctxReader{ctx: ctx, r: f})
	} else {
		zw := gzip.NewWriter(w)
		if _, err = io.Copy(zw, &ctxReader{ctx: ctx, r: f}); err == nil {
			err = zw.Close()
		}
	}
	if err != nil {
		// The writer is the caller's (often an HTTP response): a failure
		// here is the copy's, not qemu's.
		return "", backends.Failed(fmt.Sprintf("the export of %s was interrupted", ref.Name), err)
	}
	return backends.ConsistencyOffline, nil
}

// exportCopy converts v's disk into a temporary file and returns its
// path. The lock is held only for the conversion, not for the streaming,
// so a slow reader does not keep the VM from starting.
func (b *Backend) exportCopy(ctx context.Context, v *vm, format string) (string, error) {
	defer b.lock(v.cfg.Name)()
	if _, alive := v.process(); alive {
		return "", backends.Refuse(backends.KindQEMU, "export of a running VM",
			"shut the VM down first (corral stop "+v.cfg.Name+"): a disk copied while the guest writes is torn")
	}
	f, err := os.CreateTemp(b.opts.Dir, ".export-"+v.cfg.Name+"-*")
	if err != nil {
		return "", b.fail("export", v.cfg.Name, err)
	}
	tmp := f.Name()
	_ = f.Close()
	out := "qcow2"
	if format == "raw.gz" {
		out = "raw"
	}
	if err := b.img().Convert(ctx, v.disk(), v.cfg.DiskFormat, tmp, out); err != nil {
		_ = os.Remove(tmp)
		return "", b.fail("export", v.cfg.Name, err)
	}
	return tmp, nil
}

// ctxReader stops a long copy when ctx ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c *ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
