package kubevirt

import (
	"context"
	"fmt"
	"k8s.io/client-go/util/retry"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/corral-dev/corral/backends"
)

var _ backends.Scaler = (*Backend)(nil)

// Scale implements backends.Scaler on the VM's template: the vCPUs
// (cpu.cores, or cpu.sockets for a VM made for hotplug) and
// memory.guest. How a running VM gets the change is decided here, as
// spec/api.md asks ("live-hotplugs when the VM is live-migratable;
// otherwise stop, patch, start"):
//
//   - stopped: the template is patched; the next start uses it.
//   - running, made for hotplug (the template declares cpu.maxSockets and
//     memory.maxGuest, the new size fits under both and divides into whole
//     sockets) and its VMI is LiveMigratable: only sockets and
//     memory.guest are patched, and KubeVirt's LiveUpdate rollout
//     hotplugs them (it does so through a live migration, hence the
//     condition). On a cluster whose rollout strategy is not LiveUpdate,
//     KubeVirt marks the VM RestartRequired instead.
//   - running otherwise: the VM is stopped (runStrategy Halted), Scale
//     waits for its VMI to be gone, patches the template and starts it
//     again (runStrategy Always). The guest reboots; the caller's task
//     log says so.
//
// A VM sized by an instancetype is refused: KubeVirt rejects a template
// that sets CPU or memory beside one. Every patch carries the
// resourceVersion it was decided on.
func (b *Backend) Scale(ctx context.Context, ref backends.InstanceRef, cpus int, memoryMiB int64) error {
	if cpus < 1 || cpus > 512 || memoryMiB < 16 {
		return backends.Invalidf("scale to %d CPU and %d MiB is out of range: accepted are 1 to 512 CPUs and at least 16 MiB", cpus, memoryMiB)
	}
	var restart bool
	err := retry.RetryOnConflict(retry.DefaultRetry, func() (err error) {
		restart, err = b.scaleOrHalt(ctx, ref, cpus, memoryMiB)
		return err
	})
	if err != nil || !restart {
		return err
	}
	what := "VM " + ref.Namespace + "/" + ref.Name
	wctx, cancel := context.WithTimeout(ctx, b.opts.Wait)
	defer cancel()
	for {
		v, err := b.getVMI(wctx, ref.Namespace, ref.Name)
		if err != nil {
			return err
		}
		if v == nil {
			break
		}
		select {
		case <-wctx.Done():
			return backends.Failed(what+" did not stop in time to be scaled; it is left stopping, start it again when it has stopped", wctx.Err())
		case <-time.After(300 * time.Millisecond):
		}
	}
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		fresh, _, err := b.getVM(ctx, ref)
		if err != nil {
			return err
		}
		domain, _, _ := unstructured.NestedMap(fresh.Object, "spec", "template", "spec", "domain")
		return b.patchSize(ctx, fresh, domain, cpus, memoryMiB, false)
	})
	if err != nil {
		// Undo the stop rather than leave a half-done change: start it
		// again at its old size, and report why the new one was not taken.
		if serr := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			fresh, _, gerr := b.getVM(ctx, ref)
			if gerr != nil {
				return gerr
			}
			return b.patchRunStrategy(ctx, fresh, runAlways)
		}); serr != nil {
			return fmt.Errorf("%w (%s is left stopped: %w)", err, what, serr)
		}
		return err
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		fresh, _, err := b.getVM(ctx, ref)
		if err != nil {
			return err
		}
		return b.patchRunStrategy(ctx, fresh, runAlways)
	})
}

// scaleOrHalt reads the VM and patches its size when it is stopped or can
// take the size live; otherwise it stops it and reports restart, and
// Scale finishes the change once the VMI is gone.
func (b *Backend) scaleOrHalt(ctx context.Context, ref backends.InstanceRef, cpus int, memoryMiB int64) (restart bool, err error) {
	vm, vmi, err := b.getVM(ctx, ref)
	if err != nil {
		if _, _, ok := b.asCT(ctx, ref, err); ok {
			return false, backends.Refuse(backends.KindKubeVirt, "scale", "a container's CPU and memory limits are fixed when its pod is made; create a new CT with the size you need")
		}
		return false, err
	}
	what := "VM " + ref.Namespace + "/" + ref.Name
	if it := str(vm.Object, "spec", "instancetype", "name"); it != "" {
		return false, backends.Refuse(backends.KindKubeVirt, "scale", fmt.Sprintf("%s takes its size from the instancetype %s: point it at another instancetype", what, it))
	}
	domain, _, _ := unstructured.NestedMap(vm.Object, "spec", "template", "spec", "domain")
	st := state(vm.Object, vmi)
	if st == backends.StateStarting || st == backends.StateStopping {
		return false, backends.Conflictf("%s is %s; scale it once it has settled", what, st)
	}
	running := vmi != nil && (st == backends.StateRunning || st == backends.StatePaused)
	if !running {
		return false, b.patchSize(ctx, vm, domain, cpus, memoryMiB, false)
	}
	if hotpluggable(domain, vmi, cpus, memoryMiB) {
		return false, b.patchSize(ctx, vm, domain, cpus, memoryMiB, true)
	}
	b.opts.Logger.Info("kubevirt: scaling a running VM by stopping it", "vm", ref.String())
	return true, b.patchRunStrategy(ctx, vm, runHalted)
}

// hotpluggable reports whether a running VM can take the new size live:
// its template declares the maxima, the size fits, the vCPUs divide into
// whole sockets, and KubeVirt says the VMI can migrate.
func hotpluggable(domain, vmi obj, cpus int, memoryMiB int64) bool {
	maxSockets := num(domain, "cpu", "maxSockets")
	maxGuest := quantityMiB(str(domain, "memory", "maxGuest"))
	if maxSockets == 0 || maxGuest == 0 || memoryMiB > maxGuest {
		return false
	}
	per := max(num(domain, "cpu", "cores"), 1) * max(num(domain, "cpu", "threads"), 1)
	if int64(cpus)%per != 0 || int64(cpus)/per > maxSockets {
		return false
	}
	for _, c := range list(vmi, "status", "conditions") {
		if c, ok := c.(obj); ok && str(c, "type") == "LiveMigratable" {
			return str(c, "status") == "True"
		}
	}
	return false
}

// patchSize writes the new size into the VM's template: sockets (live)
// or cores on one socket (otherwise), memory.guest, and the memory
// request when the template has one (KubeVirt refuses a guest larger
// than its request).
func (b *Backend) patchSize(ctx context.Context, vm *unstructured.Unstructured, domain obj, cpus int, memoryMiB int64, live bool) error {
	mem := fmt.Sprintf("%dMi", memoryMiB)
	cpu := obj{"cores": int64(cpus), "sockets": nil, "threads": nil}
	if live {
		per := max(num(domain, "cpu", "cores"), 1) * max(num(domain, "cpu", "threads"), 1)
		cpu = obj{"sockets": int64(cpus) / per}
	}
	d := obj{"cpu": cpu, "memory": obj{"guest": mem}}
	if str(domain, "resources", "requests", "memory") != "" {
		d["resources"] = obj{"requests": obj{"memory": mem}}
	}
	patch, err := jsonBytes(obj{
		"metadata": obj{"resourceVersion": vm.GetResourceVersion()},
		"spec":     obj{"template": obj{"spec": obj{"domain": d}}},
	})
	if err != nil {
		return err
	}
	_, err = b.dyn.Resource(gvrVM).Namespace(vm.GetNamespace()).Patch(ctx, vm.GetName(), types.MergePatchType, patch, metav1.PatchOptions{FieldManager: fieldManager})
	return b.fail("scale", "VM "+vm.GetNamespace()+"/"+vm.GetName(), err)
}
