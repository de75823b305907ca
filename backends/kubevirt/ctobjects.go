package kubevirt

import (
	"cmp"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// CTSource is what a CT is made from, for callers that build CTs
// themselves (the CT pools of app/vdi/ctpool).
type CTSource struct {
	Image      string
	CPUs       int
	MemoryMiB  int64
	DiskMiB    int64
	Privileged bool
}

// LabelCT is the label that names a CT on its Pod, PVC and Service.
const LabelCT = labelCT

// CTPVCName returns the name of the data PVC of the CT name.
func CTPVCName(name string) string { return ctPVC(name) }

// CTObjects returns the data PVC, the Service and the Pod of the CT name
// in ns as CreateContainer makes them (the same labels, the PVC's spec
// annotation, the same pod), without creating them: a caller adds its
// own labels and creates them, and the result is a CT the backend lists,
// starts, stops and deletes like any other.
func CTObjects(ns, name string, src CTSource) (*corev1.PersistentVolumeClaim, *corev1.Service, *corev1.Pod) {
	cs := ctSpec{Image: src.Image, CPUs: cmp.Or(src.CPUs, defaultCPUs), MemoryMiB: cmp.Or(src.MemoryMiB, defaultMemoryMiB), Privileged: src.Privileged}
	annot, _ := json.Marshal(cs) // a struct of strings, ints and a bool always encodes
	labels := func() map[string]string { return map[string]string{labelCT: name} }
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: ctPVC(name), Namespace: ns, Labels: labels(),
			Annotations: map[string]string{annCTSpec: string(annot)}},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceStorage: resource.MustParse(fmt.Sprintf("%dMi", cmp.Or(src.DiskMiB, defaultDiskMiB))),
			}},
		},
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels()},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{labelCT: name},
			Ports:    []corev1.ServicePort{{Name: "ssh", Protocol: corev1.ProtocolTCP, Port: 22}},
		},
	}
	return pvc, svc, ctPod(name, ns, cs)
}
