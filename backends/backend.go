// Package backends defines the contract between Corral and the places that
// run instances: a small core interface every backend implements, optional
// capability interfaces discovered at run time (the io/fs pattern), the
// canonical instance reference, size parsing and the shared error kinds.
//
// A backend package imports this package and nothing of app, handlers or
// store. Each adapter runs the conformance suite in backendtest.
package backends

import (
	"context"
	"io"
	"net"
	"time"
)

// Kind names a backend implementation. It is the second component of a
// canonical reference (after an optional peer).
type Kind string

// The backend kinds Corral knows.
const (
	KindQEMU     Kind = "qemu"
	KindLibvirt  Kind = "libvirt"
	KindKubeVirt Kind = "kubevirt"
	KindIncus    Kind = "incus"
	KindProxmox  Kind = "proxmox"
	KindPeer     Kind = "peer"
	KindSim      Kind = "sim"
)

// State is the power state of an instance as Corral reports it on every
// surface, whatever word the backend uses.
type State string

// The power states. Backends map their native states onto these; a state
// that fits none is StateUnknown rather than a guess.
const (
	StateRunning  State = "running"
	StateStopped  State = "stopped"
	StatePaused   State = "paused"
	StateStarting State = "starting"
	StateStopping State = "stopping"
	StateUnknown  State = "unknown"
)

// Type is the workload type of an instance.
type Type string

// The workload types: a virtual machine, or a container (CT).
const (
	TypeVM Type = "vm"
	TypeCT Type = "ct"
)

// Instance is one VM or CT as a backend reports it. Sizes are in MiB.
type Instance struct {
	Ref       InstanceRef
	Type      Type
	State     State
	CPUs      int
	MemoryMiB int64
	DiskMiB   int64
	IP        string
	Node      string
	Tags      []string
	Created   time.Time
	// Template reports that the instance is marked as a template (see
	// Templater): it is cloned, never started.
	Template bool
	// Facts are backend-specific details for the instance's page, e.g.
	// the accelerator a local VM runs under or how to reach it by SSH.
	Facts []Fact
}

// Fact is one labelled detail of an instance, safe to show.
type Fact struct {
	Label string
	Value string
}

// Spec describes an instance to create. Name and Namespace become the
// reference's last components; the context is the backend's own.
type Spec struct {
	Name      string
	Namespace string
	Type      Type
	CPUs      int
	MemoryMiB int64
	DiskMiB   int64
	// Image names the source: a catalog entry, a path or a URL, as the
	// backend understands it. Empty means a blank disk.
	Image string
	// PVC names an existing volume (a Kubernetes PVC) to boot from
	// instead of Image; backends without such volumes refuse it.
	PVC  string
	Tags []string
	// Start asks the backend to start the instance once created.
	Start bool
	// CloudInit, when set, asks for a first-boot configuration (a NoCloud
	// seed on backends that attach one). Backends without cloud-init
	// support ignore it; the password is kept in Corral's registry.
	CloudInit *CloudInit
}

// CloudInit is the first-boot configuration of a new instance.
type CloudInit struct {
	Password string   // the default user's password
	SSHKeys  []string // authorized keys of the default user
	// UserData replaces the generated user-data when set (a #cloud-config
	// document or a script), verbatim.
	UserData string
}

// Action is a power transition requested through Backend.Power.
type Action string

// The power actions every backend accepts. A backend that cannot perform
// one (for example pause on a backend without it) returns Unsupported.
const (
	ActionStart    Action = "start"
	ActionStop     Action = "stop"     // hard power off
	ActionShutdown Action = "shutdown" // ACPI request to the guest
	ActionRestart  Action = "restart"
	ActionPause    Action = "pause"
	ActionResume   Action = "resume"
)

// Actions lists the power actions in the order the dashboard shows them.
var Actions = []Action{ActionStart, ActionShutdown, ActionStop, ActionRestart, ActionPause, ActionResume}

// ParseAction returns the Action named by s, or an Invalid error naming the
// accepted actions.
func ParseAction(s string) (Action, error) {
	for _, a := range Actions {
		if string(a) == s {
			return a, nil
		}
	}
	if s == "unpause" { // the original API's word for resume
		return ActionResume, nil
	}
	return "", Invalidf("unknown action %q: accepted are start, shutdown, stop, restart, pause, resume", s)
}

// Backend is the core every backend implements. Methods return errors of
// the kinds in errors.go; a method must not report success for something it
// did not do.
type Backend interface {
	// Kind reports the backend kind; it is constant.
	Kind() Kind
	// Context reports the context name this value is bound to.
	Context() string
	// List returns every instance of the context.
	List(ctx context.Context) ([]Instance, error)
	// Get returns one instance, or an error of kind NotFound.
	Get(ctx context.Context, ref InstanceRef) (Instance, error)
	// Create creates an instance and returns it as the backend now sees it.
	// A name already in use is a Conflict.
	Create(ctx context.Context, spec Spec) (Instance, error)
	// Power performs a power action. An action that does not apply to the
	// current state (start a running VM) is a Conflict.
	Power(ctx context.Context, ref InstanceRef, action Action) error
	// Delete removes the instance and what the backend created for it.
	Delete(ctx context.Context, ref InstanceRef) error
}

// Consistency says what a snapshot or an export captured.
type Consistency string

// The consistency levels of spec/CONTEXT.md.
const (
	// ConsistencyOffline: the instance was stopped; nothing was in flight.
	ConsistencyOffline Consistency = "offline"
	// ConsistencyFilesystem: the guest filesystem was frozen.
	ConsistencyFilesystem Consistency = "filesystem"
	// ConsistencyCrash: captured live with nothing quiesced.
	ConsistencyCrash Consistency = "crash"
)

// Snapshot is a point-in-time capture of an instance.
type Snapshot struct {
	Name        string
	Created     time.Time
	Consistency Consistency
	Description string
}

// Snapshotter is implemented by backends that take snapshots.
type Snapshotter interface {
	Snapshots(ctx context.Context, ref InstanceRef) ([]Snapshot, error)
	// CreateSnapshot captures the instance; a state the backend cannot
	// capture safely is refused with Unsupported, never degraded silently.
	CreateSnapshot(ctx context.Context, ref InstanceRef, name string) (Snapshot, error)
	RevertSnapshot(ctx context.Context, ref InstanceRef, name string) error
	DeleteSnapshot(ctx context.Context, ref InstanceRef, name string) error
}

// Cloner is implemented by backends that copy an instance within the context.
type Cloner interface {
	Clone(ctx context.Context, ref InstanceRef, target string) (Instance, error)
}

// Exporter is implemented by backends that stream an instance's disk out.
type Exporter interface {
	// ExportFormats lists the formats, native first ("qcow2", "raw.gz").
	ExportFormats() []string
	Export(ctx context.Context, ref InstanceRef, format string, w io.Writer) (Consistency, error)
}

// Importer is the receiving side of a cross-backend move: it creates an
// instance from a disk image file on this host.
type Importer interface {
	// Import creates spec.Name with a copy of the image at diskPath, of
	// format "qcow2" or "raw", converted to the backend's native format
	// when it differs. The disk keeps its virtual size (or grows to
	// spec.DiskMiB when that is larger); the source file is only read. A
	// name in use is a Conflict; a failed import leaves nothing behind.
	Import(ctx context.Context, spec Spec, diskPath, format string) (Instance, error)
}

// ImportChecker is implemented by importers whose ability to import
// depends on their configuration (libvirt: a local URI with a data
// directory). CanImport returns the refusal Import would give, or nil; a
// move's preflight asks it so that it refuses up front.
type ImportChecker interface {
	CanImport() error
}

// Firmware names how a VM boots.
type Firmware string

// The firmwares. A backend that reports none boots BIOS.
const (
	FirmwareBIOS Firmware = "bios"
	FirmwareUEFI Firmware = "uefi"
)

// Disk is the primary disk of an instance as a file on this host.
type Disk struct {
	Path       string   // absolute path of the image; read it, never write it
	Format     string   // "qcow2" or "raw"
	VirtualMiB int64    // the size the guest sees
	Firmware   Firmware // how the instance boots
	// InUse reports that the instance runs: Path must not be read until
	// it is stopped (a disk read while the guest writes is torn).
	InUse bool
}

// DiskSourcer is implemented by backends whose disks are files on this
// host (local QEMU, libvirt on a local URI): the read side of a move,
// which then needs no export copy. DiskSource describes the disk in any
// state; only a stopped instance's disk may be read.
type DiskSourcer interface {
	DiskSource(ctx context.Context, ref InstanceRef) (Disk, error)
}

// FirmwareImporter is implemented by importers that can boot more than
// BIOS; an Importer without it is BIOS-only, so a move of a UEFI guest
// onto it is refused.
type FirmwareImporter interface {
	ImportFirmwares() []Firmware
}

// Migrator is implemented by backends that move a running instance between
// nodes of the same context. Migrate asks for the migration and returns
// once the backend has accepted it, so a refusal (not running: Conflict;
// not migratable: Unsupported with a remedy) comes back at once; the
// returned Migration then follows it to its end. An empty targetNode lets
// the backend's scheduler choose.
type Migrator interface {
	Migrate(ctx context.Context, ref InstanceRef, targetNode string) (Migration, error)
}

// Migration is a migration the backend accepted.
type Migration interface {
	// Name names the migration as the backend knows it.
	Name() string
	// Wait blocks until the migration ends: nil when it succeeded, an
	// error of kind Failed when it failed. phase, when not nil, receives
	// each phase the backend reports, in order.
	Wait(ctx context.Context, phase func(string)) error
}

// Scaler is implemented by backends that change CPU and memory.
type Scaler interface {
	Scale(ctx context.Context, ref InstanceRef, cpus int, memoryMiB int64) error
}

// Templater is implemented by backends that mark an instance as a
// template: a template is never started (Power start is refused with a
// remedy), only cloned. Marking a running instance is a Conflict.
type Templater interface {
	SetTemplate(ctx context.Context, ref InstanceRef, on bool) error
}

// Hotplugger is implemented by backends that add and remove disks.
type Hotplugger interface {
	AddDisk(ctx context.Context, ref InstanceRef, sizeMiB int64) (string, error)
	RemoveDisk(ctx context.Context, ref InstanceRef, disk string) error
}

// Tagger is implemented by backends that store tags on the instance.
type Tagger interface {
	SetTag(ctx context.Context, ref InstanceRef, tag string, on bool) error
}

// ConsoleKind names a console protocol.
type ConsoleKind string

// The console kinds a ConsoleDialer may offer.
const (
	ConsoleVNC    ConsoleKind = "vnc"
	ConsoleSerial ConsoleKind = "serial"
	ConsoleRDP    ConsoleKind = "rdp"
)

// ConsoleDialer is implemented by backends that reach an instance's
// consoles; the console bridge copies bytes between the browser and the
// returned connection.
type ConsoleDialer interface {
	Consoles(ctx context.Context, ref InstanceRef) ([]ConsoleKind, error)
	DialConsole(ctx context.Context, ref InstanceRef, kind ConsoleKind) (net.Conn, error)
}

// Scrollback is implemented by console dialers that keep a log of an
// instance's serial console, so a viewer who connects late sees what the
// guest printed before.
type Scrollback interface {
	// SerialScrollback returns up to max bytes from the end of the serial
	// log; an instance that never ran returns an empty slice.
	SerialScrollback(ctx context.Context, ref InstanceRef, max int) ([]byte, error)
}

// Containers is implemented by backends that run CTs beside VMs.
type Containers interface {
	CreateContainer(ctx context.Context, spec Spec, image string, privileged bool) (Instance, error)
}

// Check is one result of a backend diagnostic.
type Check struct {
	Name    string
	OK      bool
	Message string
}

// Doctor is implemented by backends that diagnose their own context.
type Doctor interface {
	Doctor(ctx context.Context) []Check
}

// Event reports that the inventory of a context changed.
type Event struct {
	Ref     InstanceRef
	Deleted bool
}

// Watcher is implemented by backends that push inventory changes; the fleet
// refreshes the context on each event instead of waiting for its timer.
type Watcher interface {
	// Watch sends events until ctx ends, then closes the channel.
	Watch(ctx context.Context) (<-chan Event, error)
}
