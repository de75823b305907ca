package instances

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/corral-dev/corral/app/tasks"
	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/store"
)

// scaleTimeout bounds one scale, a restart included.
const scaleTimeout = 10 * time.Minute

// ScaleRequest is a new size; a field left zero or empty keeps the
// instance's current value.
type ScaleRequest struct {
	CPUs   int
	Memory string // e.g. "8G", "8Gi", "4096M"
}

// Scale changes the CPUs and memory of the instance named by text as a
// task and waits for it. The request is checked with the rules of
// creation (1 to 512 CPUs, a size) before any task starts; asking for
// nothing is a 400. How a running instance takes the change is the
// backend's decision (KubeVirt: live when it can, else a restart),
// documented on its Scale.
func (s *Service) Scale(ctx context.Context, o tasks.Origin, text string, req ScaleRequest) (store.Task, error) {
	spec := tasks.Spec{Action: "scale", Target: text, Origin: o}
	ref, b, err := s.resolve(text)
	if err != nil {
		return store.Task{}, s.tasks.Refused(ctx, spec, err)
	}
	spec.Target = ref.String()
	sc, err := backends.As[backends.Scaler](b, "scale")
	if err != nil {
		return store.Task{}, s.tasks.Refused(ctx, spec, err)
	}
	if req.CPUs == 0 && strings.TrimSpace(req.Memory) == "" {
		return store.Task{}, s.tasks.Refused(ctx, spec, backends.Invalidf("scale needs cpu, mem or both, e.g. {\"cpu\": 4, \"mem\": \"8G\"}"))
	}
	var bs backends.Spec
	errs := s.validateResources(&bs, req.CPUs, req.Memory, "", backends.ContextKey("", b.Kind(), b.Context()))
	if len(errs) > 0 {
		return store.Task{}, s.tasks.Refused(ctx, spec, backends.Invalidf("%s", strings.Join(errs, "; ")))
	}
	cur, err := s.Get(ctx, ref.String())
	if err != nil {
		return store.Task{}, s.tasks.Refused(ctx, spec, err)
	}
	cpus, mem := cur.CPUs, cur.MemoryMiB
	if req.CPUs != 0 {
		cpus = bs.CPUs
	}
	if strings.TrimSpace(req.Memory) != "" {
		mem = bs.MemoryMiB
	}
	t, err := s.tasks.Do(ctx, spec, func(ctx context.Context, r *tasks.Run) error {
		r.Logf("scale %s from %d CPU, %s to %d CPU, %s", ref, cur.CPUs, backends.FormatMiB(cur.MemoryMiB, 0), cpus, backends.FormatMiB(mem, 0))
		if cur.State == backends.StateRunning {
			r.Logf("%s is running: the backend hotplugs when it can, else it restarts the instance", ref)
		}
		// A restart waits for the guest to stop: not the per-call timeout,
		// and not the caller's request either (a client that goes away
		// must not leave the instance stopped half-way).
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), scaleTimeout)
		defer cancel()
		if err := sc.Scale(sctx, ref, cpus, mem); err != nil {
			return err
		}
		r.Logf("scaled to %s", fmt.Sprintf("%d CPU, %s", cpus, backends.FormatMiB(mem, 0)))
		return nil
	})
	s.fleet.RefreshContext(context.WithoutCancel(ctx), ref.ContextKey())
	return t, err
}
