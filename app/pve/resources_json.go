package pve

import (
	"encoding/json"
	"strconv"
)

// Resources is the /cluster/resources list. It encodes itself: the
// reflective encoder is most of the cost of a 10,000-guest answer.
type Resources []Resource

// MarshalJSON encodes the list with the fields and types of Resource's
// struct tags.
func (rs Resources) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, 256*len(rs)+2)
	b = append(b, '[')
	for i := range rs {
		if i > 0 {
			b = append(b, ',')
		}
		b = rs[i].appendJSON(b)
	}
	return append(b, ']'), nil
}

func appendStr(b []byte, key, v string) []byte {
	b = append(b, ',', '"')
	b = append(b, key...)
	b = append(b, '"', ':')
	return strconv.AppendQuote(b, v) // names and tags are ASCII-safe here; Quote escapes the rest
}

func appendInt(b []byte, key string, v int64) []byte {
	b = append(b, ',', '"')
	b = append(b, key...)
	b = append(b, '"', ':')
	return strconv.AppendInt(b, v, 10)
}

func (r *Resource) appendJSON(b []byte) []byte {
	b = append(b, `{"id":`...)
	b = strconv.AppendQuote(b, r.ID)
	b = appendStr(b, "type", r.Type)
	if r.omitSizes {
		return append(appendStr(b, "pool", r.Pool), '}')
	}
	if r.VMID != 0 {
		b = appendInt(b, "vmid", r.VMID)
	}
	b = appendStr(b, "node", r.Node)
	if r.Name != "" {
		b = appendStr(b, "name", r.Name)
	}
	b = appendStr(b, "status", r.Status)
	b = appendInt(b, "maxmem", r.MaxMem)
	b = appendInt(b, "mem", r.Mem)
	b = appendInt(b, "maxcpu", int64(r.MaxCPU))
	b = append(b, `,"cpu":`...)
	b = strconv.AppendFloat(b, r.CPU, 'f', -1, 64)
	b = appendInt(b, "maxdisk", r.MaxDisk)
	b = appendInt(b, "disk", r.Disk)
	b = appendInt(b, "diskread", r.DiskRead)
	b = appendInt(b, "diskwrite", r.DiskWrite)
	b = appendInt(b, "netin", r.NetIn)
	b = appendInt(b, "netout", r.NetOut)
	b = appendInt(b, "uptime", r.Uptime)
	b = appendInt(b, "template", int64(r.Template))
	for _, kv := range [][2]string{{"tags", r.Tags}, {"pool", r.Pool}, {"hastate", r.HAState}, {"storage", r.Storage}, {"level", r.Level}, {"content", r.Content}, {"plugintype", r.PluginTyp}} {
		if kv[1] != "" {
			b = appendStr(b, kv[0], kv[1])
		}
	}
	if r.Shared != nil {
		b = appendInt(b, "shared", int64(*r.Shared))
	}
	return append(b, '}')
}

var _ json.Marshaler = Resources(nil)
