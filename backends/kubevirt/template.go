package kubevirt

import (
	"context"
	"k8s.io/client-go/util/retry"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/corral-dev/corral/backends"
)

var _ backends.Templater = (*Backend)(nil)

// labelTemplate marks a VM as a template. A label rather than an
// annotation, so templates are selectable (kubectl get vm -l
// corral.dev/template) as tags are; KubeVirt itself has no template flag
// on a VM (its VirtualMachineTemplate is a different object).
const labelTemplate = "corral.dev/template"

// isTemplate reports whether the VM carries the template label.
func isTemplate(labels map[string]string) bool { return labels[labelTemplate] == "true" }

// SetTemplate implements backends.Templater with the label
// corral.dev/template=true. Marking a VM that is not stopped is a
// Conflict: a template must not be running, and Power refuses to start
// one. CTs are refused: they are not cloned.
func (b *Backend) SetTemplate(ctx context.Context, ref backends.InstanceRef, on bool) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error { return b.setTemplate(ctx, ref, on) })
}

func (b *Backend) setTemplate(ctx context.Context, ref backends.InstanceRef, on bool) error {
	vm, vmi, err := b.getVM(ctx, ref)
	if err != nil {
		if _, _, ok := b.asCT(ctx, ref, err); ok {
			return backends.Refuse(backends.KindKubeVirt, "template", "a container cannot be a template; create CTs from an image")
		}
		return err
	}
	what := "VM " + ref.Namespace + "/" + ref.Name
	if on && (vmi != nil || wantsRunning(runStrategy(vm.Object))) {
		return backends.Conflictf("%s is not stopped; stop it before marking it as a template", what)
	}
	var v any // nil removes the label
	if on {
		v = "true"
	}
	patch, err := jsonBytes(obj{"metadata": obj{"resourceVersion": vm.GetResourceVersion(), "labels": obj{labelTemplate: v}}})
	if err != nil {
		return err
	}
	_, err = b.dyn.Resource(gvrVM).Namespace(ref.Namespace).Patch(ctx, ref.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: fieldManager})
	return b.fail("mark", what, err)
}
