package pve

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/corral-dev/corral/app/instances"
	"github.com/corral-dev/corral/app/tasks"
	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/store"
)

// Caller is who calls: the Corral login and the PVE user (with the
// token id for a token, "alice@pve!ci") that UPIDs name.
type Caller struct {
	Login   string
	PVEUser string
}

func (c Caller) origin() tasks.Origin { return tasks.Origin{Actor: c.Login, Surface: "pve"} }

// Params are the parameters of a call: form fields, JSON members
// (numbers and booleans as text) and the query, merged.
type Params map[string]string

// Int returns the integer parameter key, or def when absent.
func (p Params) Int(key string, def int64) (int64, error) {
	v, ok := p[key]
	if !ok || v == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, ParamError(key, "type check ('integer') failed - got '"+v+"'")
	}
	return n, nil
}

// Bool returns the boolean parameter key (1/0, true/false).
func (p Params) Bool(key string) bool {
	v := strings.ToLower(p[key])
	return v == "1" || v == "true" || v == "yes" || v == "on"
}

// Op is a started or finished operation: its task and what its UPID
// names.
type Op struct {
	Task store.Task
	Node string
	Type string // PVE task type: qmcreate, qmstart...
	VMID int64
	User string
}

// Create creates a guest on node from PVE parameters, as a background
// task; the vmid is the one the caller chose, kept by the registry.
func (s *Service) Create(ctx context.Context, c Caller, node string, p Params) (Op, error) {
	x, err := s.view(ctx)
	if err != nil {
		return Op{}, err
	}
	cs, err := x.node(node)
	if err != nil {
		return Op{}, err
	}
	vmid, err := p.Int("vmid", 0)
	if err != nil {
		return Op{}, err
	}
	if vmid < 100 || vmid > 999999999 {
		return Op{}, ParamError("vmid", "value must have a minimum value of 100")
	}
	if _, err := s.NextID(ctx, vmid); err != nil {
		return Op{}, err
	}
	name := p["name"]
	if name == "" {
		name = fmt.Sprintf("vm%d", vmid)
	}
	if err := backends.ValidateName("instance", name); err != nil {
		return Op{}, ParamError("name", backends.SafeMessage(err))
	}
	conf := Conf{}
	cpus, mem, err := sizing(p, conf, 1, 512)
	if err != nil {
		return Op{}, err
	}
	b, err := s.Fleet.Backend(backends.InstanceRef{Peer: cs.Peer, Backend: cs.Backend, Context: cs.Name})
	if err != nil {
		return Op{}, err
	}
	ref := backends.InstanceRef{Peer: cs.Peer, Backend: b.Kind(), Context: b.Context(), Name: name}
	diskMiB, err := applyConf(conf, p, ref.String(), nil)
	if err != nil {
		return Op{}, err
	}
	if diskMiB == 0 {
		diskMiB = 1 // every Corral instance has a disk; PVE's would have none
	}
	conf.setVMID(vmid)
	if err := s.Store.ReserveVMID(ctx, ref.String(), vmid); err != nil {
		if errors.Is(err, store.ErrExists) {
			return Op{}, ParamError("vmid", fmt.Sprintf("VM %d already exists", vmid))
		}
		return Op{}, err
	}
	if err := s.Store.SetPVEGuestConfig(ctx, ref.String(), conf.text()); err != nil {
		_ = s.Store.DeleteInstance(ctx, ref.String())
		return Op{}, err
	}
	var tags []string
	if t := p["tags"]; t != "" {
		tags = strings.FieldsFunc(t, func(r rune) bool { return r == ';' || r == ',' || r == ' ' })
	}
	t, _, err := s.Instances.Create(ctx, c.origin(), instances.CreateRequest{Context: cs.Key, Name: name, CPUs: cpus,
		Memory: strconv.FormatInt(mem, 10) + "Mi", Disk: strconv.FormatInt(diskMiB, 10) + "Mi", Tags: tags, Start: p.Bool("start")})
	if err != nil {
		_ = s.Store.DeletePVEGuest(ctx, ref.String())
		_ = s.Store.DeleteInstance(ctx, ref.String())
		return Op{}, err
	}
	return Op{Task: t, Node: node, Type: "qmcreate", VMID: vmid, User: c.PVEUser}, nil
}

// setVMID fills the vmid into the volume names of new disks.
func (c Conf) setVMID(vmid int64) {
	for k, v := range c {
		c[k] = strings.ReplaceAll(v, "{vmid}", strconv.FormatInt(vmid, 10))
	}
}

// sizing reads cores, sockets, vcpus and memory (MiB), with defaults.
func sizing(p Params, conf Conf, defCPUs int, defMiB int64) (int, int64, error) {
	cores, err := p.Int("cores", 0)
	if err != nil {
		return 0, 0, err
	}
	sockets, err := p.Int("sockets", 1)
	if err != nil {
		return 0, 0, err
	}
	cpus := defCPUs
	if cores > 0 {
		cpus = int(cores * max(sockets, 1))
	}
	if v, err := p.Int("vcpus", 0); err != nil {
		return 0, 0, err
	} else if v > 0 {
		cpus = int(v)
	}
	if sockets > 1 {
		conf["sockets"] = strconv.FormatInt(sockets, 10)
	}
	mem := defMiB
	if v := p["memory"]; v != "" {
		// PVE >= 8.1 also takes "current=2048"
		n, err := strconv.ParseInt(strings.TrimPrefix(v, "current="), 10, 64)
		if err != nil || n < 16 {
			return 0, 0, ParamError("memory", "type check ('integer') failed - got '"+v+"'")
		}
		mem = n
	}
	return cpus, mem, nil
}

// applyConf copies the configuration keys of p into conf: network cards
// normalized with a MAC, disks with their storage and options (the size
// of a new volume is returned, in MiB), everything else as given. old is
// the guest's current configuration on an update.
func applyConf(conf Conf, p Params, ref string, old Conf) (int64, error) {
	var diskMiB int64
	disks := 0
	for k := range conf {
		if diskKey.MatchString(k) && !strings.Contains(conf[k], "media=cdrom") {
			disks++
		}
	}
	keys := make([]string, 0, len(p))
	for k := range p {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		v := p[k]
		switch {
		case slices.Contains(callKeys, k) || slices.Contains(derivedKeys, k):
		case netKey.MatchString(k):
			n, _ := strconv.Atoi(strings.TrimPrefix(k, "net"))
			mac := MAC(ref, n)
			if prev, ok := old[k]; ok { // keep the card's address
				if _, m, ok := strings.Cut(strings.Split(prev, ",")[0], "="); ok {
					mac = m
				}
			}
			nv, err := normalizeNet(k, v, mac)
			if err != nil {
				return 0, err
			}
			conf[k] = nv
		case diskKey.MatchString(k):
			d, err := parseDisk(k, v)
			if err != nil {
				return 0, err
			}
			switch {
			case d.cdrom:
				conf[k] = strings.Join(d.opts, ",")
			case d.newMiB > 0:
				if old != nil {
					return 0, ParamError(k, "adding a disk is not supported by Corral: its instances have one disk")
				}
				if disks++; disks > 1 {
					return 0, ParamError(k, "Corral instances have one disk: remove all but one disk parameter")
				}
				diskMiB = d.newMiB
				conf[k] = withSize(strings.Join(append([]string{d.storage + ":vm-{vmid}-disk-0"}, d.opts...), ","), d.newMiB)
			default: // an existing volume re-sent: keep the stored size
				if _, ok := old[k]; !ok && old != nil {
					return 0, ParamError(k, "volume "+d.opts[0]+" does not exist")
				}
				conf[k] = strings.Join(d.opts, ",")
			}
		case boolKeys[k]:
			if p.Bool(k) {
				conf[k] = "1"
			} else {
				conf[k] = "0"
			}
		default:
			conf[k] = v
		}
	}
	return diskMiB, nil
}
