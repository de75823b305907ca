package qemu

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"

	diskfs "github.com/diskfs/go-diskfs"
	"github.com/diskfs/go-diskfs/disk"
	"github.com/diskfs/go-diskfs/filesystem"
	"github.com/diskfs/go-diskfs/filesystem/iso9660"

	"github.com/corral-dev/corral/backends"
)

// seedPath is the NoCloud seed of v, attached as a read-only disk when it
// exists. cloud-init finds it by its volume label, cidata.
func (v *vm) seedPath() string { return v.dir + "/seed.iso" }

// writeSeed builds the NoCloud seed: an ISO 9660 volume labelled cidata
// with Rock Ridge names (cloud-init reads "meta-data" and "user-data",
// which plain ISO 9660 cannot spell), built with go-diskfs rather than by
// running genisoimage.
func writeSeed(path, name string, ci *backends.CloudInit, instanceID string) error {
	_ = os.Remove(path) // diskfs.Create wants a path that does not exist
	d, err := diskfs.Create(path, 2<<20, diskfs.SectorSizeDefault)
	if err != nil {
		return fmt.Errorf("qemu: seed: %w", err)
	}
	d.LogicalBlocksize = 2048
	fs, err := d.CreateFilesystem(disk.FilesystemSpec{Partition: 0, FSType: filesystem.TypeISO9660, VolumeLabel: "cidata"})
	if err != nil {
		return fmt.Errorf("qemu: seed: %w", err)
	}
	files := map[string]string{
		"meta-data": fmt.Sprintf("instance-id: %s\nlocal-hostname: %s\n", instanceID, name),
		"user-data": userData(ci),
	}
	for fname, content := range files {
		f, err := fs.OpenFile("/"+fname, os.O_CREATE|os.O_RDWR)
		if err != nil {
			return fmt.Errorf("qemu: seed %s: %w", fname, err)
		}
		if _, err := f.Write([]byte(content)); err != nil {
			return fmt.Errorf("qemu: seed %s: %w", fname, err)
		}
	}
	iso, ok := fs.(*iso9660.FileSystem)
	if !ok {
		return fmt.Errorf("qemu: seed: not an ISO 9660 filesystem")
	}
	if err := iso.Finalize(iso9660.FinalizeOptions{RockRidge: true, VolumeIdentifier: "cidata"}); err != nil {
		return fmt.Errorf("qemu: seed: %w", err)
	}
	return fs.Close()
}

// userData is the caller's user-data, or a #cloud-config that sets the
// default user's password and SSH keys. Values are JSON strings, which
// YAML reads as the same strings whatever they contain.
func userData(ci *backends.CloudInit) string {
	if ci.UserData != "" {
		return ci.UserData
	}
	var b strings.Builder
	b.WriteString("#cloud-config\n")
	if ci.Password != "" {
		fmt.Fprintf(&b, "password: %s\nchpasswd: {expire: false}\nssh_pwauth: true\n", quote(ci.Password))
	}
	if len(ci.SSHKeys) > 0 {
		b.WriteString("ssh_authorized_keys:\n")
		for _, k := range ci.SSHKeys {
			fmt.Fprintf(&b, "  - %s\n", quote(k))
		}
	}
	return b.String()
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
