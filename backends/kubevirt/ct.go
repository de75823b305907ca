package kubevirt

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/corral-dev/corral/backends"
)

// Containers (CTs) are "pet pods": a Pod, a data PVC and a Service, each
// labelled corral.dev/ct=NAME, in the ref's namespace. The PVC is the CT's
// durable identity: it survives Stop, and its annotation corral.dev/ct-spec
// records what the pod is made from (image, CPUs, memory, privilege), so
// Start can make the pod again. Stop deletes the pod (grace period 0);
// Delete removes all three. Nothing is left to a garbage collector.
//
// Unprivileged (the default), the PVC is mounted at /data and the rest of
// the filesystem is the image's own ephemeral layer. Privileged (the
// distrobox mode), the PVC is mounted at /persist; on first boot the pod
// seeds it with a copy of the image's root filesystem and then chroots
// into it, so the whole root survives Stop and Start.

var _ backends.Containers = (*Backend)(nil)

const (
	labelCT   = "corral.dev/ct"      // the Pod, PVC and Service of the CT of that name
	annCTSpec = "corral.dev/ct-spec" // on the PVC: the JSON ctSpec the pod is made from
	ctPersist = "/persist"           // where a privileged CT's PVC is mounted
	ctData    = "/data"              // where an unprivileged CT's PVC is mounted
	ctSeeded  = ".corral-seeded"     // marks a seeded rootfs on a privileged CT's PVC
)

// ctSpec is what the PVC's annotation records.
type ctSpec struct {
	Image      string `json:"image"`
	CPUs       int    `json:"cpus"`
	MemoryMiB  int64  `json:"memoryMiB"`
	Privileged bool   `json:"privileged"`
}

func ctPVC(name string) string { return name + "-data" }

// ctSeedScript seeds the PVC with the image's root filesystem on first
// boot, mounts the kernel filesystems into it and chroots into it: its
// /sbin/init when it has one, a shell that sleeps otherwise. (A failed
// "exec chroot /persist /sbin/init" would not fall back: exec replaces
// the shell with chroot, which then exits, so the choice is made first.)
const ctSeedScript = `set -u
if [ ! -e /persist/` + ctSeeded + ` ]; then
  cp -a --one-file-system /. /persist && touch /persist/` + ctSeeded + `
fi
for d in proc sys dev; do mkdir -p /persist/$d; done
mount -t proc proc /persist/proc 2>/dev/null || true
mount --rbind /sys /persist/sys 2>/dev/null || true
mount --rbind /dev /persist/dev 2>/dev/null || true
if [ -e /persist/sbin/init ] || [ -L /persist/sbin/init ]; then
  exec chroot /persist /sbin/init
fi
exec chroot /persist sh -c 'sleep infinity'
`

// CreateContainer implements backends.Containers. The PVC is created
// first (a name in use is a Conflict before anything else exists), then
// the Service and the Pod; if one of them cannot be made, what was made
// is deleted again.
func (b *Backend) CreateContainer(ctx context.Context, spec backends.Spec, image string, privileged bool) (backends.Instance, error) {
	if err := backends.ValidateName("instance", spec.Name); err != nil {
		return backends.Instance{}, err
	}
	ns := cmp.Or(spec.Namespace, b.opts.Namespace)
	if err := backends.ValidateName("namespace", ns); err != nil {
		return backends.Instance{}, err
	}
	image = strings.TrimSpace(cmp.Or(image, spec.Image))
	if image == "" {
		return backends.Instance{}, backends.Invalidf("image is required for a CT: give an OCI image, e.g. docker.io/library/debian:bookworm")
	}
	if strings.ContainsAny(image, " \t\r\n") || strings.HasPrefix(image, "http://") || strings.HasPrefix(image, "https://") {
		return backends.Instance{}, backends.Invalidf("image %q is not an OCI image reference: give one such as docker.io/library/debian:bookworm", image)
	}
	if spec.CPUs < 0 || spec.MemoryMiB < 0 || spec.DiskMiB < 0 {
		return backends.Instance{}, backends.Invalidf("cpus, memory and disk of a CT must not be negative")
	}
	cs := ctSpec{
		Image:      strings.TrimPrefix(image, "docker://"),
		CPUs:       cmp.Or(spec.CPUs, defaultCPUs),
		MemoryMiB:  cmp.Or(spec.MemoryMiB, defaultMemoryMiB),
		Privileged: privileged,
	}
	what := "CT " + ns + "/" + spec.Name
	// A VM of the same name would share the reference.
	if _, err := b.dyn.Resource(gvrVM).Namespace(ns).Get(ctx, spec.Name, metav1.GetOptions{}); err == nil {
		return backends.Instance{}, backends.Conflictf("%s: a VM of that name already exists in context %s", what, b.opts.Context)
	} else if !apierrors.IsNotFound(err) {
		return backends.Instance{}, b.fail("check the name of", what, err)
	}
	annot, err := json.Marshal(cs)
	if err != nil {
		return backends.Instance{}, fmt.Errorf("kubevirt: encode CT spec: %w", err)
	}
	labels := map[string]string{labelCT: spec.Name}
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{
			Name: ctPVC(spec.Name), Namespace: ns, Labels: labels,
			Annotations: map[string]string{annCTSpec: string(annot)},
		},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceStorage: resource.MustParse(fmt.Sprintf("%dMi", cmp.Or(spec.DiskMiB, defaultDiskMiB))),
			}},
		},
	}
	created, err := b.kube.CoreV1().PersistentVolumeClaims(ns).Create(ctx, pvc, metav1.CreateOptions{FieldManager: fieldManager})
	if err != nil {
		return backends.Instance{}, b.fail("create the data volume of", what, err)
	}
	undo := func(cause error) (backends.Instance, error) {
		if derr := b.deleteCT(context.WithoutCancel(ctx), ns, spec.Name); derr != nil {
			b.opts.Logger.Warn("kubevirt: could not remove a half-created CT", "ct", b.ref(ns, spec.Name).String(), "err", derr)
		}
		return backends.Instance{}, cause
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: spec.Name, Namespace: ns, Labels: labels},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{labelCT: spec.Name},
			Ports:    []corev1.ServicePort{{Name: "ssh", Protocol: corev1.ProtocolTCP, Port: 22}},
		},
	}
	if _, err := b.kube.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{FieldManager: fieldManager}); err != nil {
		return undo(b.fail("create the service of", what, err))
	}
	pod, err := b.kube.CoreV1().Pods(ns).Create(ctx, ctPod(spec.Name, ns, cs), metav1.CreateOptions{FieldManager: fieldManager})
	if err != nil {
		return undo(b.fail("create the pod of", what, err))
	}
	return b.ctInstance(created, pod), nil
}

// ctPod builds the pod of a CT from the spec its PVC records.
func ctPod(name, ns string, cs ctSpec) *corev1.Pod {
	limits := corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewQuantity(int64(cs.CPUs), resource.DecimalSI),
		corev1.ResourceMemory: resource.MustParse(fmt.Sprintf("%dMi", cs.MemoryMiB)),
	}
	c := corev1.Container{
		Name:         "ct",
		Image:        cs.Image,
		Stdin:        true, // an image whose command is a shell keeps running, and a console can attach
		TTY:          true,
		Resources:    corev1.ResourceRequirements{Limits: limits},
		VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: ctData}},
	}
	if cs.Privileged {
		c.VolumeMounts[0].MountPath = ctPersist
		c.Command = []string{"/bin/sh", "-c", ctSeedScript}
		c.SecurityContext = &corev1.SecurityContext{
			Privileged: ptr.To(true),
			Capabilities: &corev1.Capabilities{
				Add: []corev1.Capability{"SYS_ADMIN", "SYS_CHROOT"},
			},
		}
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: ns,
			Labels:      map[string]string{labelCT: name},
			Annotations: map[string]string{"kubectl.kubernetes.io/default-container": "ct"},
		},
		Spec: corev1.PodSpec{
			Hostname:                      name,
			RestartPolicy:                 corev1.RestartPolicyAlways,
			EnableServiceLinks:            ptr.To(false),
			TerminationGracePeriodSeconds: ptr.To(int64(10)),
			Containers:                    []corev1.Container{c},
			Volumes: []corev1.Volume{{
				Name: "data",
				VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{
					ClaimName: ctPVC(name),
				}},
			}},
		},
	}
}

// readCTSpec reads the annotation of a CT's PVC.
func readCTSpec(pvc *corev1.PersistentVolumeClaim) (ctSpec, error) {
	var cs ctSpec
	raw := pvc.Annotations[annCTSpec]
	if raw == "" {
		return cs, backends.Invalidf("the data volume %s/%s has no %s annotation, so the CT's pod cannot be made again", pvc.Namespace, pvc.Name, annCTSpec)
	}
	if err := json.Unmarshal([]byte(raw), &cs); err != nil || cs.Image == "" {
		return cs, backends.Invalidf("the %s annotation of the data volume %s/%s is not valid, so the CT's pod cannot be made again", annCTSpec, pvc.Namespace, pvc.Name)
	}
	return cs, nil
}

// ctInstance reports a CT: its state from the pod (none: stopped), its
// sizes from the PVC.
func (b *Backend) ctInstance(pvc *corev1.PersistentVolumeClaim, pod *corev1.Pod) backends.Instance {
	cs, _ := readCTSpec(pvc)
	in := backends.Instance{
		Ref:       b.ref(pvc.Namespace, pvc.Labels[labelCT]),
		Type:      backends.TypeCT,
		State:     ctState(pod),
		CPUs:      cs.CPUs,
		MemoryMiB: cs.MemoryMiB,
		Created:   pvc.CreationTimestamp.Time,
	}
	if q, ok := pvc.Spec.Resources.Requests[corev1.ResourceStorage]; ok {
		in.DiskMiB = q.Value() >> 20
	}
	phase, ready := "Stopped", false
	if pod != nil {
		in.IP, in.Node = pod.Status.PodIP, pod.Spec.NodeName
		phase = cmp.Or(string(pod.Status.Phase), string(corev1.PodPending))
		for _, c := range pod.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				ready = true
			}
		}
	}
	in.Facts = []backends.Fact{
		{Label: "Image", Value: cs.Image},
		{Label: "Privileged", Value: strconv.FormatBool(cs.Privileged)},
		{Label: "Phase", Value: phase},
		{Label: "Ready", Value: strconv.FormatBool(ready)},
		{Label: "Data volume", Value: pvc.Name},
	}
	return in
}

// ctState maps the pod phase onto Corral's states.
func ctState(pod *corev1.Pod) backends.State {
	if pod == nil {
		return backends.StateStopped
	}
	if pod.DeletionTimestamp != nil {
		return backends.StateStopping
	}
	switch pod.Status.Phase {
	case corev1.PodRunning:
		return backends.StateRunning
	case corev1.PodPending, "":
		return backends.StateStarting
	case corev1.PodSucceeded, corev1.PodFailed:
		return backends.StateStopped
	}
	return backends.StateUnknown
}

// listCTs returns the CTs of every namespace: two requests, the labelled
// PVCs and the labelled pods.
func (b *Backend) listCTs(ctx context.Context) ([]backends.Instance, error) {
	pvcs, err := b.kube.CoreV1().PersistentVolumeClaims("").List(ctx, metav1.ListOptions{LabelSelector: labelCT})
	if err != nil {
		return nil, b.fail("list the containers of", "context "+b.opts.Context, err)
	}
	pods, err := b.kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{LabelSelector: labelCT})
	if err != nil {
		return nil, b.fail("list the container pods of", "context "+b.opts.Context, err)
	}
	byKey := make(map[[2]string]*corev1.Pod, len(pods.Items))
	for i := range pods.Items {
		p := &pods.Items[i]
		byKey[[2]string{p.Namespace, p.Labels[labelCT]}] = p
	}
	out := make([]backends.Instance, 0, len(pvcs.Items))
	for i := range pvcs.Items {
		pvc := &pvcs.Items[i]
		name := pvc.Labels[labelCT]
		if name == "" || pvc.Name != ctPVC(name) {
			continue
		}
		out = append(out, b.ctInstance(pvc, byKey[[2]string{pvc.Namespace, name}]))
	}
	return out, nil
}

// getCT returns the PVC of the CT ref names and its pod (nil when it has
// none). No such CT is NotFound.
func (b *Backend) getCT(ctx context.Context, ref backends.InstanceRef) (*corev1.PersistentVolumeClaim, *corev1.Pod, error) {
	if err := b.check(ref); err != nil {
		return nil, nil, err
	}
	what := "instance " + ref.Namespace + "/" + ref.Name
	pvc, err := b.kube.CoreV1().PersistentVolumeClaims(ref.Namespace).Get(ctx, ctPVC(ref.Name), metav1.GetOptions{})
	if err != nil {
		return nil, nil, b.fail("read", what, err)
	}
	if pvc.Labels[labelCT] != ref.Name {
		return nil, nil, backends.NotFoundf("%s does not exist in context %s", what, b.opts.Context)
	}
	pod, err := b.ctPodOf(ctx, ref.Namespace, ref.Name)
	if err != nil {
		return nil, nil, err
	}
	return pvc, pod, nil
}

// ctPodOf returns the pod of a CT, or nil when it has none.
func (b *Backend) ctPodOf(ctx context.Context, ns, name string) (*corev1.Pod, error) {
	pod, err := b.kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, b.fail("read the pod of", "CT "+ns+"/"+name, err)
	}
	if pod.Labels[labelCT] != name {
		return nil, nil // a pod of that name Corral did not make
	}
	return pod, nil
}

// asCT is the fallback of Get, Power and Delete when ref names no VM:
// the CT's PVC and pod when ref names a CT, ok false otherwise.
func (b *Backend) asCT(ctx context.Context, ref backends.InstanceRef, vmErr error) (*corev1.PersistentVolumeClaim, *corev1.Pod, bool) {
	if !errors.Is(vmErr, backends.ErrNotFound) || b.check(ref) != nil {
		return nil, nil, false
	}
	pvc, pod, err := b.getCT(ctx, ref)
	if err != nil {
		return nil, nil, false
	}
	return pvc, pod, true
}

// powerCT performs action on a CT. start makes the pod from the PVC's
// annotation (a Conflict when it has one; a pod that ended is replaced);
// stop and shutdown delete the pod with grace period 0 and keep the PVC
// (a Conflict when there is no pod); restart does both; pause and resume
// are refused: a pod cannot be frozen through the Kubernetes API.
func (b *Backend) powerCT(ctx context.Context, ref backends.InstanceRef, pvc *corev1.PersistentVolumeClaim, pod *corev1.Pod, action backends.Action) error {
	what := "CT " + ref.Namespace + "/" + ref.Name
	switch action {
	case backends.ActionStart:
		if pod != nil && pod.DeletionTimestamp == nil && ctState(pod) != backends.StateStopped {
			return backends.Conflictf("%s is already running or starting (pod phase %s)", what, cmp.Or(string(pod.Status.Phase), "Pending"))
		}
		if pod != nil && pod.DeletionTimestamp != nil {
			return backends.Conflictf("%s is still stopping; retry when its pod is gone", what)
		}
		if pod != nil { // ended (Succeeded, Failed): replace it
			if err := b.deleteCTPod(ctx, pod); err != nil {
				return b.fail("remove the ended pod of", what, err)
			}
		}
		return b.startCT(ctx, ref, pvc)
	case backends.ActionStop, backends.ActionShutdown:
		if pod == nil {
			return backends.Conflictf("%s is already stopped", what)
		}
		if err := b.deleteCTPod(ctx, pod); err != nil && !apierrors.IsNotFound(err) {
			return b.fail("stop", what, err)
		}
		return nil
	case backends.ActionRestart:
		if pod == nil || ctState(pod) != backends.StateRunning {
			return backends.Conflictf("%s is not running, so it cannot restart", what)
		}
		if err := b.deleteCTPod(ctx, pod); err != nil && !apierrors.IsNotFound(err) {
			return b.fail("restart", what, err)
		}
		return b.startCT(ctx, ref, pvc)
	case backends.ActionPause, backends.ActionResume:
		return backends.Refuse(backends.KindKubeVirt, string(action), "a container (pod) cannot be paused through the Kubernetes API; stop it instead")
	}
	return backends.Invalidf("unknown action %q: accepted are start, shutdown, stop, restart, pause, resume", action)
}

func (b *Backend) startCT(ctx context.Context, ref backends.InstanceRef, pvc *corev1.PersistentVolumeClaim) error {
	cs, err := readCTSpec(pvc)
	if err != nil {
		return err
	}
	_, err = b.kube.CoreV1().Pods(ref.Namespace).Create(ctx, ctPod(ref.Name, ref.Namespace, cs), metav1.CreateOptions{FieldManager: fieldManager})
	if apierrors.IsAlreadyExists(err) {
		return backends.Conflictf("CT %s/%s is already running or starting", ref.Namespace, ref.Name)
	}
	return b.fail("start", "CT "+ref.Namespace+"/"+ref.Name, err)
}

// deleteCTPod deletes a pod at once (grace period 0), on the condition
// that it is still the pod the caller read.
func (b *Backend) deleteCTPod(ctx context.Context, pod *corev1.Pod) error {
	return b.kube.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: ptr.To(int64(0)),
		Preconditions:      &metav1.Preconditions{UID: ptr.To(pod.UID)},
	})
}

// deleteCT removes a CT's pod (grace period 0), Service and PVC; each
// that is already gone is fine.
func (b *Backend) deleteCT(ctx context.Context, ns, name string) error {
	what := "CT " + ns + "/" + name
	var errs []error
	gone := func(op string, err error) {
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, b.fail(op, what, err))
		}
	}
	core := b.kube.CoreV1()
	if pod, err := b.ctPodOf(ctx, ns, name); err != nil {
		errs = append(errs, err)
	} else if pod != nil {
		gone("delete the pod of", core.Pods(ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))}))
	}
	if svc, err := core.Services(ns).Get(ctx, name, metav1.GetOptions{}); err == nil && svc.Labels[labelCT] == name {
		gone("delete the service of", core.Services(ns).Delete(ctx, name, metav1.DeleteOptions{}))
	} else {
		gone("read the service of", err)
	}
	gone("delete the data volume of", core.PersistentVolumeClaims(ns).Delete(ctx, ctPVC(name), metav1.DeleteOptions{}))
	if len(errs) > 0 {
		return backends.Failed(fmt.Sprintf("%s was not fully deleted; delete the objects labelled %s=%s by hand", what, labelCT, name), errors.Join(errs...))
	}
	return nil
}
