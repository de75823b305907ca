package qemu

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/internal/qemuimg"
)

// maxSocketPath is the room sun_path leaves for a unix socket path (108
// bytes with the terminating NUL). A VM whose socket paths do not fit
// could never start, so Create refuses it.
const maxSocketPath = 107

// Create implements backends.Backend: it makes the VM folder with its disk
// (a copy of spec.Image, or a blank qcow2) and config.json, and starts the
// VM when the spec asks.
func (b *Backend) Create(ctx context.Context, spec backends.Spec) (backends.Instance, error) {
	if err := validName("instance", spec.Name); err != nil {
		return backends.Instance{}, err
	}
	if spec.Namespace != "" {
		return backends.Instance{}, backends.Invalidf("the qemu backend has no namespaces: leave the namespace of %s empty", spec.Name)
	}
	if spec.Type == backends.TypeCT {
		return backends.Instance{}, backends.Refuse(backends.KindQEMU, "container", "create a VM instead")
	}
	if spec.CPUs < 0 || spec.MemoryMiB < 0 || spec.DiskMiB < 0 {
		return backends.Instance{}, backends.Invalidf("CPUs, memory and disk of %s must not be negative", spec.Name)
	}
	if strings.HasPrefix(spec.Image, "http://") || strings.HasPrefix(spec.Image, "https://") {
		return backends.Instance{}, backends.Refuse(backends.KindQEMU, "create from a URL",
			"download the image first and give the path of the qcow2 or raw file")
	}
	var src imageInfo
	if spec.Image != "" {
		var err error
		if src, err = b.source(ctx, spec.Image); err != nil {
			return backends.Instance{}, err
		}
	}
	cfg := config{
		Name:       spec.Name,
		CPUs:       cmp.Or(spec.CPUs, defaultCPUs),
		MemoryMiB:  cmp.Or(spec.MemoryMiB, defaultMemoryMiB),
		DiskMiB:    cmp.Or(spec.DiskMiB, defaultDiskMiB),
		DiskFormat: "qcow2",
		Kernel:     b.opts.Kernel,
		Initrd:     b.opts.Initrd,
		Append:     b.opts.Append,
		Image:      spec.Image,
		Tags:       slices.Clone(spec.Tags),
		Created:    b.opts.Now().UTC(),
	}
	if spec.Image != "" {
		cfg.DiskFormat = src.Format
		cfg.DiskMiB = max(qemuimg.ToMiB(src.VirtualSize), spec.DiskMiB)
	}
	v, err := b.newFolder(spec.Name)
	if err != nil {
		return backends.Instance{}, err
	}
	v.cfg = cfg
	if err := b.fill(ctx, v, func() error {
		if spec.CloudInit != nil {
			id := fmt.Sprintf("%s-%d", spec.Name, cfg.Created.Unix())
			if err := writeSeed(v.seedPath(), spec.Name, spec.CloudInit, id); err != nil {
				return err
			}
		}
		if spec.Image == "" {
			return b.img().Create(ctx, v.disk(), cfg.DiskMiB)
		}
		if err := b.img().Convert(ctx, spec.Image, src.Format, v.disk(), src.Format); err != nil {
			return err
		}
		if cfg.DiskMiB > qemuimg.ToMiB(src.VirtualSize) {
			return b.img().Resize(ctx, v.disk(), src.Format, cfg.DiskMiB)
		}
		return nil
	}); err != nil {
		return backends.Instance{}, b.fail("create", spec.Name, err)
	}
	if spec.Start {
		if err := b.Power(ctx, v.ref(b), backends.ActionStart); err != nil {
			return backends.Instance{}, err
		}
	}
	return b.instance(ctx, v), nil
}

func (v *vm) ref(b *Backend) backends.InstanceRef { return b.ref(v.cfg.Name) }

// source checks that image is a local qcow2 or raw file and reads it.
func (b *Backend) source(ctx context.Context, image string) (imageInfo, error) {
	st, err := os.Stat(image)
	if err != nil || !st.Mode().IsRegular() {
		return imageInfo{}, backends.Invalidf("image %s does not exist: give a path to a qcow2 or raw file", image)
	}
	ii, err := b.img().Info(ctx, image, true)
	if err != nil {
		return imageInfo{}, b.fail("read the image for", filepath.Base(image), err)
	}
	if ii.Format != "qcow2" && ii.Format != "raw" {
		return imageInfo{}, backends.Invalidf("image %s is %s: give a qcow2 or raw file", image, ii.Format)
	}
	return ii, nil
}

// newFolder claims Dir/name. Mkdir is the atomic test of the name: two
// concurrent creates of one name cannot both succeed.
func (b *Backend) newFolder(name string) (*vm, error) {
	dir := filepath.Join(b.opts.Dir, name)
	if len(filepath.Join(dir, "serial.sock")) > maxSocketPath {
		return nil, backends.Invalidf("instance name %s is too long for this host's VM folder: unix socket paths are limited to %d bytes; use a shorter name", name, maxSocketPath)
	}
	if err := os.Mkdir(dir, 0o750); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil, backends.Conflictf("an instance named %s already exists in context %s", name, b.opts.Context)
		}
		return nil, backends.Failed(fmt.Sprintf("qemu could not create %s", name), err)
	}
	return &vm{dir: dir, cfg: config{Name: name}}, nil
}

// fill makes the disk of a new folder with mkDisk, picks its SSH port and
// writes its config last; on any failure the folder is removed, so a failed
// create leaves nothing behind.
func (b *Backend) fill(ctx context.Context, v *vm, mkDisk func() error) (err error) {
	defer func() {
		if err != nil {
			_ = os.RemoveAll(v.dir)
		}
	}()
	if err := mkDisk(); err != nil {
		return err
	}
	if v.cfg.SSHPort, err = b.freePort(ctx); err != nil {
		return err
	}
	return writeConfig(v.dir, v.cfg)
}

// freePort picks a loopback port the kernel says is free and no other VM
// of this context has claimed: a stopped VM holds no socket, but its
// config keeps the port for its next start.
func (b *Backend) freePort(ctx context.Context) (int, error) {
	taken := map[int]bool{}
	if ents, err := os.ReadDir(b.opts.Dir); err == nil {
		for _, e := range ents {
			if c, err := readConfig(filepath.Join(b.opts.Dir, e.Name())); err == nil {
				taken[c.SSHPort] = true
			}
		}
	}
	var lc net.ListenConfig
	for range 20 {
		l, err := lc.Listen(ctx, "tcp", "127.0.0.1:0")
		if err != nil {
			return 0, fmt.Errorf("qemu: find a free port: %w", err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
		if !taken[port] {
			return port, nil
		}
	}
	return 0, errors.New("qemu: no free loopback port for a port forward")
}

// Clone implements backends.Cloner: a stopped VM's disk is copied with
// qemu-img convert into a new VM with its own SSH port. Snapshots are not
// copied: the clone starts its own history.
func (b *Backend) Clone(ctx context.Context, ref backends.InstanceRef, target string) (backends.Instance, error) {
	src, err := b.lookup(ref)
	if err != nil {
		return backends.Instance{}, err
	}
	if err := validName("instance", target); err != nil {
		return backends.Instance{}, err
	}
	defer b.lock(ref.Name)()
	if _, alive := src.process(); alive {
		return backends.Instance{}, backends.Conflictf("cannot clone %s while it runs: stop it first (corral stop %s)", ref.Name, ref.Name)
	}
	dst, err := b.newFolder(target)
	if err != nil {
		return backends.Instance{}, err
	}
	dst.cfg = src.cfg
	dst.cfg.Name = target
	dst.cfg.Created = b.opts.Now().UTC()
	dst.cfg.Tags = slices.Clone(src.cfg.Tags)
	if err := b.fill(ctx, dst, func() error {
		return b.img().Convert(ctx, src.disk(), src.cfg.DiskFormat, dst.disk(), dst.cfg.DiskFormat)
	}); err != nil {
		return backends.Instance{}, b.fail("clone", ref.Name, err)
	}
	return b.instance(ctx, dst), nil
}
