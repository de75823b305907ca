package ctpool

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/corral-dev/corral/app/vdi"
)

// Watch reconciles pool at once, then whenever its ConfigMap, its
// members' pods or PVCs, or its Leases change (informers), and at least
// every interval (the periodic resync that retries failed steps). A
// failed pass is reported to report (nil: logged) and retried; Watch
// returns when ctx ends.
func (m *Manager) Watch(ctx context.Context, pool string, interval time.Duration, report func(Result, error)) error {
	if err := ValidatePoolName(pool); err != nil {
		return err
	}
	if interval <= 0 {
		interval = 30 * time.Second
	}
	if report == nil {
		report = func(_ Result, err error) {
			if err != nil {
				m.opts.Log.Warn("ctpool: reconcile failed; retried", "pool", pool, "err", err)
			}
		}
	}
	kick := make(chan struct{}, 1)
	poke := func() {
		select {
		case kick <- struct{}{}:
		default:
		}
	}
	h := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { poke() },
		UpdateFunc: func(any, any) { poke() },
		DeleteFunc: func(any) { poke() },
	}
	byPool := informers.NewSharedInformerFactoryWithOptions(m.kube, 0, informers.WithNamespace(m.opts.Namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = labels.Set{LabelPool: pool}.String() }))
	byLease := informers.NewSharedInformerFactoryWithOptions(m.kube, 0, informers.WithNamespace(m.opts.Namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = labels.Set{vdi.LabelPool: pool}.String() }))
	for _, inf := range []cache.SharedIndexInformer{
		byPool.Core().V1().ConfigMaps().Informer(),
		byPool.Core().V1().Pods().Informer(),
		byPool.Core().V1().PersistentVolumeClaims().Informer(),
		byLease.Coordination().V1().Leases().Informer(),
	} {
		if _, err := inf.AddEventHandler(h); err != nil {
			return err
		}
	}
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	byPool.Start(wctx.Done())
	byLease.Start(wctx.Done())
	defer byPool.Shutdown()
	defer byLease.Shutdown()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		res, err := m.Reconcile(ctx, pool)
		if ctx.Err() != nil {
			return nil
		}
		report(res, err)
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		case <-kick:
			// Let a burst of events (a reconcile's own writes among them)
			// settle into one pass.
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(500 * time.Millisecond):
			}
			select {
			case <-kick:
			default:
			}
		}
	}
}
