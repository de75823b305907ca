package instances

import (
	"context"

	"github.com/corral-dev/corral/app/tasks"
	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/store"
)

// migratePhases maps the phases a KubeVirt migration reports onto the
// task's progress; phases not listed leave it where it is.
var migratePhases = map[string]int{
	"Pending": 10, "Scheduling": 20, "Scheduled": 35, "PreparingTarget": 50,
	"TargetReady": 60, "Running": 70, "Succeeded": 100, "Failed": 100,
}

// Migrate live-migrates the instance named by text to targetNode (empty:
// the backend's scheduler chooses). The trigger runs before the answer,
// so a refusal comes back at once (a stopped instance: Conflict; one the
// backend cannot migrate: Unsupported with its remedy) and is audited.
// Then a background task follows the migration to its end, logging each
// phase; a migration that fails ends the task as failed.
func (s *Service) Migrate(ctx context.Context, o tasks.Origin, text, targetNode string) (store.Task, error) {
	spec := tasks.Spec{Action: "migrate", Target: text, Origin: o}
	ref, b, err := s.resolve(text)
	if err != nil {
		return store.Task{}, s.tasks.Refused(ctx, spec, err)
	}
	spec.Target = ref.String()
	mg, err := backends.As[backends.Migrator](b, "migrate")
	if err != nil {
		return store.Task{}, s.tasks.Refused(ctx, spec, err)
	}
	cctx, cancel := s.fleet.CallContext(ctx)
	m, err := mg.Migrate(cctx, ref, targetNode)
	err = timeout(err, cctx, ref)
	cancel()
	if err != nil {
		return store.Task{}, s.tasks.Refused(ctx, spec, err)
	}
	where := "a node the scheduler chooses"
	if targetNode != "" {
		where = "node " + targetNode
	}
	t, err := s.tasks.Start(ctx, spec, func(ctx context.Context, r *tasks.Run) error {
		r.Logf("migrate %s to %s: %s created", ref, where, m.Name())
		r.Progress(5)
		defer s.fleet.RefreshContext(context.WithoutCancel(ctx), ref.ContextKey())
		err := m.Wait(ctx, func(phase string) { // bounded by the task's own timeout
			r.Logf("migration %s: %s", m.Name(), phase)
			if p, ok := migratePhases[phase]; ok {
				r.Progress(p)
			}
		})
		if err != nil {
			return err
		}
		r.Logf("migrated %s", ref)
		return nil
	})
	if err != nil {
		s.log.Error("instances: a migration runs without its task", "ref", ref.String(), "migration", m.Name(), "err", err)
	}
	return t, err
}
