package pve

import (
	"crypto/sha1"
	"encoding/hex"
	"strconv"
	"strings"
)

// CTs (backends that run containers: KubeVirt's pet pods, the sim) are
// PVE's lxc guests. Corral keeps no PVE configuration for them: what
// GET .../lxc/{vmid}/config shows is derived from the instance, so it is
// read-only, like the sizes of a qemu guest.

// CTStatus answers GET .../lxc/{vmid}/status/current.
func (s *Service) CTStatus(g Guest) map[string]any {
	in := g.In
	m := map[string]any{"vmid": g.VMID, "name": in.Ref.Name, "type": "lxc", "status": pveStatus(in.State), "cpus": in.CPUs,
		"maxmem": in.MemoryMiB * mib, "mem": 0, "maxswap": 0, "swap": 0, "maxdisk": in.DiskMiB * mib, "disk": 0, "cpu": 0,
		"uptime": s.uptime(in), "netin": 0, "netout": 0, "diskread": 0, "diskwrite": 0, "ha": map[string]any{"managed": 0}}
	if pveStatus(in.State) == "running" {
		m["mem"] = in.MemoryMiB * mib
	}
	if len(in.Tags) > 0 {
		m["tags"] = strings.Join(in.Tags, ";")
	}
	return m
}

// CTConfig answers GET .../lxc/{vmid}/config: PVE's keys and types for a
// container (memory and swap are numbers here, unlike qemu's memory),
// with a digest of the derived text.
func (s *Service) CTConfig(g Guest) map[string]any {
	in := g.In
	unpriv := 1
	for _, f := range in.Facts {
		if strings.EqualFold(f.Label, "privileged") && f.Value == "true" {
			unpriv = 0
		}
	}
	net := "name=eth0,bridge=vmbr0,hwaddr=" + MAC(in.Ref.String(), 0) + ",type=veth"
	if in.IP != "" {
		net += ",ip=" + in.IP + "/32"
	} else {
		net += ",ip=dhcp"
	}
	out := map[string]any{
		"arch": "amd64", "hostname": in.Ref.Name, "cores": max(in.CPUs, 1), "memory": in.MemoryMiB, "swap": 0,
		"ostype": "unmanaged", "unprivileged": unpriv, "net0": net,
		"rootfs": "local:vm-" + strconv.FormatInt(g.VMID, 10) + "-disk-0,size=" + sizeText(in.DiskMiB),
	}
	if len(in.Tags) > 0 {
		out["tags"] = strings.Join(in.Tags, ";")
	}
	var sum strings.Builder
	for _, k := range []string{"arch", "cores", "hostname", "memory", "net0", "ostype", "rootfs", "swap", "tags", "unprivileged"} {
		if v, ok := out[k]; ok {
			sum.WriteString(k + ": " + toText(v) + "\n")
		}
	}
	h := sha1.Sum([]byte(sum.String()))
	out["digest"] = hex.EncodeToString(h[:])
	return out
}

func toText(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case int:
		return strconv.Itoa(v)
	case int64:
		return strconv.FormatInt(v, 10)
	}
	return ""
}

// sizeText writes MiB as PVE writes a volume size: in G when whole.
func sizeText(mibs int64) string {
	if mibs > 0 && mibs%1024 == 0 {
		return strconv.FormatInt(mibs/1024, 10) + "G"
	}
	return strconv.FormatInt(mibs, 10) + "M"
}
