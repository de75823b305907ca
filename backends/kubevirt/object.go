package kubevirt

import (
	"hash/crc32"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/corral-dev/corral/backends"
)

// obj is a JSON object as the dynamic client decodes it: maps, slices,
// strings, bools, int64 and float64.
type obj = map[string]any

// str returns the string at path, or "".
func str(o obj, path ...string) string {
	s, _, _ := unstructured.NestedString(o, path...)
	return s
}

// num returns the number at path as an int64, or 0. JSON numbers decode
// as int64 when integral, float64 otherwise.
func num(o obj, path ...string) int64 {
	v, ok, _ := unstructured.NestedFieldNoCopy(o, path...)
	if !ok {
		return 0
	}
	switch n := v.(type) {
	case int64:
		return n
	case float64:
		return int64(n)
	case string: // a quoted number, as some tools write
		i, _ := strconv.ParseInt(n, 10, 64)
		return i
	}
	return 0
}

// list returns the slice at path, or nil.
func list(o obj, path ...string) []any {
	v, _, _ := unstructured.NestedSlice(o, path...)
	return v
}

// quantityMiB parses a Kubernetes quantity ("4Gi", "4096M") into MiB,
// or 0 when it is absent or malformed.
func quantityMiB(s string) int64 {
	if s == "" {
		return 0
	}
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return 0
	}
	return q.Value() >> 20
}

// VMID returns the Proxmox vmid of a VM without the corral.io/proxmox-vmid
// label: CRC32 (IEEE) of its name mapped into PVE's range 100..999999999,
// as spec/CONTEXT.md says. Create writes the same value into the label, so
// a VM keeps its vmid when the label is later read instead.
func VMID(name string) int64 {
	const lo, hi = 100, 999999999
	return lo + int64(crc32.ChecksumIEEE([]byte(name)))%(hi-lo+1)
}

// Run strategies of spec.runStrategy.
const (
	runAlways         = "Always"
	runHalted         = "Halted"
	runManual         = "Manual"
	runRerunOnFailure = "RerunOnFailure"
	runOnce           = "Once"
)

// runStrategy returns the VM's run strategy, translating the deprecated
// spec.running boolean that older VMs carry instead.
func runStrategy(vm obj) string {
	if rs := str(vm, "spec", "runStrategy"); rs != "" {
		return rs
	}
	if running, ok, _ := unstructured.NestedBool(vm, "spec", "running"); ok && running {
		return runAlways
	}
	return runHalted
}

// wantsRunning reports whether the run strategy keeps a VMI running
// without anyone asking (the strategies the VM controller restarts).
func wantsRunning(rs string) bool { return rs == runAlways || rs == runRerunOnFailure }

// printableStates maps status.printableStatus, KubeVirt's own summary of a
// VM, onto Corral's states. Statuses not listed (ErrImagePull,
// CrashLoopBackOff, ErrorUnschedulable, DataVolumeError, Unknown, ...) are
// errors on the way to running, which Corral reports as unknown rather
// than guessing.
var printableStates = map[string]backends.State{
	"Running":                 backends.StateRunning,
	"Migrating":               backends.StateRunning,
	"Stopped":                 backends.StateStopped,
	"Paused":                  backends.StatePaused,
	"Starting":                backends.StateStarting,
	"Provisioning":            backends.StateStarting,
	"WaitingForVolumeBinding": backends.StateStarting,
	"Stopping":                backends.StateStopping,
	"Terminating":             backends.StateStopping,
}

// state derives the power state of vm, whose VMI is vmi (nil when there is
// none). KubeVirt's printableStatus wins, except that it lags a run
// strategy just changed: Stopped under Always is starting, Running under
// Halted is stopping. A VM whose status was never filled (just created)
// follows its run strategy and its VMI's phase.
func state(vm, vmi obj) backends.State {
	rs := runStrategy(vm)
	ps := str(vm, "status", "printableStatus")
	switch {
	case ps == "Stopped" && wantsRunning(rs):
		return backends.StateStarting
	case ps == "Running" && rs == runHalted:
		return backends.StateStopping
	case ps != "":
		if s, ok := printableStates[ps]; ok {
			return s
		}
		return backends.StateUnknown
	}
	vmiRunning := vmi != nil && str(vmi, "status", "phase") == "Running"
	switch {
	case rs == runHalted && vmi == nil:
		return backends.StateStopped
	case rs == runHalted:
		return backends.StateStopping
	case vmiRunning:
		return backends.StateRunning
	case wantsRunning(rs):
		return backends.StateStarting
	}
	return backends.StateStopped // Manual or Once without a running VMI
}

// domainCPUs counts the vCPUs of a domain spec: cores × sockets × threads,
// each 1 when absent.
func domainCPUs(domain obj) int {
	n := int64(1)
	for _, f := range []string{"cores", "sockets", "threads"} {
		if v := num(domain, "cpu", f); v > 0 {
			n *= v
		}
	}
	return int(n)
}

// domainMemoryMiB reads memory.guest, else resources.requests.memory.
func domainMemoryMiB(domain obj) int64 {
	if m := quantityMiB(str(domain, "memory", "guest")); m > 0 {
		return m
	}
	return quantityMiB(str(domain, "resources", "requests", "memory"))
}

// instance converts a VirtualMachine and its VMI (nil when none) into an
// Instance. A VM made from an instancetype has no CPU or memory in its
// template; its running VMI has them expanded, so the VMI is asked next.
func (b *Backend) instance(vm, vmi obj) backends.Instance {
	u := unstructured.Unstructured{Object: vm}
	in := backends.Instance{
		Ref:     b.ref(u.GetNamespace(), u.GetName()),
		Type:    backends.TypeVM,
		State:   state(vm, vmi),
		Created: u.GetCreationTimestamp().Time,
	}
	domain, _, _ := unstructured.NestedMap(vm, "spec", "template", "spec", "domain")
	var vmiDomain obj
	if vmi != nil {
		vmiDomain, _, _ = unstructured.NestedMap(vmi, "spec", "domain")
	}
	in.CPUs = domainCPUs(domain)
	if _, ok := domain["cpu"]; !ok && vmiDomain != nil {
		in.CPUs = domainCPUs(vmiDomain)
	}
	if in.MemoryMiB = domainMemoryMiB(domain); in.MemoryMiB == 0 && vmiDomain != nil {
		in.MemoryMiB = domainMemoryMiB(vmiDomain)
	}
	in.DiskMiB, _ = strconv.ParseInt(u.GetAnnotations()[annDiskMiB], 10, 64)
	if in.DiskMiB == 0 {
		for _, t := range list(vm, "spec", "dataVolumeTemplates") {
			if t, ok := t.(obj); ok {
				in.DiskMiB += quantityMiB(str(t, "spec", "storage", "resources", "requests", "storage")) +
					quantityMiB(str(t, "spec", "pvc", "resources", "requests", "storage"))
			}
		}
	}
	if vmi != nil {
		in.Node = str(vmi, "status", "nodeName")
		if ifs := list(vmi, "status", "interfaces"); len(ifs) > 0 {
			if i, ok := ifs[0].(obj); ok {
				in.IP = str(i, "ipAddress")
			}
		}
	}
	in.Tags = tagsOf(u.GetLabels())
	in.Template = isTemplate(u.GetLabels())
	return in
}

// tagsOf returns the tags held as corral.dev/tag.NAME labels, sorted.
func tagsOf(labels map[string]string) []string {
	var tags []string
	for k := range labels {
		if t, ok := strings.CutPrefix(k, labelTagPrefix); ok && t != "" {
			tags = append(tags, t)
		}
	}
	slices.Sort(tags)
	return tags
}

// validateTag reports whether tag fits a label key's name part after the
// "tag." prefix: up to 59 characters of [A-Za-z0-9._-], alphanumeric at
// both ends.
func validateTag(tag string) error {
	ok := tag != "" && len(tag) <= 59
	for i := 0; ok && i < len(tag); i++ {
		c := tag[i]
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		ok = alnum || (c == '.' || c == '_' || c == '-') && i > 0 && i < len(tag)-1
	}
	if !ok {
		return backends.Invalidf("tag %q is not accepted: use up to 59 letters, digits, dots, dashes and underscores, starting and ending with a letter or digit", tag)
	}
	return nil
}
