package backends

import (
	"context"
	"reflect"
)

// Capability describes one optional interface for the capability matrix.
type Capability struct {
	Name   string // the interface's name, e.g. "Snapshotter"
	Op     string // what a refusal names, e.g. "snapshot"
	Remedy string // a generic remedy shown when a backend lacks it
	has    func(Backend) bool
}

// Has reports whether b implements the capability.
func (c Capability) Has(b Backend) bool { return c.has(b) }

func capability[T any](op, remedy string) Capability {
	return Capability{
		Name:   reflect.TypeFor[T]().Name(),
		Op:     op,
		Remedy: remedy,
		has:    func(b Backend) bool { _, ok := b.(T); return ok },
	}
}

// Capabilities lists every optional interface, in the order of the
// capability matrix (docs/backend-parity.md).
var Capabilities = []Capability{
	capability[Snapshotter]("snapshot", "use the backend's own snapshot tool"),
	capability[Cloner]("clone", "create a new instance from the same image"),
	capability[Exporter]("export", "copy the disk with the backend's own tools"),
	capability[Importer]("import", "choose another destination backend"),
	capability[DiskSourcer]("disk source", "the move exports the disk to scratch space instead"),
	capability[Migrator]("migrate", "use a cold move (corral move) instead"),
	capability[Scaler]("scale", "stop the instance and change it with the backend's own tools"),
	capability[Templater]("template", "clone the instance instead and keep the original stopped"),
	capability[Hotplugger]("hotplug", "stop the instance and attach the disk with the backend's own tools"),
	capability[Tagger]("tag", "use folders, which work on every backend"),
	capability[ConsoleDialer]("console", "connect with the backend's own console client"),
	capability[Scrollback]("serial scrollback", "the console shows output from the moment it connects"),
	capability[Containers]("container", "create a VM instead"),
	capability[Doctor]("doctor", "check the backend with its own tools"),
	capability[Watcher]("watch", "the inventory is refreshed on a timer instead"),
}

// Supports reports whether b implements the capability interface T.
// Views ask it before showing a control.
func Supports[T any](b Backend) bool {
	_, ok := b.(T)
	return ok
}

// As returns b as the capability interface T, or an *Unsupported refusal
// naming op when b lacks it.
func As[T any](b Backend, op string) (T, error) {
	if t, ok := b.(T); ok {
		return t, nil
	}
	var zero T
	remedy := ""
	name := reflect.TypeFor[T]().Name()
	for _, c := range Capabilities {
		if c.Name == name {
			remedy = c.Remedy
		}
	}
	return zero, &Unsupported{Op: op, Backend: string(b.Kind()), Remedy: remedy}
}

// Snapshots returns b's Snapshotter or a refusal.
func Snapshots(b Backend) (Snapshotter, error) { return As[Snapshotter](b, "snapshot") }

// Clones returns b's Cloner or a refusal.
func Clones(b Backend) (Cloner, error) { return As[Cloner](b, "clone") }

// Exports returns b's Exporter or a refusal.
func Exports(b Backend) (Exporter, error) { return As[Exporter](b, "export") }

// Imports returns b's Importer or a refusal.
func Imports(b Backend) (Importer, error) { return As[Importer](b, "import") }

// Consoles returns b's ConsoleDialer or a refusal.
func Consoles(b Backend) (ConsoleDialer, error) { return As[ConsoleDialer](b, "console") }

// InstanceConsoles is implemented by console dialers that answer
// Consoles with fewer reads when the caller already holds the instance
// (a fleet snapshot's): its type and state need not be read again.
type InstanceConsoles interface {
	ConsolesOf(ctx context.Context, in Instance) ([]ConsoleKind, error)
}

// ConsolesOf returns the consoles in offers now: d's ConsolesOf when it
// has one, else d.Consoles of in's ref.
func ConsolesOf(ctx context.Context, d ConsoleDialer, in Instance) ([]ConsoleKind, error) {
	if c, ok := d.(InstanceConsoles); ok {
		return c.ConsolesOf(ctx, in)
	}
	return d.Consoles(ctx, in.Ref)
}
