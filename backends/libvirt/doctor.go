package libvirt

import (
	"cmp"
	"context"
	"fmt"

	"libvirt.org/go/libvirt"

	"github.com/corral-dev/corral/backends"
)

// Doctor implements backends.Doctor. Messages name the context, never the
// URI: a URI can carry a user name, a host and keys.
func (b *Backend) Doctor(ctx context.Context) []backends.Check {
	lib := backends.Check{Name: "libvirt library loads"}
	v, err := libvirt.GetVersion()
	if err != nil {
		lib.Message = "libvirt.so.0 could not be loaded: install libvirt's client library (Debian: libvirt0)"
		// Nothing else can work without the library.
		return []backends.Check{lib}
	}
	lib.OK, lib.Message = true, "libvirt "+version(v)

	answers := backends.Check{Name: fmt.Sprintf("connection to %s answers", b.opts.Context)}
	hyper := backends.Check{Name: "hypervisor version"}
	c, err := b.acquire(ctx)
	if err == nil {
		defer release(c)
		// GetLibVersion is a round trip to the daemon on remote URIs, so it
		// proves the connection is usable, not merely open.
		var srv uint32
		if srv, err = c.GetLibVersion(); err == nil {
			answers.OK, answers.Message = true, fmt.Sprintf("context %s answers with libvirt %s", b.opts.Context, version(srv))
		}
	}
	if err != nil {
		answers.Message = cmp.Or(backends.SafeMessage(b.fail("reach", b.opts.Context, err)), fmt.Sprintf("context %s does not answer", b.opts.Context))
		hyper.Message = "not checked: the connection does not answer"
		return []backends.Check{lib, answers, hyper}
	}
	typ, err := c.GetType()
	var hv uint32
	if err == nil {
		hv, err = c.GetVersion()
	}
	switch {
	case err != nil:
		hyper.Message = fmt.Sprintf("context %s did not report its hypervisor", b.opts.Context)
	case hv == 0:
		// libvirt reports 0 when the driver does not know the version.
		hyper.OK, hyper.Message = true, typ+" (version unknown)"
	default:
		hyper.OK, hyper.Message = true, typ+" "+version(hv)
	}
	return []backends.Check{lib, answers, hyper}
}

// version formats libvirt's packed major*1,000,000 + minor*1,000 + release.
func version(v uint32) string {
	return fmt.Sprintf("%d.%d.%d", v/1000000, v/1000%1000, v%1000)
}
