// Package ctpool is the CT-backed desktop pools of spec/vdi-ct-pools.md:
// a pool definition in a ConfigMap, members that are ordinary Corral CTs
// (a pod, a data PVC and a Service made by backends/kubevirt), a
// reconciler that keeps the members in line with the definition, and the
// claim and release of a member through the Lease claims of app/vdi.
//
// The reconciler never touches a member that a user has claimed: every
// create, start, replace and delete of a member happens while the
// reconciler holds that member's Lease as vdi.ReconcilerIdentity, so a
// user's claim and a reconciler (or two reconcilers) never act on one
// member at once.
package ctpool

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"

	"github.com/corral-dev/corral/backends"
)

// Names, labels and keys of spec/vdi-ct-pools.md.
const (
	configMapPrefix = "corral-vdi-ctpool-"
	keySpec         = "spec"
	keyStatus       = "status"
	// LabelPool is on the pool's ConfigMap and on every member's pod, PVC
	// and Service: the pool name.
	LabelPool = "corral.dev/vdi-ct-pool"
	// LabelMember is on a member's pod, PVC and Service: the member name.
	LabelMember = "corral.dev/vdi-ct-member"
	// LabelSource is on a member's pod, PVC and Service: the hash of the
	// source fields it was made from. Another hash is drift.
	LabelSource = "corral.dev/vdi-ct-source"
	// AnnAssignedTo on a member's PVC copies the claim holder for display;
	// the Lease is the authority.
	AnnAssignedTo = "corral.dev/vdi-assigned-to"
	// ModeEphemeral is the only mode: a release destroys the member.
	ModeEphemeral  = "ephemeral"
	modePersistent = "persistent"
	fieldManager   = "corral-vdi"
)

// Defaults of a pool definition.
const (
	DefaultCPU    = 1
	DefaultMemory = "1Gi"
	DefaultDisk   = "5Gi"
)

// Spec is a pool definition: the ConfigMap's spec key.
type Spec struct {
	Image        string `json:"image"`
	CPU          int    `json:"cpu"`
	Memory       string `json:"memory"`
	Disk         string `json:"disk"`
	StorageClass string `json:"storageClass,omitempty"`
	Privileged   bool   `json:"privileged"`
	// Init runs the image's own entrypoint; without it a member runs
	// sleep infinity.
	Init bool   `json:"init"`
	Mode string `json:"mode"`
	Size int    `json:"size"`
}

// ConfigMapName returns the name of the ConfigMap of pool.
func ConfigMapName(pool string) string { return configMapPrefix + pool }

// MemberName returns the name of member n of pool.
func MemberName(pool string, n int) string { return fmt.Sprintf("%s-%d", pool, n) }

// memberIndex returns n of a member named POOL-n, 0 when the name has
// another shape.
func memberIndex(pool, member string) int {
	rest, ok := strings.CutPrefix(member, pool+"-")
	if !ok || rest == "" || rest[0] == '0' {
		return 0
	}
	n := 0
	for _, c := range rest {
		if c < '0' || c > '9' || n > 1e6 {
			return 0
		}
		n = n*10 + int(c-'0')
	}
	return n
}

// ValidatePoolName checks a pool name: a DNS label short enough that
// its members' PVC names (POOL-n-data) stay within 63 characters.
func ValidatePoolName(name string) error {
	if err := backends.ValidateName("pool", name); err != nil {
		return err
	}
	if len(name) > 50 {
		return backends.Invalidf("pool name %q is longer than 50 characters: its members' names would be too long for Kubernetes", name)
	}
	return nil
}

// WithDefaults returns s with the defaults filled in.
func (s Spec) WithDefaults() Spec {
	if s.CPU == 0 {
		s.CPU = DefaultCPU
	}
	if s.Memory == "" {
		s.Memory = DefaultMemory
	}
	if s.Disk == "" {
		s.Disk = DefaultDisk
	}
	if s.Mode == "" {
		s.Mode = ModeEphemeral
	}
	s.Image = strings.TrimSpace(s.Image)
	return s
}

// errPersistent is the refusal of mode persistent at apply, reconcile,
// claim and release.
func errPersistent(pool string) error {
	return backends.Invalidf("pool %s has mode persistent, which CT pools do not support: only mode ephemeral (a release destroys the member); use a VM pool (corral vdi pool create) for persistent desktops", pool)
}

// Validate checks a definition with its defaults filled in.
func (s Spec) Validate(pool string) error {
	switch s.Mode {
	case ModeEphemeral:
	case modePersistent:
		return errPersistent(pool)
	default:
		return backends.Invalidf("pool %s: mode %q: accepted is ephemeral", pool, s.Mode)
	}
	if s.Image == "" {
		return backends.Invalidf("pool %s: image is required: give an OCI image such as ghcr.io/example/desktop:1", pool)
	}
	if strings.ContainsAny(s.Image, " \t\r\n") || strings.Contains(s.Image, "://") {
		return backends.Invalidf("pool %s: image %q is not an OCI image reference: give one such as ghcr.io/example/desktop:1", pool, s.Image)
	}
	if s.Size < 0 || s.Size > 1000 {
		return backends.Invalidf("pool %s: size %d: accepted is 0 to 1000", pool, s.Size)
	}
	if s.CPU < 1 || s.CPU > 256 {
		return backends.Invalidf("pool %s: cpu %d: accepted is a whole number of cores from 1 to 256", pool, s.CPU)
	}
	if _, err := mib("memory", s.Memory); err != nil {
		return backends.Invalidf("pool %s: %v", pool, err)
	}
	if _, err := mib("disk", s.Disk); err != nil {
		return backends.Invalidf("pool %s: %v", pool, err)
	}
	if s.StorageClass != "" {
		if err := backends.ValidateName("storage class", s.StorageClass); err != nil {
			return err
		}
	}
	return nil
}

// mib parses a quantity such as 2Gi into MiB (at least 1).
func mib(what, q string) (int64, error) {
	v, err := resource.ParseQuantity(q)
	if err != nil || v.Sign() <= 0 {
		return 0, fmt.Errorf("%s %q: accepted is a size such as 512Mi or 2Gi", what, q)
	}
	n := (v.Value() + (1<<20 - 1)) >> 20
	return n, nil
}

// Source returns the hash of the source fields (image, CPU, memory,
// disk, StorageClass, privileged, init): the corral.dev/vdi-ct-source
// label. Sizes count by value, so 1Gi and 1024Mi are the same source.
func (s Spec) Source() string {
	mem, _ := mib("memory", s.Memory)
	disk, _ := mib("disk", s.Disk)
	b, _ := json.Marshal([]any{s.Image, s.CPU, mem, disk, s.StorageClass, s.Privileged, s.Init})
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])[:16]
}

// ParseSpec reads a definition from YAML or JSON (the spec key of the
// ConfigMap, or the file of apply -f). Unknown fields are refused.
func ParseSpec(data []byte) (Spec, error) {
	var s Spec
	if err := yaml.UnmarshalStrict(data, &s); err != nil {
		return s, backends.Invalidf("pool definition: %v; accepted fields are image, cpu, memory, disk, storageClass, privileged, init, mode, size", err)
	}
	return s, nil
}
