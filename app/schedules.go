package app

import (
	"context"
	"flag"
	"fmt"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/corral-dev/corral/app/schedule"
)

// buildSchedules builds the schedule use case: power runs go through a
// folders service (the bulk action), snapshot runs through the instances
// use case, in-cluster schedules through the clusters of the KubeVirt
// contexts (the kubeconfig's, or the pod's own for "in-cluster").
func (a *App) buildSchedules() {
	clients := func(name string) (kubernetes.Interface, error) {
		kc, _, err := a.kube(name)
		return kc, err
	}
	a.Schedules = schedule.New(a.Store, a.Fleet, a.Tasks, a.Folders, a.Instances, schedule.Options{
		CronJobs: &schedule.KubeCronJobs{Clients: clients, Image: a.cfg.SchedulerImage},
		Logger:   a.log,
	})
}

// runSchedules runs the schedule tick loop of `corral serve`, after the
// fleet's first refresh has had its chance (a tick resolves refs and
// skips instances against the fleet's snapshot).
func (a *App) runSchedules(ctx context.Context) {
	if a.cfg.ScheduleTick <= 0 {
		a.log.Info("app: schedule tick disabled (--schedule-tick=0): use corral schedule tick from a timer")
		return
	}
	a.Schedules.Run(ctx, a.cfg.ScheduleTick)
}

// scheduleFlags adds the schedule flags of `corral serve`:
// --schedule-tick (env CORRAL_SCHEDULE_TICK, default 30s, 0 disables)
// and --scheduler-image (env CORRAL_SCHEDULER_IMAGE).
func scheduleFlags(fs *flag.FlagSet, cfg *Config, getenv func(string) string) error {
	cfg.ScheduleTick = 30 * time.Second
	if v := getenv("CORRAL_SCHEDULE_TICK"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return fmt.Errorf("CORRAL_SCHEDULE_TICK=%q: a duration such as 30s, or 0 to disable, is accepted", v)
		}
		cfg.ScheduleTick = d
	}
	cfg.SchedulerImage = getenv("CORRAL_SCHEDULER_IMAGE")
	fs.DurationVar(&cfg.ScheduleTick, "schedule-tick", cfg.ScheduleTick, "evaluate schedules every `DURATION`; 0 leaves it to `corral schedule tick` (env CORRAL_SCHEDULE_TICK)")
	fs.StringVar(&cfg.SchedulerImage, "scheduler-image", cfg.SchedulerImage, "`IMAGE` of in-cluster schedules' CronJobs (env CORRAL_SCHEDULER_IMAGE; default "+schedule.DefaultImage+")")
	return nil
}
