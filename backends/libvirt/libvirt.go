// Package libvirt is the backend for libvirt contexts: a libvirtd with its
// QEMU driver (qemu:///system, qemu+ssh://host/system, ...) or libvirt's
// built-in test:///default driver.
//
// It speaks to libvirt through libvirt.org/go/libvirt built with the
// libvirt_dlopen tag: libvirt.so.0 is loaded on first use rather than
// linked, so a host without libvirt still runs the binary and the context
// reports itself unavailable instead of the process failing to start.
// Domain and snapshot XML is built and read with libvirt.org/go/libvirtxml.
//
// Corral keeps what libvirt has no field for (tags, the creation time) in
// the domain's <metadata> under its own XML namespace, so the domain stays
// the only truth about itself.
package libvirt

import (
	"cmp"
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"libvirt.org/go/libvirt"

	"github.com/corral-dev/corral/backends"
)

var (
	_ backends.Backend     = (*Backend)(nil)
	_ backends.Snapshotter = (*Backend)(nil)
	_ backends.Cloner      = (*Backend)(nil)
	_ backends.Doctor      = (*Backend)(nil)
)

// Options configure one libvirt context.
type Options struct {
	// Context names the context, e.g. "lab"; it appears in references and
	// in messages, so it must not carry credentials (the URI may).
	Context string
	// URI is the libvirt connection URI: "qemu:///system",
	// "qemu+ssh://host/system", "test:///default".
	URI string
	// DataDir is where disk images of new domains go for hypervisor URIs.
	// It may be empty for test:/// URIs, whose driver has no storage.
	DataDir string
	// Kernel, Initrd and Append, when Kernel is set, make new domains boot
	// that kernel directly instead of their disk (the tests' tiny guest,
	// as the qemu backend's options of the same names).
	Kernel, Initrd, Append string
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Backend is one libvirt context. It is safe for concurrent use: it keeps
// a single connection, opened on first use and reopened when it dies.
type Backend struct {
	opts Options
	test bool // the URI names libvirt's in-process test driver

	mu   sync.Mutex
	conn *libvirt.Connect
}

// New returns a backend for opts. It does not connect: libvirt is loaded
// and the connection opened on the first call, so constructing a context
// on a host without libvirt cannot fail.
func New(opts Options) *Backend {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Backend{opts: opts, test: isTestURI(opts.URI)}
}

// isTestURI reports whether uri names libvirt's test driver ("test:///default",
// "test+unix://..."), which has its own domain type and no storage.
func isTestURI(uri string) bool {
	u, err := url.Parse(uri)
	if err != nil {
		return false
	}
	return u.Scheme == "test" || strings.HasPrefix(u.Scheme, "test+")
}

// Close releases the connection; calls in flight finish on it first. A
// later call opens a new one, which for test:///default means a fresh,
// predefined state.
func (b *Backend) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.conn == nil {
		return nil
	}
	_, err := b.conn.Close()
	b.conn = nil
	if err != nil {
		return mapError(b.opts.Context, "close the connection to", b.opts.Context, err)
	}
	return nil
}

// acquire returns the live connection with a reference the caller drops
// with release, opening it when there is none or the previous one died
// (libvirt notices a dead socket on the call that hits it, after which
// IsAlive reports false). The reference keeps the C object alive while
// another goroutine replaces or closes b.conn: without it, a reconnect
// could free a connection still in use. The test driver keeps its whole
// state in the connection, so a healthy one is never replaced.
func (b *Backend) acquire(ctx context.Context) (*libvirt.Connect, error) {
	if err := ctx.Err(); err != nil {
		return nil, backends.Unavailable(b.opts.Context, err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.conn != nil {
		if alive, err := b.conn.IsAlive(); err != nil || !alive {
			_, _ = b.conn.Close() // drops only b's reference
			b.conn = nil
		}
	}
	if b.conn == nil {
		// Without libvirt.so.0 this is where the dlopen fails; the error
		// is an ordinary one and the context is simply unreachable.
		c, err := libvirt.NewConnect(b.opts.URI)
		if err != nil {
			return nil, backends.Unavailable(b.opts.Context, err)
		}
		b.conn = c
	}
	if err := b.conn.Ref(); err != nil {
		return nil, backends.Unavailable(b.opts.Context, err)
	}
	return b.conn, nil
}

// release drops a reference taken by acquire.
func release(c *libvirt.Connect) { _, _ = c.Close() }

// Kind implements backends.Backend.
func (b *Backend) Kind() backends.Kind { return backends.KindLibvirt }

// Context implements backends.Backend.
func (b *Backend) Context() string { return b.opts.Context }

func (b *Backend) ref(name string) backends.InstanceRef {
	return backends.InstanceRef{Backend: backends.KindLibvirt, Context: b.opts.Context, Name: name}
}

// fail maps err of op on name to a shared kind.
func (b *Backend) fail(op, name string, err error) error {
	return mapError(b.opts.Context, op, name, err)
}

// lookup returns the domain ref names. Names are not checked against
// backends.ValidateName here: domains defined outside Corral may use any name libvirt
// accepts, and they must still be reachable. The caller frees the domain.
func (b *Backend) lookup(ctx context.Context, ref backends.InstanceRef) (*libvirt.Domain, error) {
	if ref.Backend != backends.KindLibvirt || ref.Context != b.opts.Context || ref.Peer != "" || ref.Namespace != "" || ref.Name == "" {
		return nil, backends.NotFoundf("instance %s is not in context %s", ref, b.opts.Context)
	}
	c, err := b.acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer release(c)
	d, err := c.LookupDomainByName(ref.Name)
	if err != nil {
		return nil, b.fail("find", ref.Name, err)
	}
	return d, nil
}

// List implements backends.Backend: one ListAllDomains, then per domain
// one GetState and one GetXMLDesc.
func (b *Backend) List(ctx context.Context) ([]backends.Instance, error) {
	c, err := b.acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer release(c)
	doms, err := c.ListAllDomains(0)
	if err != nil {
		return nil, b.fail("list the domains of", b.opts.Context, err)
	}
	defer func() {
		for i := range doms {
			_ = doms[i].Free()
		}
	}()
	out := make([]backends.Instance, 0, len(doms))
	for i := range doms {
		in, err := b.instance(&doms[i])
		if err != nil {
			// A domain undefined between the listing and this call is
			// gone, not an error of the listing.
			if isCode(err, libvirt.ERR_NO_DOMAIN) {
				continue
			}
			return nil, b.fail("read the domains of", b.opts.Context, err)
		}
		out = append(out, in)
	}
	slices.SortFunc(out, func(a, c backends.Instance) int { return cmp.Compare(a.Ref.Name, c.Ref.Name) })
	return out, nil
}

// Get implements backends.Backend.
func (b *Backend) Get(ctx context.Context, ref backends.InstanceRef) (backends.Instance, error) {
	d, err := b.lookup(ctx, ref)
	if err != nil {
		return backends.Instance{}, err
	}
	defer d.Free()
	in, err := b.instance(d)
	if err != nil {
		return backends.Instance{}, b.fail("read", ref.Name, err)
	}
	return in, nil
}

// Create implements backends.Backend. It defines a persistent domain, with
// a new qcow2 disk in DataDir for hypervisor URIs, and starts it when the
// spec asks.
func (b *Backend) Create(ctx context.Context, spec backends.Spec) (backends.Instance, error) {
	if err := backends.ValidateName("instance", spec.Name); err != nil {
		return backends.Instance{}, err
	}
	if spec.Namespace != "" {
		return backends.Instance{}, backends.Invalidf("libvirt has no namespaces: leave the namespace of %s empty", spec.Name)
	}
	if spec.Type == backends.TypeCT {
		return backends.Instance{}, backends.Refuse(backends.KindLibvirt, "container", "create a VM instead")
	}
	if spec.Image != "" {
		return backends.Instance{}, backends.Refuse(backends.KindLibvirt, "create from an image", "create a blank instance, or use the qemu backend's image catalog")
	}
	if spec.CPUs < 0 || spec.MemoryMiB < 0 || spec.DiskMiB < 0 {
		return backends.Instance{}, backends.Invalidf("CPUs, memory and disk of %s must not be negative", spec.Name)
	}
	c, err := b.acquire(ctx)
	if err != nil {
		return backends.Instance{}, err
	}
	defer release(c)
	// DomainDefineXML would redefine a domain of the same name and UUID,
	// and reports a clash as a generic failure otherwise: check first.
	if err := b.nameFree(c, spec.Name); err != nil {
		return backends.Instance{}, err
	}
	var disk string
	if !b.test {
		if disk, err = b.createDisk(ctx, spec.Name, cmp.Or(spec.DiskMiB, defaultDiskMiB)); err != nil {
			return backends.Instance{}, err
		}
	}
	return b.define(c, spec, disk, "start the new instance")
}

// define defines the domain of spec on disk (removed if the definition
// fails), starts it when spec.Start asks (what names the start in an
// error) and returns it as an instance.
func (b *Backend) define(c *libvirt.Connect, spec backends.Spec, disk, what string) (backends.Instance, error) {
	doc, err := b.domainXML(spec, disk)
	if err != nil {
		_ = removeDisk(disk)
		return backends.Instance{}, b.fail("describe", spec.Name, err)
	}
	d, err := c.DomainDefineXML(doc)
	if err != nil {
		_ = removeDisk(disk)
		return backends.Instance{}, b.fail("define", spec.Name, err)
	}
	defer d.Free()
	if spec.Start {
		if err := d.Create(); err != nil {
			return backends.Instance{}, b.fail(what, spec.Name, err)
		}
	}
	in, err := b.instance(d)
	if err != nil {
		return backends.Instance{}, b.fail("read", spec.Name, err)
	}
	return in, nil
}

// nameFree returns a Conflict when a domain called name exists.
func (b *Backend) nameFree(c *libvirt.Connect, name string) error {
	d, err := c.LookupDomainByName(name)
	if err == nil {
		_ = d.Free()
		return backends.Conflictf("an instance named %s already exists in context %s", name, b.opts.Context)
	}
	if !isCode(err, libvirt.ERR_NO_DOMAIN) {
		return b.fail("look up", name, err)
	}
	return nil
}

// Delete implements backends.Backend: it powers the domain off, undefines
// it with its snapshot metadata, managed save image and NVRAM, and removes
// the disk images Corral created for it in DataDir.
func (b *Backend) Delete(ctx context.Context, ref backends.InstanceRef) error {
	d, err := b.lookup(ctx, ref)
	if err != nil {
		return err
	}
	defer d.Free()
	def, err := readDomain(d)
	if err != nil {
		return b.fail("read", ref.Name, err)
	}
	if active, err := d.IsActive(); err != nil {
		return b.fail("delete", ref.Name, err)
	} else if active {
		// Destroy of a domain that stopped in the meantime is harmless.
		if err := d.Destroy(); err != nil && !isCode(err, libvirt.ERR_OPERATION_INVALID) {
			return b.fail("stop", ref.Name, err)
		}
	}
	if err := undefine(d); err != nil {
		return b.fail("delete", ref.Name, err)
	}
	for _, p := range b.ownedDisks(def) {
		if err := removeDisk(p); err != nil {
			return backends.Failed(fmt.Sprintf("deleted %s but could not remove its disk", ref.Name), err)
		}
	}
	if p := b.serialLog(ref.Name); p != "" {
		_ = removeDisk(p) // the serial log Corral asked for; gone with the domain
	}
	return nil
}

// undefine removes the definition with everything libvirt keeps beside
// it. Not every driver knows every flag (the test driver refuses NVRAM),
// so it retries with fewer flags on an invalid-argument or unsupported
// answer; without SNAPSHOTS_METADATA a domain with snapshots cannot be
// undefined at all, so that flag is dropped last.
func undefine(d *libvirt.Domain) error {
	attempts := []libvirt.DomainUndefineFlagsValues{
		libvirt.DOMAIN_UNDEFINE_SNAPSHOTS_METADATA | libvirt.DOMAIN_UNDEFINE_MANAGED_SAVE | libvirt.DOMAIN_UNDEFINE_NVRAM | libvirt.DOMAIN_UNDEFINE_CHECKPOINTS_METADATA,
		libvirt.DOMAIN_UNDEFINE_SNAPSHOTS_METADATA | libvirt.DOMAIN_UNDEFINE_MANAGED_SAVE,
		libvirt.DOMAIN_UNDEFINE_SNAPSHOTS_METADATA,
		0,
	}
	var err error
	for _, flags := range attempts {
		if err = d.UndefineFlags(flags); err == nil || !isCode(err, libvirt.ERR_INVALID_ARG, libvirt.ERR_NO_SUPPORT, libvirt.ERR_OPERATION_UNSUPPORTED, libvirt.ERR_ARGUMENT_UNSUPPORTED) {
			return err
		}
	}
	return fmt.Errorf("libvirt: undefine refused every flag set: %w", err)
}
