// Package instances is the use case behind every surface's VM lifecycle:
// resolve what the caller named, validate, run the change as a task on the
// right backend, refresh that context, and keep the registry in step.
package instances

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/dustin/go-humanize"

	"github.com/corral-dev/corral/app/fleet"
	"github.com/corral-dev/corral/app/images"
	"github.com/corral-dev/corral/app/tasks"
	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/store"
)

// Registry is the slice of the store the service keeps in step.
type Registry interface {
	EnsureInstance(ctx context.Context, ref string) (store.Instance, error)
	SetInstanceMetadata(ctx context.Context, ref, password, metadata string) error
	DeleteInstance(ctx context.Context, ref string) error
}

// Service runs instance operations. Handlers of every surface call it.
type Service struct {
	fleet    *fleet.Fleet
	tasks    *tasks.Manager
	registry Registry
	log      *slog.Logger
	images   *images.Resolver
}

// Option configures a Service.
type Option func(*Service)

// WithImages lets Create take catalog names and URLs as images, fetched
// (with progress in the task) into the resolver's cache. Without it, an
// image is handed to the backend as given.
func WithImages(r *images.Resolver) Option { return func(s *Service) { s.images = r } }

// New returns a Service.
func New(f *fleet.Fleet, t *tasks.Manager, r Registry, log *slog.Logger, opts ...Option) *Service {
	if log == nil {
		log = slog.Default()
	}
	s := &Service{fleet: f, tasks: t, registry: r, log: log}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Fleet returns the fleet the service works on.
func (s *Service) Fleet() *fleet.Fleet { return s.fleet }

// resolve turns text into a reference and its backend.
func (s *Service) resolve(text string) (backends.InstanceRef, backends.Backend, error) {
	ref, err := s.fleet.Snapshot().Resolve(text)
	if err != nil {
		return ref, nil, err
	}
	b, err := s.fleet.Backend(ref)
	return ref, b, err
}

// Get returns the instance as its backend reports it now.
func (s *Service) Get(ctx context.Context, text string) (backends.Instance, error) {
	ref, b, err := s.resolve(text)
	if err != nil {
		return backends.Instance{}, err
	}
	cctx, cancel := s.fleet.CallContext(ctx)
	defer cancel()
	in, err := b.Get(cctx, ref)
	return in, timeout(err, cctx, ref)
}

// timeout turns a call cut short by the per-context timeout into an
// Unavailable error naming the context.
func timeout(err error, ctx context.Context, ref backends.InstanceRef) error {
	if err != nil && backends.KindOf(err) == nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return backends.Unavailable(ref.ContextKey(), err)
	}
	return err
}

// Power performs action on the instance named by text as a task and
// waits for it.
func (s *Service) Power(ctx context.Context, o tasks.Origin, text, action string) (store.Task, error) {
	spec := tasks.Spec{Action: action, Target: text, Origin: o}
	a, err := backends.ParseAction(action)
	if err != nil {
		return store.Task{}, s.tasks.Refused(ctx, spec, err)
	}
	ref, b, err := s.resolve(text)
	if err != nil {
		return store.Task{}, s.tasks.Refused(ctx, spec, err)
	}
	spec.Action, spec.Target = string(a), ref.String()
	t, err := s.tasks.Do(ctx, spec, func(ctx context.Context, r *tasks.Run) error {
		r.Logf("%s %s", a, ref)
		cctx, cancel := s.fleet.CallContext(ctx)
		defer cancel()
		if err := b.Power(cctx, ref, a); err != nil {
			return timeout(err, cctx, ref)
		}
		r.Logf("%s: done", a)
		return nil
	})
	s.fleet.RefreshContext(context.WithoutCancel(ctx), ref.ContextKey())
	return t, err
}

// Delete removes the instance and its registry entry as a task.
func (s *Service) Delete(ctx context.Context, o tasks.Origin, text string) (store.Task, error) {
	spec := tasks.Spec{Action: "delete", Target: text, Origin: o}
	ref, b, err := s.resolve(text)
	if err != nil {
		return store.Task{}, s.tasks.Refused(ctx, spec, err)
	}
	spec.Target = ref.String()
	t, err := s.tasks.Do(ctx, spec, func(ctx context.Context, r *tasks.Run) error {
		r.Logf("delete %s", ref)
		cctx, cancel := s.fleet.CallContext(ctx)
		defer cancel()
		if err := b.Delete(cctx, ref); err != nil {
			return timeout(err, cctx, ref)
		}
		if err := s.registry.DeleteInstance(ctx, ref.String()); err != nil {
			s.log.Error("instances: registry entry left behind", "ref", ref.String(), "err", err)
		}
		r.Logf("deleted")
		return nil
	})
	s.fleet.RefreshContext(context.WithoutCancel(ctx), ref.ContextKey())
	return t, err
}

// pvcChecker is implemented by backends that boot VMs from existing PVCs
// (KubeVirt): Create asks it before the task starts, so a PVC that does
// not exist is a 400 naming it rather than a failed task.
type pvcChecker interface {
	CheckPVC(ctx context.Context, namespace, name string) error
}

// CreateRequest is what a caller asks for. Sizes are text as typed.
type CreateRequest struct {
	Context   string // context key, e.g. "libvirt/test"; optional with one context
	Name      string
	Namespace string
	CPUs      int
	Memory    string // default 1Gi
	Disk      string // default 10Gi
	Image     string
	// PVC names an existing PVC to boot from instead of Image (KubeVirt
	// contexts only).
	PVC   string
	Tags  []string
	Start bool
	// SSHKey is an authorized key for the default user; UserData replaces
	// the generated cloud-init user-data. A password is always generated
	// and kept in the registry.
	SSHKey   string
	UserData string
}

// Create validates req, then creates the instance in a background task. It
// returns the task and the reference the instance will have. Bad input is
// an Invalid error before any task starts.
func (s *Service) Create(ctx context.Context, o tasks.Origin, req CreateRequest) (store.Task, backends.InstanceRef, error) {
	spec := tasks.Spec{Action: "create", Target: req.Name, Origin: o}
	bs, src, err := s.validate(req)
	if err != nil {
		return store.Task{}, backends.InstanceRef{}, s.tasks.Refused(ctx, spec, err)
	}
	b := s.pickContext(req.Context)
	if bs.PVC != "" {
		// The capability decides, not the backend's kind.
		pc, ok := b.(pvcChecker)
		if !ok {
			return store.Task{}, backends.InstanceRef{}, s.tasks.Refused(ctx, spec, backends.Refuse(b.Kind(), "create from a PVC", "PVCs exist on KubeVirt contexts only; give an image"))
		}
		cctx, cancel := s.fleet.CallContext(ctx)
		err := pc.CheckPVC(cctx, bs.Namespace, bs.PVC)
		cancel()
		if err != nil {
			return store.Task{}, backends.InstanceRef{}, s.tasks.Refused(ctx, spec, err)
		}
	}
	ref := backends.InstanceRef{Backend: b.Kind(), Context: b.Context(), Namespace: bs.Namespace, Name: bs.Name}
	spec.Target = ref.String()
	t, err := s.tasks.Start(ctx, spec, func(ctx context.Context, r *tasks.Run) error {
		if bs.PVC != "" {
			r.Logf("boot from the existing PVC %s", bs.PVC)
		}
		r.Logf("create %s: %d CPU, %s memory, %s disk", ref, bs.CPUs, backends.FormatMiB(bs.MemoryMiB, 0), backends.FormatMiB(bs.DiskMiB, 0))
		if src.Remote() {
			path, err := s.fetch(ctx, r, src)
			if err != nil {
				return err
			}
			bs.Image = path
		}
		r.Progress(75)
		cctx, cancel := s.fleet.CallContext(ctx)
		defer cancel()
		in, err := b.Create(cctx, bs)
		if err != nil {
			return timeout(err, cctx, ref)
		}
		r.Progress(90)
		if _, err := s.registry.EnsureInstance(ctx, in.Ref.String()); err != nil {
			s.log.Error("instances: registry entry not written", "ref", in.Ref.String(), "err", err)
		} else if err := s.registry.SetInstanceMetadata(ctx, in.Ref.String(), bs.CloudInit.Password, ""); err != nil {
			s.log.Error("instances: password not kept", "ref", in.Ref.String(), "err", err)
		}
		s.fleet.RefreshContext(ctx, ref.ContextKey())
		r.Logf("created %s (%s)", in.Ref, in.State)
		return nil
	})
	return t, ref, err
}

// fetch downloads a remote image, reporting progress into the task
// between 5 and 70 percent.
func (s *Service) fetch(ctx context.Context, r *tasks.Run, src images.Source) (string, error) {
	r.Logf("download %s", src.URL)
	lastPct := -1
	path, err := s.images.Fetch(ctx, src, func(done, total int64) {
		if total <= 0 {
			r.Logf("downloaded %s", humanize.IBytes(uint64(done)))
			return
		}
		pct := int(done * 100 / total)
		if pct/10 != lastPct/10 { // a log line every 10%
			r.Logf("downloaded %d%% of %s", pct, humanize.IBytes(uint64(total)))
		}
		lastPct = pct
		r.Progress(5 + pct*65/100)
	})
	if err != nil {
		return "", err
	}
	if src.SHA256 != "" {
		r.Logf("checksum sha256 %s verified", src.SHA256)
	}
	return path, nil
}

func (s *Service) validate(req CreateRequest) (backends.Spec, images.Source, error) {
	var errs []string
	var src images.Source
	if req.Name == "" {
		errs = append(errs, "name is required")
	}
	spec := backends.Spec{Name: req.Name, Namespace: req.Namespace, Type: backends.TypeVM, CPUs: req.CPUs, Image: req.Image, PVC: strings.TrimSpace(req.PVC), Tags: req.Tags, Start: req.Start}
	if spec.PVC != "" && req.Image != "" {
		errs = append(errs, "give one source: image or pvc, not both")
	}
	errs = append(errs, s.validateResources(&spec, req.CPUs, req.Memory, req.Disk, req.Context)...)
	if req.Image != "" && s.images != nil {
		var err error
		if src, err = s.images.Resolve(req.Image); err != nil {
			errs = append(errs, backends.SafeMessage(err))
		}
		spec.Image = src.Path
	}
	// crypto/rand.Text: 26 base32 characters, 130 bits.
	spec.CloudInit = &backends.CloudInit{Password: rand.Text(), UserData: req.UserData}
	if k := strings.TrimSpace(req.SSHKey); k != "" {
		if strings.ContainsAny(k, "\r\n") || !strings.HasPrefix(k, "ssh-") && !strings.HasPrefix(k, "ecdsa-") && !strings.HasPrefix(k, "sk-") {
			errs = append(errs, "sshKey must be one public key line, e.g. ssh-ed25519 AAAA... user@host")
		}
		spec.CloudInit.SSHKeys = []string{k}
	}
	if len(errs) > 0 {
		return spec, src, backends.Invalidf("%s", strings.Join(errs, "; "))
	}
	return spec, src, nil
}

func (s *Service) pickContext(key string) backends.Backend {
	b, _ := s.contextFor(key)
	return b
}

// contextFor returns the backend for a context key; an empty key is
// accepted when exactly one context is configured.
func (s *Service) contextFor(key string) (backends.Backend, error) {
	all := s.fleet.Backends()
	var keys []string
	for _, b := range all {
		k := backends.ContextKey("", b.Kind(), b.Context())
		if k == key || key == "" && len(all) == 1 {
			return b, nil
		}
		keys = append(keys, k)
	}
	if key == "" {
		return nil, backends.Invalidf("context is required: accepted are %s", strings.Join(keys, ", "))
	}
	return nil, backends.Invalidf("context %q is not configured: accepted are %s", key, strings.Join(keys, ", "))
}

// validateResources fills spec's CPUs, memory and disk from what the caller
// typed (defaults 1 CPU, 1Gi, 10Gi) and checks the context, returning one
// message per problem: VM and CT creation share the rules.
func (s *Service) validateResources(spec *backends.Spec, cpus int, memory, disk, context string) []string {
	var errs []string
	spec.CPUs = cpus
	if spec.CPUs == 0 {
		spec.CPUs = 1
	}
	if spec.CPUs < 0 || spec.CPUs > 512 {
		errs = append(errs, fmt.Sprintf("cpu %d is out of range: accepted are 1 to 512", cpus))
	}
	for _, sz := range []struct {
		field, text, def string
		dst              *int64
	}{{"mem", memory, "1Gi", &spec.MemoryMiB}, {"disk", disk, "10Gi", &spec.DiskMiB}} {
		text := sz.text
		if text == "" {
			text = sz.def
		}
		n, err := backends.ParseSize(text)
		if err != nil {
			errs = append(errs, sz.field+": "+backends.SafeMessage(err))
			continue
		}
		*sz.dst = n.MiBCeil()
	}
	if _, err := s.contextFor(context); err != nil {
		errs = append(errs, backends.SafeMessage(err))
	}
	return errs
}
