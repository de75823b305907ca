package pve

import (
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/corral-dev/corral/backends"
)

// Conf is the part of a guest's PVE configuration Corral keeps itself:
// key -> value as PVE writes it in the guest's .conf file.
type Conf map[string]string

func parseConf(text string) Conf {
	c := Conf{}
	_ = json.Unmarshal([]byte(text), &c)
	return c
}

func (c Conf) text() string {
	b, _ := json.Marshal(c)
	return string(b)
}

// Keys the backend is authoritative for: they are computed from the live
// instance, never stored.
var derivedKeys = []string{"name", "cores", "sockets", "memory", "vcpus"}

// Keys that are parameters of a call, not configuration.
var callKeys = []string{"vmid", "node", "start", "digest", "delete", "skiplock", "revert", "force", "background_delay",
	"archive", "storage", "unique", "live-restore", "pool"}

// numeric keys are JSON numbers in GET config; boolean keys are 0/1.
var numericKeys = map[string]bool{"cores": true, "sockets": true, "vcpus": true, "cpuunits": true, "balloon": true,
	"shares": true, "migrate_speed": true, "cpulimit": true, "migrate_downtime": true}

var boolKeys = map[string]bool{"onboot": true, "numa": true, "kvm": true, "acpi": true, "tablet": true, "protection": true,
	"template": true, "localtime": true, "freeze": true, "reboot": true, "autostart": true, "keephugepages": true, "tdf": true}

var diskKey = regexp.MustCompile(`^(scsi|virtio|sata|ide)\d+$`)
var netKey = regexp.MustCompile(`^net\d+$`)

// Config returns the guest's configuration as GET .../config answers it,
// with its digest.
func (g Guest) Config() map[string]any {
	out := map[string]any{}
	lines := g.lines()
	var sum strings.Builder
	for _, kv := range lines {
		sum.WriteString(kv[0] + ": " + kv[1] + "\n")
		out[kv[0]] = typed(kv[0], kv[1])
	}
	h := sha1.Sum([]byte(sum.String()))
	out["digest"] = hex.EncodeToString(h[:])
	return out
}

// Digest returns the configuration's digest.
func (g Guest) Digest() string { return g.Config()["digest"].(string) }

// Pending returns the configuration as GET .../pending answers it: no
// change is ever staged, so each key has its value only.
func (g Guest) Pending() []map[string]any {
	out := []map[string]any{}
	for _, kv := range g.lines() {
		out = append(out, map[string]any{"key": kv[0], "value": typed(kv[0], kv[1])})
	}
	return out
}

func typed(key, v string) any {
	if boolKeys[key] || numericKeys[key] {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			return n
		}
		if f, err := strconv.ParseFloat(v, 64); err == nil {
			return f
		}
	}
	return v
}

// lines returns the configuration as sorted key/value pairs: the stored
// keys, the derived ones, and for a guest created elsewhere a disk and a
// network card described from what the backend reports.
func (g Guest) lines() [][2]string {
	c := Conf{}
	for k, v := range g.Conf {
		c[k] = v
	}
	sockets := 1
	if s, err := strconv.Atoi(c["sockets"]); err == nil && s > 0 && g.In.CPUs%s == 0 {
		sockets = s
	}
	c["name"] = g.In.Ref.Name
	c["cores"] = strconv.Itoa(max(g.In.CPUs/sockets, 1))
	c["sockets"] = strconv.Itoa(sockets)
	c["memory"] = strconv.FormatInt(g.In.MemoryMiB, 10)
	delete(c, "vcpus")
	var disks []string
	for k := range c {
		if diskKey.MatchString(k) && !strings.Contains(c[k], "media=cdrom") {
			disks = append(disks, k)
		}
	}
	slices.Sort(disks)
	if len(disks) == 0 && g.In.DiskMiB > 0 {
		c["scsi0"] = fmt.Sprintf("local:vm-%d-disk-0", g.VMID)
		disks = []string{"scsi0"}
		if c["scsihw"] == "" {
			c["scsihw"] = "virtio-scsi-pci"
		}
	}
	if len(disks) > 0 && g.In.DiskMiB > 0 { // one disk: its size is the backend's, when it reports one
		c[disks[0]] = withSize(c[disks[0]], g.In.DiskMiB)
	}
	if g.Conf == nil {
		c["net0"] = "virtio=" + MAC(g.In.Ref.String(), 0) + ",bridge=vmbr0"
		if g.In.IP != "" {
			c["agent"] = "1"
		}
		c["ostype"] = "l26"
	}
	if len(g.In.Tags) > 0 && c["tags"] == "" {
		c["tags"] = strings.Join(g.In.Tags, ";")
	}
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make([][2]string, 0, len(keys))
	for _, k := range keys {
		if k == "template" && c[k] != "1" {
			continue
		}
		out = append(out, [2]string{k, c[k]})
	}
	return out
}

// withSize returns a disk string with its size= option set from MiB, in
// PVE's unit style (G when whole GiB, else M).
func withSize(disk string, mib int64) string {
	parts := strings.Split(disk, ",")
	out := parts[:1]
	for _, p := range parts[1:] {
		if !strings.HasPrefix(p, "size=") {
			out = append(out, p)
		}
	}
	size := fmt.Sprintf("%dM", mib)
	if mib%1024 == 0 {
		size = fmt.Sprintf("%dG", mib/1024)
	}
	return strings.Join(append(out, "size="+size), ",")
}

// MAC returns the MAC address of card n of the guest ref: PVE's prefix
// BC:24:11 and three bytes of a CRC32 of the ref, so it is stable.
func MAC(ref string, n int) string {
	h := crc32.ChecksumIEEE([]byte(ref + "#" + strconv.Itoa(n)))
	return fmt.Sprintf("BC:24:11:%02X:%02X:%02X", byte(h>>16), byte(h>>8), byte(h))
}

var netModels = []string{"virtio", "e1000", "e1000e", "rtl8139", "vmxnet3", "i82551", "i82557b", "i82559er", "ne2k_isa", "ne2k_pci", "pcnet"}

var macRe = regexp.MustCompile(`^[0-9A-Fa-f]{2}(:[0-9A-Fa-f]{2}){5}$`)

// normalizeNet turns both forms clients send (`virtio=MAC,bridge=...`,
// `virtio,bridge=...` and `model=virtio,macaddr=MAC,bridge=...`) into
// PVE's stored form `MODEL=MAC,bridge=...`, assigning mac when none is
// given.
func normalizeNet(key, v, mac string) (string, error) {
	model, rest := "", []string{}
	for _, p := range strings.Split(v, ",") {
		k, val, hasVal := strings.Cut(p, "=")
		switch {
		case p == "":
		case slices.Contains(netModels, k):
			model = k
			if hasVal && val != "" {
				mac = val
			}
		case k == "model":
			model = val
		case k == "macaddr":
			if val != "" {
				mac = val
			}
		default:
			rest = append(rest, p)
		}
	}
	if model == "" || !slices.Contains(netModels, model) {
		return "", ParamError(key, "invalid format - format error: model: value is not one of "+strings.Join(netModels, ", "))
	}
	if !macRe.MatchString(mac) {
		return "", ParamError(key, "invalid format - invalid MAC address "+mac)
	}
	return strings.Join(append([]string{model + "=" + strings.ToUpper(mac)}, rest...), ","), nil
}

// disk is a parsed disk parameter.
type disk struct {
	storage string
	newMiB  int64 // size of a new volume; 0 for an existing one
	opts    []string
	cdrom   bool
}

// parseDisk reads a disk parameter: `STORAGE:GiB[,opts]`,
// `file=STORAGE:GiB,size=BYTES,...` (bpg), `STORAGE:vm-100-disk-0,...`
// (an existing volume), or a CD-ROM (`...,media=cdrom`).
func parseDisk(key, v string) (disk, error) {
	var d disk
	var file, size string
	for i, p := range strings.Split(v, ",") {
		k, val, hasVal := strings.Cut(p, "=")
		switch {
		case i == 0 && !hasVal:
			file = p
		case k == "file":
			file = val
		case k == "size":
			size = val
		case k == "import-from":
			return d, ParamError(key, "import-from is not supported by Corral: create a blank disk")
		default:
			if p == "media=cdrom" {
				d.cdrom = true
			}
			d.opts = append(d.opts, p)
		}
	}
	if d.cdrom {
		d.opts = append([]string{file}, d.opts...)
		return d, nil
	}
	st, vol, ok := strings.Cut(file, ":")
	if !ok || st == "" {
		return d, ParamError(key, "invalid format - unable to parse volume ID '"+file+"'")
	}
	d.storage = st
	if gib, err := strconv.ParseFloat(vol, 64); err == nil {
		d.newMiB = int64(gib * 1024)
		if size != "" {
			n, err := parseSize(size)
			if err != nil {
				return d, ParamError(key, "invalid format - size: "+err.Error())
			}
			d.newMiB = n
		}
		if d.newMiB < 1 {
			d.newMiB = 1
		}
		return d, nil
	}
	d.opts = append([]string{file}, d.opts...) // an existing volume: kept as is
	return d, nil
}

// parseSize reads a PVE size: bytes without a unit, or K/M/G/T; it
// returns MiB, rounded up.
func parseSize(s string) (int64, error) {
	mult := int64(1)
	switch strings.ToUpper(s[len(s)-1:]) {
	case "K":
		mult = 1 << 10
	case "M":
		mult = 1 << 20
	case "G":
		mult = 1 << 30
	case "T":
		mult = 1 << 40
	}
	num := s
	if mult != 1 {
		num = s[:len(s)-1]
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || f < 0 {
		return 0, fmt.Errorf("value %q is not a size", s)
	}
	b := int64(f * float64(mult))
	return (b + int64(backends.MiB) - 1) / int64(backends.MiB), nil
}
