package kubevirt

import (
	"context"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/corral-dev/corral/backends"
)

// Power implements backends.Backend through the VM's run strategy, the
// declarative interface KubeVirt's VM controller acts on:
//
//   - start sets runStrategy Always. A VM whose strategy already keeps it
//     running (Always, RerunOnFailure) or whose VMI runs is a Conflict. A VM
//     with Manual or Once becomes Always: Corral owns the strategy from then
//     on, as the dashboard's start and stop buttons imply.
//   - shutdown sets Halted; KubeVirt then stops the guest gracefully (ACPI,
//     then a kill after terminationGracePeriodSeconds).
//   - stop sets Halted and deletes the VMI with grace period 0, which is
//     what virtctl stop --force --grace-period=0 asks for.
//   - restart deletes the VMI, so the VM controller starts a new one. It is
//     what KubeVirt's restart subresource does; that subresource belongs to
//     the aggregated subresources.kubevirt.io API, which a cluster without
//     virt-api (and Corral's test API server) does not serve. A VM whose run
//     strategy would not start the VMI again (Manual, Once) is refused
//     with virtctl restart as the remedy.
//   - pause and resume call subresources.kubevirt.io's pause and unpause
//     (virt-api freezes the vCPUs; there is no declarative field for it).
//     When the cluster does not serve that API they are refused with
//     virtctl as the remedy: see callSubresource.
//
// The run strategy is changed with a merge patch that carries the
// resourceVersion the state check read, so an action is never decided on
// a stale state. KubeVirt's controllers write a VM's status often, which
// also moves its resourceVersion, so a 409 is retried from a fresh read a
// few times before it is reported as a Conflict.
func (b *Backend) Power(ctx context.Context, ref backends.InstanceRef, action backends.Action) error {
	if !slices.Contains(backends.Actions, action) {
		return backends.Invalidf("unknown action %q: accepted are start, shutdown, stop, restart, pause, resume", action)
	}
	for attempt := 1; ; attempt++ {
		err := b.power(ctx, ref, action)
		if !apierrors.IsConflict(err) || attempt == 3 {
			return err
		}
	}
}

func (b *Backend) power(ctx context.Context, ref backends.InstanceRef, action backends.Action) error {
	vm, vmi, err := b.getVM(ctx, ref)
	if err != nil {
		if pvc, pod, ok := b.asCT(ctx, ref, err); ok {
			return b.powerCT(ctx, ref, pvc, pod, action)
		}
		return err
	}
	what := "VM " + ref.Namespace + "/" + ref.Name
	rs := runStrategy(vm.Object)
	st := state(vm.Object, vmi)
	switch action {
	case backends.ActionStart:
		if isTemplate(vm.GetLabels()) {
			return backends.Refuse(backends.KindKubeVirt, "start", what+" is a template: clone it and start the clone, or unmark it first (POST /api/vms/{ref}/template {\"on\": false})")
		}
		if wantsRunning(rs) || vmi != nil && st == backends.StateRunning {
			return backends.Conflictf("%s is already running or starting (run strategy %s)", what, rs)
		}
		return b.patchRunStrategy(ctx, vm, runAlways)
	case backends.ActionStop, backends.ActionShutdown:
		if rs == runHalted || !wantsRunning(rs) && vmi == nil {
			return backends.Conflictf("%s is already stopped or stopping", what)
		}
		if err := b.patchRunStrategy(ctx, vm, runHalted); err != nil {
			return err
		}
		if action == backends.ActionStop && vmi != nil {
			err := b.dyn.Resource(gvrVMI).Namespace(ref.Namespace).Delete(ctx, ref.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))})
			if err != nil && !apierrors.IsNotFound(err) {
				return b.fail("force off", what, err)
			}
		}
		return nil
	case backends.ActionRestart:
		if vmi == nil || st != backends.StateRunning && st != backends.StatePaused {
			return backends.Conflictf("%s is not running, so it cannot restart", what)
		}
		if !wantsRunning(rs) {
			return backends.Refuse(backends.KindKubeVirt, "restart", fmt.Sprintf("the run strategy %s would not start %s again; use virtctl restart %s -n %s", rs, ref.Name, ref.Name, ref.Namespace))
		}
		u := unstructured.Unstructured{Object: vmi}
		err := b.dyn.Resource(gvrVMI).Namespace(ref.Namespace).Delete(ctx, ref.Name, metav1.DeleteOptions{
			Preconditions: &metav1.Preconditions{UID: ptr.To(u.GetUID())},
		})
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			// Gone, or already replaced: the VM restarted meanwhile.
			return nil
		}
		return b.fail("restart", what, err)
	case backends.ActionPause, backends.ActionResume:
		if vmi == nil {
			return backends.Conflictf("%s is not running", what)
		}
		if action == backends.ActionPause && st == backends.StatePaused || action == backends.ActionResume && st != backends.StatePaused {
			return backends.Conflictf("%s is %s", what, st)
		}
		sub, cli := "pause", "pause"
		if action == backends.ActionResume {
			sub, cli = "unpause", "unpause"
		}
		return b.callSubresource(ctx, ref, string(action), sub, cli)
	}
	return backends.Invalidf("unknown action %q: accepted are start, shutdown, stop, restart, pause, resume", action)
}

// patchRunStrategy sets spec.runStrategy, removing the deprecated
// spec.running (KubeVirt refuses a VM with both), on the condition that
// the VM is still at the resourceVersion the caller read.
func (b *Backend) patchRunStrategy(ctx context.Context, vm *unstructured.Unstructured, rs string) error {
	patch, err := jsonBytes(obj{
		"metadata": obj{"resourceVersion": vm.GetResourceVersion()},
		"spec":     obj{"runStrategy": rs, "running": nil},
	})
	if err != nil {
		return err
	}
	_, err = b.dyn.Resource(gvrVM).Namespace(vm.GetNamespace()).Patch(ctx, vm.GetName(), types.MergePatchType, patch, metav1.PatchOptions{FieldManager: fieldManager})
	return b.fail("change the run strategy of", "VM "+vm.GetNamespace()+"/"+vm.GetName(), err)
}

// callSubresource PUTs KubeVirt's subresources.kubevirt.io/v1 verb (pause,
// unpause) on the VMI. That API is aggregated: virt-api serves it, not
// the API server. A 404 for the whole group means the cluster has no
// virt-api, so it cannot do it through the API at all: a refusal naming
// virtctl, not a missing VM (the VMI was found just before). A 503 means
// the APIService exists but virt-api does not answer: unavailable, since
// retrying later can help.
func (b *Backend) callSubresource(ctx context.Context, ref backends.InstanceRef, op, sub, cli string) error {
	err := b.kube.Discovery().RESTClient().Put().
		AbsPath("/apis/subresources.kubevirt.io/v1/namespaces", ref.Namespace, "virtualmachineinstances", ref.Name, sub).
		SetHeader("Content-Type", "application/json").
		Body([]byte("{}")).
		Do(ctx).Error()
	if err == nil {
		return nil
	}
	if apierrors.IsNotFound(err) || apierrors.IsMethodNotSupported(err) {
		refusal := backends.Refuse(backends.KindKubeVirt, op, fmt.Sprintf("context %s does not serve KubeVirt's subresources API (virt-api); use virtctl %s vm %s -n %s", b.opts.Context, cli, ref.Name, ref.Namespace))
		return fmt.Errorf("%w: %w", refusal, err)
	}
	return b.fail(op, "VM "+ref.Namespace+"/"+ref.Name, err)
}
