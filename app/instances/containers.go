package instances

import (
	"context"
	"strings"

	"github.com/corral-dev/corral/app/tasks"
	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/store"
)

// ContainerRequest is a CT to create. Sizes are text as typed.
type ContainerRequest struct {
	Context    string // context key, e.g. "kubevirt/prod"; optional with one context
	Name       string
	Namespace  string
	Image      string // an OCI image, e.g. docker.io/library/debian:bookworm
	CPUs       int
	Memory     string // default 1Gi
	Disk       string // default 10Gi: the data volume
	Privileged bool
}

// CreateContainer validates req, then creates the CT in a background
// task on a backend that runs containers. It returns the task and the
// reference the CT will have. Bad input, and a context that runs no
// containers, are refused before any task starts.
func (s *Service) CreateContainer(ctx context.Context, o tasks.Origin, req ContainerRequest) (store.Task, backends.InstanceRef, error) {
	spec := tasks.Spec{Action: "create", Target: req.Name, Origin: o}
	bs, err := s.validateContainer(req)
	if err != nil {
		return store.Task{}, backends.InstanceRef{}, s.tasks.Refused(ctx, spec, err)
	}
	b := s.pickContext(req.Context)
	cb, err := backends.As[backends.Containers](b, "container")
	if err != nil {
		return store.Task{}, backends.InstanceRef{}, s.tasks.Refused(ctx, spec, err)
	}
	ref := backends.InstanceRef{Backend: b.Kind(), Context: b.Context(), Namespace: bs.Namespace, Name: bs.Name}
	spec.Target = ref.String()
	image := strings.TrimSpace(req.Image)
	t, err := s.tasks.Start(ctx, spec, func(ctx context.Context, r *tasks.Run) error {
		mode := "unprivileged"
		if req.Privileged {
			mode = "privileged"
		}
		r.Logf("create CT %s from %s (%s): %d CPU, %s memory, %s data volume", ref, image, mode, bs.CPUs, backends.FormatMiB(bs.MemoryMiB, 0), backends.FormatMiB(bs.DiskMiB, 0))
		cctx, cancel := s.fleet.CallContext(ctx)
		defer cancel()
		in, err := cb.CreateContainer(cctx, bs, image, req.Privileged)
		if err != nil {
			return timeout(err, cctx, ref)
		}
		r.Progress(90)
		if _, err := s.registry.EnsureInstance(ctx, in.Ref.String()); err != nil {
			s.log.Error("instances: registry entry not written", "ref", in.Ref.String(), "err", err)
		}
		s.fleet.RefreshContext(ctx, ref.ContextKey())
		r.Logf("created %s (%s)", in.Ref, in.State)
		return nil
	})
	return t, ref, err
}

func (s *Service) validateContainer(req ContainerRequest) (backends.Spec, error) {
	var errs []string
	if req.Name == "" {
		errs = append(errs, "name is required")
	}
	if strings.TrimSpace(req.Image) == "" {
		errs = append(errs, "image is required for a CT: give an OCI image, e.g. docker.io/library/debian:bookworm")
	}
	spec := backends.Spec{Name: req.Name, Namespace: req.Namespace, Type: backends.TypeCT, CPUs: req.CPUs, Image: strings.TrimSpace(req.Image)}
	errs = append(errs, s.validateResources(&spec, req.CPUs, req.Memory, req.Disk, req.Context)...)
	if len(errs) > 0 {
		return spec, backends.Invalidf("%s", strings.Join(errs, "; "))
	}
	return spec, nil
}
