package kubevirt

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/corral-dev/corral/backends"
)

// Sizes of a spec that names none.
const (
	defaultCPUs      = 1
	defaultMemoryMiB = 1024
	defaultDiskMiB   = 10240
)

// ociRef matches a fully qualified OCI image reference: a registry host
// (with a dot or a port, or localhost), a path, an optional tag and an
// optional digest. An unqualified "fedora:42" is not taken, because the
// node's runtime would resolve it against a registry Corral cannot see.
var ociRef = regexp.MustCompile(`^(localhost|[a-z0-9-]+(\.[a-z0-9-]+)+|[a-z0-9.-]+:[0-9]+)(/[a-z0-9]+([._-]+[a-z0-9]+)*)+(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(@sha256:[a-f0-9]{64})?$`)

// source is how the root disk of a new VM is made.
type source struct {
	image  string // an OCI image (a containerdisk), booted directly
	url    string // an http(s) image CDI imports into a DataVolume
	blank  bool   // an empty DataVolume
	pvc    string // an existing PVC the VM boots from, kept when the VM is deleted
	pvcMiB int64  // its requested size
}

func parseSource(image string) (source, error) {
	switch {
	case image == "":
		return source{blank: true}, nil
	case strings.HasPrefix(image, "http://"), strings.HasPrefix(image, "https://"):
		return source{url: image}, nil
	}
	img := strings.TrimPrefix(image, "docker://")
	if ociRef.MatchString(img) {
		return source{image: img}, nil
	}
	return source{}, backends.Invalidf("image %q is not accepted by a KubeVirt context: use a containerdisk reference with its registry (quay.io/containerdisks/fedora:42) or an http(s) URL of a qcow2 or raw image", image)
}

// Create implements backends.Backend. The VM is created first, so that a
// name in use is a Conflict before anything else exists; its root disk
// (a DataVolume for a URL import or a blank disk) and its cloud-init
// Secret follow, labelled corral.dev/vm=NAME. If one of them cannot be
// created, what was made is deleted again.
func (b *Backend) Create(ctx context.Context, spec backends.Spec) (backends.Instance, error) {
	if err := backends.ValidateName("instance", spec.Name); err != nil {
		return backends.Instance{}, err
	}
	ns := cmp.Or(spec.Namespace, b.opts.Namespace)
	if err := backends.ValidateName("namespace", ns); err != nil {
		return backends.Instance{}, err
	}
	if spec.Type != "" && spec.Type != backends.TypeVM {
		return backends.Instance{}, backends.Refuse(backends.KindKubeVirt, "container", "containers on KubeVirt contexts are not implemented yet; create a VM")
	}
	for _, t := range spec.Tags {
		if err := validateTag(t); err != nil {
			return backends.Instance{}, err
		}
	}
	src, err := parseSource(spec.Image)
	if err != nil {
		return backends.Instance{}, err
	}
	if spec.PVC != "" {
		if src, err = b.pvcSource(ctx, spec, ns); err != nil {
			return backends.Instance{}, err
		}
	}
	vm := b.vmObject(spec, ns, src)
	created, err := b.dyn.Resource(gvrVM).Namespace(ns).Create(ctx, vm, metav1.CreateOptions{FieldManager: fieldManager})
	what := "VM " + ns + "/" + spec.Name
	if err != nil {
		return backends.Instance{}, b.fail("create", what, err)
	}
	undo := func(cause error) (backends.Instance, error) {
		ref := b.ref(ns, spec.Name)
		if derr := b.Delete(context.WithoutCancel(ctx), ref); derr != nil {
			b.opts.Logger.Warn("kubevirt: could not remove a half-created VM", "vm", ref.String(), "err", derr)
		}
		return backends.Instance{}, cause
	}
	if !src.containerDisk() && src.pvc == "" {
		if _, err := b.dyn.Resource(gvrDV).Namespace(ns).Create(ctx, dataVolume(spec, ns, src), metav1.CreateOptions{FieldManager: fieldManager}); err != nil {
			return undo(b.fail("create the disk of", what, err))
		}
	}
	if spec.CloudInit != nil {
		sec := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: cloudInitSecret(spec.Name), Namespace: ns, Labels: map[string]string{labelVM: spec.Name}},
			StringData: map[string]string{"userdata": userData(spec.CloudInit)},
		}
		if _, err := b.kube.CoreV1().Secrets(ns).Create(ctx, sec, metav1.CreateOptions{FieldManager: fieldManager}); err != nil {
			return undo(b.fail("create the cloud-init secret of", what, err))
		}
	}
	return b.instance(created.Object, nil), nil
}

func (s source) containerDisk() bool { return s.image != "" }

// CheckPVC reports whether the PVC name exists in namespace (empty: the
// backend's default namespace), so a VM can boot from it: an Invalid
// error naming it when it does not. Callers use it to refuse a create at
// once rather than in its task.
func (b *Backend) CheckPVC(ctx context.Context, namespace, name string) error {
	_, err := b.getPVC(ctx, cmp.Or(namespace, b.opts.Namespace), name)
	return err
}

func (b *Backend) getPVC(ctx context.Context, ns, name string) (*corev1.PersistentVolumeClaim, error) {
	if err := backends.ValidateName("pvc", name); err != nil {
		return nil, err
	}
	pvc, err := b.kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) && !isNamespaceMissing(err) {
		return nil, backends.Invalidf("pvc %s does not exist in namespace %s of context %s: name an existing PVC, or give an image", name, ns, b.opts.Context)
	}
	if err != nil {
		return nil, b.fail("read", "PVC "+ns+"/"+name, err)
	}
	return pvc, nil
}

// pvcSource checks that the PVC spec names exists in ns: a VM made from
// a PVC boots from that volume as it is (no DataVolume, no copy), and
// Delete keeps it, since Corral did not make it.
func (b *Backend) pvcSource(ctx context.Context, spec backends.Spec, ns string) (source, error) {
	if spec.Image != "" {
		return source{}, backends.Invalidf("give either an image or a pvc as the source of VM %s, not both", spec.Name)
	}
	pvc, err := b.getPVC(ctx, ns, spec.PVC)
	if err != nil {
		return source{}, err
	}
	src := source{pvc: pvc.Name}
	if q, ok := pvc.Spec.Resources.Requests[corev1.ResourceStorage]; ok {
		src.pvcMiB = q.Value() >> 20
	}
	return src, nil
}

func rootDisk(name string) string        { return name + "-rootdisk" }
func cloudInitSecret(name string) string { return name + "-cloudinit" }

// vmObject builds the VirtualMachine of spec: runStrategy Halted (Always
// when spec.Start), cores and guest memory, a virtio root disk, the pod
// network with masquerade, and Corral's labels.
func (b *Backend) vmObject(spec backends.Spec, ns string, src source) *unstructured.Unstructured {
	labels := obj{labelVMID: strconv.FormatInt(VMID(spec.Name), 10)}
	for _, t := range spec.Tags {
		labels[labelTagPrefix+t] = "true"
	}
	annotations := obj{}
	switch {
	case src.pvc != "":
		if src.pvcMiB > 0 {
			annotations[annDiskMiB] = strconv.FormatInt(src.pvcMiB, 10)
		}
	case !src.containerDisk():
		annotations[annDiskMiB] = strconv.FormatInt(cmp.Or(spec.DiskMiB, defaultDiskMiB), 10)
	}
	rs := runHalted
	if spec.Start {
		rs = runAlways
	}
	root := obj{"name": "rootdisk"}
	switch {
	case src.pvc != "":
		root["persistentVolumeClaim"] = obj{"claimName": src.pvc}
	case src.containerDisk():
		root["containerDisk"] = obj{"image": src.image}
	default:
		root["dataVolume"] = obj{"name": rootDisk(spec.Name)}
	}
	disks := []any{obj{"name": "rootdisk", "disk": obj{"bus": "virtio"}}}
	volumes := []any{root}
	if spec.CloudInit != nil {
		disks = append(disks, obj{"name": "cloudinit", "disk": obj{"bus": "virtio"}})
		volumes = append(volumes, obj{"name": "cloudinit", "cloudInitNoCloud": obj{"secretRef": obj{"name": cloudInitSecret(spec.Name)}}})
	}
	return &unstructured.Unstructured{Object: obj{
		"apiVersion": "kubevirt.io/v1",
		"kind":       "VirtualMachine",
		"metadata":   obj{"name": spec.Name, "namespace": ns, "labels": labels, "annotations": annotations},
		"spec": obj{
			"runStrategy": rs,
			"template": obj{
				"metadata": obj{"labels": obj{"kubevirt.io/vm": spec.Name, labelVM: spec.Name}},
				"spec": obj{
					"domain": obj{
						"cpu":    obj{"cores": int64(cmp.Or(spec.CPUs, defaultCPUs))},
						"memory": obj{"guest": fmt.Sprintf("%dMi", cmp.Or(spec.MemoryMiB, defaultMemoryMiB))},
						"devices": obj{
							"disks":      disks,
							"interfaces": []any{obj{"name": "default", "masquerade": obj{}}},
						},
					},
					"networks": []any{obj{"name": "default", "pod": obj{}}},
					"volumes":  volumes,
				},
			},
		},
	}}
}

// dataVolume builds the root disk of a VM that does not boot a
// containerdisk: CDI imports the URL into it, or leaves it blank.
func dataVolume(spec backends.Spec, ns string, src source) *unstructured.Unstructured {
	s := obj{"blank": obj{}}
	if src.url != "" {
		s = obj{"http": obj{"url": src.url}}
	}
	return &unstructured.Unstructured{Object: obj{
		"apiVersion": "cdi.kubevirt.io/v1beta1",
		"kind":       "DataVolume",
		"metadata":   obj{"name": rootDisk(spec.Name), "namespace": ns, "labels": obj{labelVM: spec.Name}},
		"spec": obj{
			"source": s,
			"storage": obj{
				"accessModes": []any{"ReadWriteOnce"},
				"resources":   obj{"requests": obj{"storage": fmt.Sprintf("%dMi", cmp.Or(spec.DiskMiB, defaultDiskMiB))}},
			},
		},
	}}
}

// userData returns the cloud-init user-data of c: UserData verbatim, or a
// #cloud-config setting the default user's password and keys.
func userData(c *backends.CloudInit) string {
	if c.UserData != "" {
		return c.UserData
	}
	var sb strings.Builder
	sb.WriteString("#cloud-config\n")
	if c.Password != "" {
		q, _ := json.Marshal(c.Password) // a JSON string is a YAML string
		fmt.Fprintf(&sb, "password: %s\nchpasswd: {expire: false}\nssh_pwauth: true\n", q)
	}
	if len(c.SSHKeys) > 0 {
		sb.WriteString("ssh_authorized_keys:\n")
		for _, k := range c.SSHKeys {
			q, _ := json.Marshal(k)
			fmt.Fprintf(&sb, "  - %s\n", q)
		}
	}
	return sb.String()
}

// jsonBytes marshals a patch; it cannot fail for the maps this package
// builds, and reports an internal error if it ever does.
func jsonBytes(v any) ([]byte, error) {
	p, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("kubevirt: encode patch: %w", err)
	}
	return p, nil
}
