package instances

import (
	"context"

	"github.com/corral-dev/corral/app/tasks"
	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/store"
)

// SetTemplate marks (on) or unmarks the instance named by text as a
// template, as a task, and waits for it. Backends that cannot keep the
// mark refuse with a remedy; a running instance is a Conflict.
func (s *Service) SetTemplate(ctx context.Context, o tasks.Origin, text string, on bool) (store.Task, error) {
	action := "template"
	if !on {
		action = "untemplate"
	}
	spec := tasks.Spec{Action: action, Target: text, Origin: o}
	ref, b, err := s.resolve(text)
	if err != nil {
		return store.Task{}, s.tasks.Refused(ctx, spec, err)
	}
	spec.Target = ref.String()
	tp, err := backends.As[backends.Templater](b, "template")
	if err != nil {
		return store.Task{}, s.tasks.Refused(ctx, spec, err)
	}
	t, err := s.tasks.Do(ctx, spec, func(ctx context.Context, r *tasks.Run) error {
		cctx, cancel := s.fleet.CallContext(ctx)
		defer cancel()
		if err := tp.SetTemplate(cctx, ref, on); err != nil {
			return timeout(err, cctx, ref)
		}
		if on {
			r.Logf("%s is a template: clone it to use it", ref)
		} else {
			r.Logf("%s is no longer a template", ref)
		}
		return nil
	})
	s.fleet.RefreshContext(context.WithoutCancel(ctx), ref.ContextKey())
	return t, err
}
