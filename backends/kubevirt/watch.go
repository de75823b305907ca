package kubevirt

import (
	"context"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"

	"github.com/corral-dev/corral/backends"
)

// watchSyncWait bounds how long Watch waits for its informers' first list.
const watchSyncWait = 30 * time.Second

// Watch implements backends.Watcher with shared informers on the
// VirtualMachines and VirtualMachineInstances of every namespace, and on
// the Pods and PVCs of CTs (labelled corral.dev/ct): each
// add, update and delete of either becomes one Event naming the VM, so a
// VMI getting its IP refreshes the instance as much as a label change
// does. The informers resynchronise after a dropped watch by themselves;
// the fleet refreshes the whole context on every event, so a burst of
// events costs one refresh per event at most, never a missed change.
//
// Watch first lists the VMs once, so that a context that cannot be
// reached or read is reported here rather than as silence; it returns
// once its informers hold the current state (or after watchSyncWait).
func (b *Backend) Watch(ctx context.Context) (<-chan backends.Event, error) {
	if _, err := b.dyn.Resource(gvrVM).List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
		return nil, b.fail("watch the virtual machines of", "context "+b.opts.Context, err)
	}
	ch := make(chan backends.Event, 64)
	var mu sync.Mutex
	closed := false
	send := func(o any, deleted bool) {
		if t, ok := o.(cache.DeletedFinalStateUnknown); ok {
			o, deleted = t.Obj, true
		}
		u, ok := o.(*unstructured.Unstructured)
		if !ok {
			return
		}
		name := u.GetName()
		if ct := u.GetLabels()[labelCT]; ct != "" {
			// A CT's Pod, PVC ("NAME-data") or Service: the event names the CT.
			name = ct
		}
		ev := backends.Event{Ref: b.ref(u.GetNamespace(), name), Deleted: deleted}
		mu.Lock()
		defer mu.Unlock()
		if closed {
			return
		}
		// Blocking here holds only this handler's queue (client-go buffers
		// per handler), never the informer; ctx ending releases it.
		select {
		case ch <- ev:
		case <-ctx.Done():
		}
	}
	handler := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { send(o, false) },
		UpdateFunc: func(_, o any) { send(o, false) },
		DeleteFunc: func(o any) { send(o, true) },
	}
	f := dynamicinformer.NewDynamicSharedInformerFactory(b.dyn, 0)
	for _, gvr := range []schema.GroupVersionResource{gvrVM, gvrVMI} {
		inf := f.ForResource(gvr).Informer()
		_ = inf.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) {
			b.opts.Logger.Warn("kubevirt: watch interrupted, resuming", "context", b.opts.Context, "resource", gvr.Resource, "err", err)
		})
		if _, err := inf.AddEventHandler(handler); err != nil {
			return nil, backends.Failed("could not watch context "+b.opts.Context, err)
		}
	}
	// CTs: their Pods and data PVCs, and nothing else of the cluster's
	// (the label selector keeps the informers' caches small).
	cts := dynamicinformer.NewFilteredDynamicSharedInformerFactory(b.dyn, 0, metav1.NamespaceAll,
		func(o *metav1.ListOptions) { o.LabelSelector = labelCT })
	for _, gvr := range []schema.GroupVersionResource{{Version: "v1", Resource: "pods"}, {Version: "v1", Resource: "persistentvolumeclaims"}} {
		inf := cts.ForResource(gvr).Informer()
		_ = inf.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) {
			b.opts.Logger.Warn("kubevirt: watch interrupted, resuming", "context", b.opts.Context, "resource", gvr.Resource, "err", err)
		})
		if _, err := inf.AddEventHandler(handler); err != nil {
			return nil, backends.Failed("could not watch context "+b.opts.Context, err)
		}
	}
	f.Start(ctx.Done())
	cts.Start(ctx.Done())
	// Return once the informers hold the current state, so a change made
	// after Watch returns is always an event (not folded into the first
	// list, which the fleet has read already).
	// A server that stops answering after the first list does not hold
	// Watch for longer than watchSyncWait: events then start once the
	// informers catch up.
	sctx, cancel := context.WithTimeout(ctx, watchSyncWait)
	defer cancel()
	for _, synced := range []map[schema.GroupVersionResource]bool{f.WaitForCacheSync(sctx.Done()), cts.WaitForCacheSync(sctx.Done())} {
		for gvr, ok := range synced {
			if !ok && ctx.Err() == nil {
				b.opts.Logger.Warn("kubevirt: watch not synced", "context", b.opts.Context, "resource", gvr.Resource)
			}
		}
	}
	go func() {
		<-ctx.Done()
		f.Shutdown() // waits for the informers' goroutines
		cts.Shutdown()
		mu.Lock()
		closed = true
		close(ch)
		mu.Unlock()
	}()
	return ch, nil
}
