package libvirt

import (
	"bytes"
	"cmp"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"libvirt.org/go/libvirt"
	"libvirt.org/go/libvirtxml"

	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/internal/qemuimg"
)

// Defaults for a spec that leaves sizes out, the same as every backend's.
const (
	defaultCPUs      = 1
	defaultMemoryMiB = 512
	defaultDiskMiB   = 10240
)

// metaNS is the XML namespace of Corral's element in a domain's
// <metadata>. libvirt keeps one element per namespace and leaves the
// others alone, so other tools' metadata survives Corral's writes.
const metaNS = "https://corral.dev/xmlns/libvirt/1"

// meta is what Corral stores in a domain's <metadata>.
type meta struct {
	XMLName xml.Name `xml:"https://corral.dev/xmlns/libvirt/1 instance"`
	Created string   `xml:"created,omitempty"` // RFC 3339, UTC
	Tags    []string `xml:"tag"`
}

// readMeta returns Corral's element from a domain's metadata, or the zero
// meta when the domain was defined elsewhere.
func readMeta(md *libvirtxml.DomainMetadata) (meta, error) {
	var m meta
	if md == nil {
		return m, nil
	}
	dec := xml.NewDecoder(strings.NewReader(md.XML))
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return m, nil
		}
		if err != nil {
			return m, fmt.Errorf("libvirt: domain metadata: %w", err)
		}
		if se, ok := tok.(xml.StartElement); ok {
			if se.Name.Space == metaNS && se.Name.Local == "instance" {
				err := dec.DecodeElement(&m, &se)
				return m, err
			}
			if err := dec.Skip(); err != nil {
				return m, fmt.Errorf("libvirt: domain metadata: %w", err)
			}
		}
	}
}

// writeMeta replaces Corral's element in def's metadata with m and keeps
// every other element as libvirt gave it (each carries its own namespace
// declaration, so it stands alone).
func writeMeta(def *libvirtxml.Domain, m meta) error {
	ours, err := xml.Marshal(m)
	if err != nil {
		return fmt.Errorf("libvirt: domain metadata: %w", err)
	}
	var keep bytes.Buffer
	if def.Metadata != nil {
		raw := def.Metadata.XML
		dec := xml.NewDecoder(strings.NewReader(raw))
		for {
			start := dec.InputOffset()
			tok, err := dec.Token()
			if err == io.EOF {
				break
			}
			if err != nil {
				return fmt.Errorf("libvirt: domain metadata: %w", err)
			}
			se, ok := tok.(xml.StartElement)
			if !ok {
				continue
			}
			if err := dec.Skip(); err != nil {
				return fmt.Errorf("libvirt: domain metadata: %w", err)
			}
			if se.Name.Space != metaNS {
				keep.WriteString(raw[start:dec.InputOffset()])
			}
		}
	}
	keep.Write(ours)
	def.Metadata = &libvirtxml.DomainMetadata{XML: keep.String()}
	return nil
}

// domainXML returns the definition of a new domain for spec: type "test"
// on the test driver, otherwise "qemu" (TCG; KVM is not assumed) with ACPI,
// without which an ACPI shutdown request reaches no guest, and disk as its
// only disk.
func (b *Backend) domainXML(spec backends.Spec, disk string) (string, error) {
	def := libvirtxml.Domain{
		Type:   "qemu",
		Name:   spec.Name,
		Memory: &libvirtxml.DomainMemory{Value: uint(cmp.Or(spec.MemoryMiB, defaultMemoryMiB)), Unit: "MiB"},
		VCPU:   &libvirtxml.DomainVCPU{Value: uint(cmp.Or(spec.CPUs, defaultCPUs))},
		OS:     &libvirtxml.DomainOS{Type: &libvirtxml.DomainOSType{Type: "hvm"}},
	}
	if b.test {
		def.Type = "test"
	} else {
		def.Features = &libvirtxml.DomainFeatureList{ACPI: &libvirtxml.DomainFeature{}}
		def.Devices = &libvirtxml.DomainDeviceList{}
		if disk != "" {
			def.Devices.Disks = []libvirtxml.DomainDisk{{
				Device: "disk",
				Driver: &libvirtxml.DomainDiskDriver{Name: "qemu", Type: "qcow2"},
				Source: &libvirtxml.DomainDiskSource{File: &libvirtxml.DomainDiskSourceFile{File: disk}},
				Target: &libvirtxml.DomainDiskTarget{Dev: "vda", Bus: "virtio"},
			}}
		}
		if b.opts.Kernel != "" {
			def.OS.Kernel, def.OS.Initrd, def.OS.Cmdline = b.opts.Kernel, b.opts.Initrd, b.opts.Append
		}
		// A serial port on a pty (virsh console reaches it) whose output
		// qemu also writes to a log in DataDir, truncated on each start:
		// what the guest printed is readable without a console client.
		serial := libvirtxml.DomainSerial{
			Source: &libvirtxml.DomainChardevSource{Pty: &libvirtxml.DomainChardevSourcePty{}},
			Target: &libvirtxml.DomainSerialTarget{Port: new(uint)},
		}
		if p := b.serialLog(spec.Name); p != "" {
			serial.Log = &libvirtxml.DomainChardevLog{File: p, Append: "off"}
		}
		def.Devices.Serials = []libvirtxml.DomainSerial{serial}
	}
	m := meta{Created: b.opts.Now().UTC().Format(time.RFC3339), Tags: spec.Tags}
	if err := writeMeta(&def, m); err != nil {
		return "", err
	}
	return def.Marshal()
}

// serialLog is the file new domain name's serial output goes to, or ""
// without a DataDir.
func (b *Backend) serialLog(name string) string {
	if b.test || b.opts.DataDir == "" || backends.ValidateName("instance", name) != nil {
		return ""
	}
	return filepath.Join(b.opts.DataDir, name+".serial.log")
}

// SerialLog returns the file holding the serial output of ref's current
// boot (Corral-created domains only). Readiness checks wait for a marker
// in it.
func (b *Backend) SerialLog(ref backends.InstanceRef) (string, error) {
	if _, err := b.Get(context.Background(), ref); err != nil {
		return "", err
	}
	p := b.serialLog(ref.Name)
	if p == "" {
		return "", backends.NotFoundf("instance %s has no serial log in context %s", ref.Name, b.opts.Context)
	}
	return p, nil
}

// readDomain returns d's live definition.
func readDomain(d *libvirt.Domain) (*libvirtxml.Domain, error) {
	doc, err := d.GetXMLDesc(0)
	if err != nil {
		return nil, err
	}
	var def libvirtxml.Domain
	if err := def.Unmarshal(doc); err != nil {
		return nil, fmt.Errorf("libvirt: domain XML: %w", err)
	}
	return &def, nil
}

// instance reports d as an Instance from two calls: its state and its XML.
func (b *Backend) instance(d *libvirt.Domain) (backends.Instance, error) {
	st, _, err := d.GetState()
	if err != nil {
		return backends.Instance{}, err
	}
	def, err := readDomain(d)
	if err != nil {
		return backends.Instance{}, err
	}
	in := backends.Instance{
		Ref:   b.ref(def.Name),
		Type:  backends.TypeVM,
		State: stateOf(st),
	}
	if def.VCPU != nil {
		// current is the number of online vCPUs when it is below the maximum.
		in.CPUs = int(cmp.Or(def.VCPU.Current, def.VCPU.Value))
	}
	if def.Memory != nil {
		in.MemoryMiB = toMiB(def.Memory.Value, def.Memory.Unit)
	}
	m, err := readMeta(def.Metadata)
	if err != nil {
		return backends.Instance{}, err
	}
	in.Tags = m.Tags
	if m.Created != "" {
		// A malformed time (edited by hand) is reported as unknown rather
		// than failing the whole listing.
		if t, err := time.Parse(time.RFC3339, m.Created); err == nil {
			in.Created = t
		}
	}
	return in, nil
}

// stateOf maps libvirt's domain states onto Corral's.
func stateOf(s libvirt.DomainState) backends.State {
	switch s {
	case libvirt.DOMAIN_RUNNING, libvirt.DOMAIN_BLOCKED:
		// Blocked is a running guest waiting on I/O or idle.
		return backends.StateRunning
	case libvirt.DOMAIN_PAUSED, libvirt.DOMAIN_PMSUSPENDED:
		// Suspended to RAM by the guest is paused as far as a user can
		// tell; Power resume wakes it (see power.go).
		return backends.StatePaused
	case libvirt.DOMAIN_SHUTOFF, libvirt.DOMAIN_CRASHED:
		return backends.StateStopped
	case libvirt.DOMAIN_SHUTDOWN:
		// The guest is shutting down but has not finished.
		return backends.StateStopping
	}
	return backends.StateUnknown
}

// toMiB converts a libvirt memory size with its unit (default KiB) to MiB.
func toMiB(v uint, unit string) int64 {
	n := int64(v)
	switch strings.ToLower(unit) {
	case "b", "bytes":
		return n >> 20
	case "kb":
		return n * 1000 >> 20
	case "", "k", "kib":
		return n >> 10
	case "mb":
		return n * 1000 * 1000 >> 20
	case "m", "mib":
		return n
	case "gb":
		return n * 1000 * 1000 * 1000 >> 20
	case "g", "gib":
		return n << 10
	case "tb":
		return n * 1000 * 1000 * 1000 * 1000 >> 20
	case "t", "tib":
		return n << 20
	}
	return 0
}

// createDisk makes a blank qcow2 image for a new domain in DataDir and
// returns its path. It shells out to qemu-img, as the qemu backend does,
// because DataDir is a directory of this host and not a libvirt pool.
func (b *Backend) createDisk(ctx context.Context, name string, sizeMiB int64) (string, error) {
	if b.opts.DataDir == "" {
		return "", backends.Refuse(backends.KindLibvirt, "create", fmt.Sprintf("configure a data directory for context %s so new disks have a place", b.opts.Context))
	}
	path := filepath.Join(b.opts.DataDir, name+".qcow2")
	if _, err := os.Stat(path); err == nil {
		return "", backends.Conflictf("a disk for %s already exists in the data directory of context %s", name, b.opts.Context)
	}
	if err := os.MkdirAll(b.opts.DataDir, 0o750); err != nil {
		return "", backends.Failed(fmt.Sprintf("could not prepare the data directory of context %s", b.opts.Context), err)
	}
	if err := qemuimg.Tool("").Create(ctx, path, sizeMiB); err != nil {
		return "", diskError(b.opts.Context, fmt.Sprintf("could not create the disk of %s", name), err)
	}
	return path, nil
}

// ownedDisks returns the file disks of def that lie in DataDir: the ones
// Corral created and may remove. Disks elsewhere belong to whoever made them.
func (b *Backend) ownedDisks(def *libvirtxml.Domain) []string {
	if b.test || b.opts.DataDir == "" || def.Devices == nil {
		return nil
	}
	var out []string
	for _, d := range def.Devices.Disks {
		if d.Device != "" && d.Device != "disk" || d.Source == nil || d.Source.File == nil {
			continue
		}
		rel, err := filepath.Rel(b.opts.DataDir, d.Source.File.File)
		if err == nil && rel != "." && !strings.HasPrefix(rel, "..") && !filepath.IsAbs(rel) {
			out = append(out, d.Source.File.File)
		}
	}
	return out
}

// removeDisk deletes a disk image; a missing one is already gone.
func removeDisk(path string) error {
	if path == "" {
		return nil
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}
