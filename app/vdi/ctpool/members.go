package ctpool

import (
	"context"
	"errors"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/backends/kubevirt"
)

func dataPVC(member string) string { return kubevirt.CTPVCName(member) }

// objectsFor returns the PVC, Service and pod of member as the pool's
// current source makes them: a Corral CT (backends/kubevirt) with the
// pool's labels, its StorageClass, and sleep infinity as the command of
// an unprivileged member unless the pool sets init.
func objectsFor(ns, pool, member string, spec Spec) (*corev1.PersistentVolumeClaim, *corev1.Service, *corev1.Pod) {
	mem, _ := mib("memory", spec.Memory)
	disk, _ := mib("disk", spec.Disk)
	pvc, svc, pod := kubevirt.CTObjects(ns, member, kubevirt.CTSource{Image: spec.Image, CPUs: spec.CPU,
		MemoryMiB: mem, DiskMiB: disk, Privileged: spec.Privileged})
	for _, meta := range []*metav1.ObjectMeta{&pvc.ObjectMeta, &svc.ObjectMeta, &pod.ObjectMeta} {
		meta.Labels[LabelPool] = pool
		meta.Labels[LabelMember] = member
		meta.Labels[LabelSource] = spec.Source()
	}
	if spec.StorageClass != "" {
		sc := spec.StorageClass
		pvc.Spec.StorageClassName = &sc
	}
	if !spec.Init && !spec.Privileged {
		// The privileged seed script already runs the image's /sbin/init
		// when it has one and sleeps otherwise.
		pod.Spec.Containers[0].Command = []string{"sleep", "infinity"}
	}
	return pvc, svc, pod
}

// create makes member from the pool's source: the PVC first, then the
// Service and the pod; what was made is removed again when a later
// object cannot be made.
func (m *Manager) create(ctx context.Context, pool, member string, spec Spec) error {
	pvc, svc, pod := objectsFor(m.opts.Namespace, pool, member, spec)
	core := m.kube.CoreV1()
	opts := metav1.CreateOptions{FieldManager: fieldManager}
	if _, err := core.PersistentVolumeClaims(m.opts.Namespace).Create(ctx, pvc, opts); err != nil {
		return m.fail("create the data volume of member "+member, err)
	}
	undo := func(cause error) error {
		if derr := m.destroy(context.WithoutCancel(ctx), member); derr != nil {
			m.opts.Log.Warn("ctpool: could not remove a half-created member", "member", member, "err", derr)
		}
		return cause
	}
	if _, err := core.Services(m.opts.Namespace).Create(ctx, svc, opts); err != nil && !apierrors.IsAlreadyExists(err) {
		return undo(m.fail("create the Service of member "+member, err))
	}
	if _, err := core.Pods(m.opts.Namespace).Create(ctx, pod, opts); err != nil {
		return undo(m.fail("create the pod of member "+member, err))
	}
	return nil
}

// start makes the pod of a stopped member (replacing a pod that ended).
func (m *Manager) start(ctx context.Context, pool, member string, spec Spec, o observed) error {
	if o.pod != nil {
		if err := m.deletePod(ctx, o.pod); err != nil {
			return err
		}
	}
	_, _, pod := objectsFor(m.opts.Namespace, pool, member, spec)
	if _, err := m.kube.CoreV1().Pods(m.opts.Namespace).Create(ctx, pod, metav1.CreateOptions{FieldManager: fieldManager}); err != nil {
		return m.fail("start member "+member, err)
	}
	return nil
}

func (m *Manager) deletePod(ctx context.Context, pod *corev1.Pod) error {
	err := m.kube.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: ptr.To(int64(0)), Preconditions: &metav1.Preconditions{UID: &pod.UID}})
	if err != nil && !apierrors.IsNotFound(err) {
		return m.fail("delete the pod of member "+pod.Name, err)
	}
	return m.waitGone(ctx, "pod", func(ctx context.Context) error {
		_, err := m.kube.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		return err
	})
}

// destroy deletes member's pod, Service and data PVC and waits until
// they are gone (DeleteWait each).
func (m *Manager) destroy(ctx context.Context, member string) error {
	core := m.kube.CoreV1()
	ns := m.opts.Namespace
	var errs []error
	del := func(kind string, name string, delete func(context.Context, string, metav1.DeleteOptions) error,
		get func(context.Context) error, opts metav1.DeleteOptions) {
		if err := delete(ctx, name, opts); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, m.fail("delete the "+kind+" of member "+member, err))
			return
		}
		if err := m.waitGone(ctx, kind+" of member "+member, get); err != nil {
			errs = append(errs, err)
		}
	}
	del("pod", member, core.Pods(ns).Delete, func(ctx context.Context) error {
		_, err := core.Pods(ns).Get(ctx, member, metav1.GetOptions{})
		return err
	}, metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))})
	del("Service", member, core.Services(ns).Delete, func(ctx context.Context) error {
		_, err := core.Services(ns).Get(ctx, member, metav1.GetOptions{})
		return err
	}, metav1.DeleteOptions{})
	del("data volume", dataPVC(member), core.PersistentVolumeClaims(ns).Delete, func(ctx context.Context) error {
		_, err := core.PersistentVolumeClaims(ns).Get(ctx, dataPVC(member), metav1.GetOptions{})
		return err
	}, metav1.DeleteOptions{})
	return errors.Join(errs...)
}

// waitGone polls get until it answers NotFound, for up to DeleteWait.
func (m *Manager) waitGone(ctx context.Context, what string, get func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, m.opts.DeleteWait)
	defer cancel()
	for delay := 50 * time.Millisecond; ; delay = min(delay*2, 2*time.Second) {
		err := get(ctx)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil && ctx.Err() == nil {
			return m.fail("wait for the "+what+" to be deleted", err)
		}
		select {
		case <-ctx.Done():
			return backends.Failed("the "+what+" is still there after "+m.opts.DeleteWait.String()+
				" (a finalizer or a stuck Terminating object); remove it and reconcile again", ctx.Err())
		case <-time.After(delay):
		}
	}
}
