// Package qemu is the backend of the "local" context: real VMs run by
// qemu-system-x86_64 on this machine, one process per running VM.
//
// Each VM is a folder Dir/<name>/ holding everything about it: the disk
// (disk.qcow2 or disk.raw), config.json (what Corral asked for), and while
// it runs qemu's pid file, its QMP socket, a VNC socket and a serial
// socket whose output qemu also copies to serial.log. The folder is the
// whole truth: there is no in-memory inventory, so a new Backend on the
// same Dir (a Corral restart) sees exactly what the old one saw.
//
// qemu is started with -daemonize, so a VM is not a child of Corral and
// keeps running when Corral exits; the pid file and the QMP socket are how
// a later Corral finds it again. Power actions are QMP commands over the
// unix socket; disks, snapshots, clones and exports are qemu-img on a
// stopped VM only, because qemu-img writing into an image a running qemu
// has open corrupts it.
package qemu

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/corral-dev/corral/backends"
)

var (
	_ backends.Backend       = (*Backend)(nil)
	_ backends.Snapshotter   = (*Backend)(nil)
	_ backends.Cloner        = (*Backend)(nil)
	_ backends.Exporter      = (*Backend)(nil)
	_ backends.ConsoleDialer = (*Backend)(nil)
	_ backends.RDPProber     = (*Backend)(nil)
	_ backends.Doctor        = (*Backend)(nil)
	_ backends.Scrollback    = (*Backend)(nil)
)

// Options configure the local context.
type Options struct {
	// Context names the context; default "local".
	Context string
	// Dir is the root folder; each VM is the folder Dir/<name>/. It is
	// created when missing.
	Dir string
	// QEMUPath and QEMUImgPath name the binaries; default
	// qemu-system-x86_64 and qemu-img from PATH. A missing binary makes the
	// context unavailable, not New fail.
	QEMUPath, QEMUImgPath string
	// Accel is "auto" (default), "tcg" or "kvm". auto uses KVM only when a
	// probe guest boots under it: /dev/kvm existing proves nothing (a
	// nested hypervisor may accept -accel kvm and hang after the BIOS).
	Accel string
	// Kernel, Initrd and Append are the default direct-kernel-boot guest:
	// new VMs boot it instead of their disk, and auto mode probes KVM with
	// it. Empty Kernel means VMs boot from their disk.
	Kernel, Initrd, Append string
	// ShutdownTimeout bounds how long shutdown waits for the guest to
	// power off before it pulls the plug; default 60 s.
	ShutdownTimeout time.Duration
	// NoSystemd keeps qemu under Corral's own supervision even where a
	// systemd user manager runs (see supervise.go).
	NoSystemd bool
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Logger receives what the operator may want to know (adopted VMs,
	// the accelerator chosen); nil discards it.
	Logger *slog.Logger
}

// Backend is the local context. It is safe for concurrent use; operations
// on one VM that change its state are serialized, the rest run in parallel.
type Backend struct {
	opts Options

	locks sync.Map // VM name -> *sync.Mutex

	accelOnce   sync.Once
	accel       string
	accelReason string

	managerState // whether a systemd user manager supervises launches
}

// Defaults of a new VM when the spec leaves a size at zero.
const (
	defaultCPUs      = 1
	defaultMemoryMiB = 512
	defaultDiskMiB   = 1024
)

// New returns the local context rooted at opts.Dir, which it creates when
// missing, and re-adopts the VMs found there: a VM whose qemu is still
// alive is running or paused again, any other is stopped, and its stale
// pid file and sockets are removed. Missing qemu binaries do not fail New:
// the context then reports itself unavailable on use and in Doctor.
func New(opts Options) (*Backend, error) {
	opts.Context = cmp.Or(opts.Context, "local")
	opts.QEMUPath = cmp.Or(opts.QEMUPath, "qemu-system-x86_64")
	opts.QEMUImgPath = cmp.Or(opts.QEMUImgPath, "qemu-img")
	opts.Accel = cmp.Or(opts.Accel, "auto")
	opts.ShutdownTimeout = cmp.Or(opts.ShutdownTimeout, 60*time.Second)
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	switch opts.Accel {
	case "auto", "tcg", "kvm":
	default:
		return nil, backends.Invalidf("qemu accelerator %q is not accepted: use auto, tcg or kvm", opts.Accel)
	}
	if opts.Dir == "" {
		return nil, backends.Invalidf("qemu: the VM folder (Dir) is required")
	}
	if err := os.MkdirAll(opts.Dir, 0o750); err != nil {
		return nil, fmt.Errorf("qemu: create the VM folder: %w", err)
	}
	b := &Backend{opts: opts}
	b.adopt(context.Background())
	return b, nil
}

// Kind implements backends.Backend.
func (b *Backend) Kind() backends.Kind { return backends.KindQEMU }

// Context implements backends.Backend.
func (b *Backend) Context() string { return b.opts.Context }

func (b *Backend) ref(name string) backends.InstanceRef {
	return backends.InstanceRef{Backend: backends.KindQEMU, Context: b.opts.Context, Name: name}
}

// lock serializes state changes of one VM inside this process. Another
// process is kept off the disk by qemu's own image locks.
func (b *Backend) lock(name string) func() {
	m, _ := b.locks.LoadOrStore(name, new(sync.Mutex))
	mu := m.(*sync.Mutex)
	mu.Lock()
	return mu.Unlock
}

// config is config.json: what Corral asked for when it created the VM.
// qemu itself keeps no definition, so this file is the VM's definition.
type config struct {
	Name       string    `json:"name"`
	CPUs       int       `json:"cpus"`
	MemoryMiB  int64     `json:"memoryMiB"`
	DiskMiB    int64     `json:"diskMiB"`
	DiskFormat string    `json:"diskFormat"` // "qcow2" or "raw"
	SSHPort    int       `json:"sshPort"`    // host port forwarded to the guest's 22
	Kernel     string    `json:"kernel,omitempty"`
	Initrd     string    `json:"initrd,omitempty"`
	Append     string    `json:"append,omitempty"`
	Image      string    `json:"image,omitempty"` // the source the disk was copied from
	Tags       []string  `json:"tags,omitempty"`
	Created    time.Time `json:"created"`
}

// vm is one VM folder with its definition.
type vm struct {
	dir string
	cfg config
}

// The files of a VM folder.
func (v *vm) disk() string    { return filepath.Join(v.dir, "disk."+v.cfg.DiskFormat) }
func (v *vm) pidFile() string { return filepath.Join(v.dir, "qemu.pid") }
func (v *vm) qmpSock() string { return filepath.Join(v.dir, "qmp.sock") }
func (v *vm) vncSock() string { return filepath.Join(v.dir, "vnc.sock") }
func (v *vm) serSock() string { return filepath.Join(v.dir, "serial.sock") }
func (v *vm) serLog() string  { return filepath.Join(v.dir, "serial.log") }

const configFile = "config.json"

func readConfig(dir string) (config, error) {
	var c config
	data, err := os.ReadFile(filepath.Join(dir, configFile))
	if err != nil {
		return c, err
	}
	if err := json.Unmarshal(data, &c); err != nil {
		return c, fmt.Errorf("qemu: %s/%s: %w", filepath.Base(dir), configFile, err)
	}
	return c, nil
}

// writeConfig replaces config.json atomically: a folder with a config is a
// VM, so a half-written one must never be seen.
func writeConfig(dir string, c config) error {
	data, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, configFile+".tmp")
	if err := os.WriteFile(tmp, append(data, '\n'), 0o640); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, configFile))
}

// lookup returns the VM ref names, or NotFound. A name that is not a valid
// VM name cannot name a folder Corral made, and must not be joined to a
// path ("../x").
func (b *Backend) lookup(ref backends.InstanceRef) (*vm, error) {
	if ref.Backend != backends.KindQEMU || ref.Context != b.opts.Context || ref.Peer != "" || ref.Namespace != "" ||
		validName("instance", ref.Name) != nil {
		return nil, backends.NotFoundf("instance %s is not in context %s", ref, b.opts.Context)
	}
	dir := filepath.Join(b.opts.Dir, ref.Name)
	cfg, err := readConfig(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, backends.NotFoundf("instance %s does not exist in context %s", ref.Name, b.opts.Context)
	}
	if err != nil {
		return nil, backends.Failed(fmt.Sprintf("qemu could not read the definition of %s", ref.Name), err)
	}
	cfg.Name = ref.Name // the folder names the VM, whatever the file says
	return &vm{dir: dir, cfg: cfg}, nil
}

// List implements backends.Backend: every folder of Dir with a config.json.
func (b *Backend) List(ctx context.Context) ([]backends.Instance, error) {
	ents, err := os.ReadDir(b.opts.Dir)
	if err != nil {
		return nil, backends.Unavailable(b.opts.Context, err)
	}
	out := make([]backends.Instance, 0, len(ents))
	for _, e := range ents {
		if !e.IsDir() || validName("instance", e.Name()) != nil {
			continue
		}
		v, err := b.lookup(b.ref(e.Name()))
		if errors.Is(err, backends.ErrNotFound) {
			continue // a folder being created or deleted, or not a VM
		}
		if err != nil {
			return nil, err
		}
		out = append(out, b.instance(ctx, v))
	}
	slices.SortFunc(out, func(a, c backends.Instance) int { return cmp.Compare(a.Ref.Name, c.Ref.Name) })
	return out, nil
}

// Get implements backends.Backend.
func (b *Backend) Get(ctx context.Context, ref backends.InstanceRef) (backends.Instance, error) {
	v, err := b.lookup(ref)
	if err != nil {
		return backends.Instance{}, err
	}
	return b.instance(ctx, v), nil
}

// instance reports v with its live state.
func (b *Backend) instance(ctx context.Context, v *vm) backends.Instance {
	in := backends.Instance{
		Ref:       b.ref(v.cfg.Name),
		Type:      backends.TypeVM,
		State:     b.state(ctx, v),
		CPUs:      v.cfg.CPUs,
		MemoryMiB: v.cfg.MemoryMiB,
		DiskMiB:   v.cfg.DiskMiB,
		Tags:      slices.Clone(v.cfg.Tags),
		Created:   v.cfg.Created,
	}
	if in.State != backends.StateStopped {
		// User-mode networking: the guest is reached through a port
		// forwarded on the host's loopback (SSHPort).
		in.IP = "127.0.0.1"
		in.Facts = append(in.Facts, backends.Fact{Label: "SSH", Value: fmt.Sprintf("ssh -p %d USER@127.0.0.1 (port %d of this host forwards to the guest's 22)", v.cfg.SSHPort, v.cfg.SSHPort)})
		if a, err := os.ReadFile(v.accelFile()); err == nil {
			in.Facts = append(in.Facts, backends.Fact{Label: "Accelerator", Value: string(a)})
		}
	}
	return in
}

// accelFile records the accelerator v was launched under, and why.
func (v *vm) accelFile() string { return filepath.Join(v.dir, "accel") }

// SSHPort returns the host port on 127.0.0.1 that is forwarded to port 22
// of ref's guest while it runs.
func (b *Backend) SSHPort(ref backends.InstanceRef) (int, error) {
	v, err := b.lookup(ref)
	if err != nil {
		return 0, err
	}
	return v.cfg.SSHPort, nil
}

// SerialLog returns the path of the file that holds ref's serial output
// since its last start (the boot before that is in serial.log.1). Readiness
// checks wait for a marker in it.
func (b *Backend) SerialLog(ref backends.InstanceRef) (string, error) {
	v, err := b.lookup(ref)
	if err != nil {
		return "", err
	}
	return v.serLog(), nil
}

// validName applies the shared name rule (backends.ValidateName), which is
// also safe as a file name and in a URL.
func validName(what, name string) error { return backends.ValidateName(what, name) }

// Delete implements backends.Backend: it pulls the plug of a running VM
// and removes its folder, disk and snapshots included.
func (b *Backend) Delete(ctx context.Context, ref backends.InstanceRef) error {
	v, err := b.lookup(ref)
	if err != nil {
		return err
	}
	defer b.lock(ref.Name)()
	if pid, alive := v.process(); alive {
		if err := b.quit(ctx, v, pid); err != nil {
			return err
		}
	}
	// Remove the definition first: a folder without config.json is no
	// longer a VM, so a failure halfway leaves debris, not a broken VM.
	if err := os.Remove(filepath.Join(v.dir, configFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return backends.Failed(fmt.Sprintf("qemu could not delete %s", ref.Name), err)
	}
	if err := os.RemoveAll(v.dir); err != nil {
		return backends.Failed(fmt.Sprintf("deleted %s but could not remove its folder", ref.Name), err)
	}
	return nil
}
