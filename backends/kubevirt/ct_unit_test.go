package kubevirt

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestCTPodPrivileged checks the distrobox pod without an API server
// (kube-apiserver refuses privileged pods unless --allow-privileged=true).
func TestCTPodPrivileged(t *testing.T) {
	pod := ctPod("distro", "ns", ctSpec{Image: "docker.io/library/debian:bookworm", CPUs: 2, MemoryMiB: 2048, Privileged: true})
	if pod.Labels[labelCT] != "distro" || pod.Namespace != "ns" {
		t.Fatalf("meta = %+v", pod.ObjectMeta)
	}
	c := pod.Spec.Containers[0]
	if c.VolumeMounts[0].MountPath != "/persist" || pod.Spec.Volumes[0].PersistentVolumeClaim.ClaimName != "distro-data" {
		t.Errorf("mounts %+v volumes %+v", c.VolumeMounts, pod.Spec.Volumes)
	}
	sc := c.SecurityContext
	if sc == nil || !*sc.Privileged || !slices.Contains(sc.Capabilities.Add, "SYS_ADMIN") || !slices.Contains(sc.Capabilities.Add, "SYS_CHROOT") {
		t.Errorf("security context = %+v", sc)
	}
	script := strings.Join(c.Command, " ")
	for _, want := range []string{"cp -a --one-file-system /. /persist", "[ ! -e /persist/.corral-seeded ]", "touch /persist/.corral-seeded", "exec chroot /persist /sbin/init", "exec chroot /persist sh -c 'sleep infinity'"} {
		if !strings.Contains(script, want) {
			t.Errorf("command lacks %q:\n%s", want, script)
		}
	}
	cpu, mem := c.Resources.Limits[corev1.ResourceCPU], c.Resources.Limits[corev1.ResourceMemory]
	if cpu.String() != "2" || mem.String() != "2Gi" {
		t.Errorf("limits cpu %s mem %s", cpu.String(), mem.String())
	}
	un := ctPod("box", "ns", ctSpec{Image: "x.io/y", CPUs: 1, MemoryMiB: 512})
	if c := un.Spec.Containers[0]; c.SecurityContext != nil || c.Command != nil || c.VolumeMounts[0].MountPath != "/data" {
		t.Errorf("unprivileged container = %+v", c)
	}
}

func TestCTState(t *testing.T) {
	for phase, want := range map[corev1.PodPhase]string{
		corev1.PodRunning: "running", corev1.PodPending: "starting", "": "starting",
		corev1.PodFailed: "stopped", corev1.PodSucceeded: "stopped", corev1.PodUnknown: "unknown",
	} {
		if got := ctState(&corev1.Pod{Status: corev1.PodStatus{Phase: phase}}); string(got) != want {
			t.Errorf("phase %q: %s, want %s", phase, got, want)
		}
	}
	if ctState(nil) != "stopped" {
		t.Errorf("no pod is not stopped")
	}
}
