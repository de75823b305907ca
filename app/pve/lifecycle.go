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

// Update changes a guest's configuration (PUT and POST .../config) as a
// task and waits for it. CPUs and memory go to the backend (a Scaler);
// the rest is kept in Corral's store. A digest that does not match the
// current configuration is refused like PVE does.
func (s *Service) Update(ctx context.Context, c Caller, node string, vmid int64, p Params) (Op, error) {
	g, err := s.Guest(ctx, node, vmid)
	if err != nil {
		return Op{}, err
	}
	ref := g.In.Ref
	spec := tasks.Spec{Action: "pve config", Target: ref.String(), Origin: c.origin()}
	if d := p["digest"]; d != "" && d != g.Digest() {
		return Op{}, s.Tasks.Refused(ctx, spec, &Error{Status: 500, Msg: "detected modified configuration - file changed by other user? Try again."})
	}
	if n := p["name"]; n != "" && n != ref.Name {
		return Op{}, s.Tasks.Refused(ctx, spec, ParamError("name", "renaming is not supported by Corral: clone the guest under the new name"))
	}
	conf := Conf{}
	for k, v := range g.Conf {
		conf[k] = v
	}
	if g.Conf == nil { // a guest created elsewhere: start from what GET shows
		for _, kv := range g.lines() {
			if !slices.Contains(derivedKeys, kv[0]) {
				conf[kv[0]] = kv[1]
			}
		}
	}
	old := Conf{}
	for k, v := range conf {
		old[k] = v
	}
	for _, k := range strings.FieldsFunc(p["delete"], func(r rune) bool { return r == ',' || r == ';' || r == ' ' }) {
		if slices.Contains(derivedKeys, k) {
			return Op{}, s.Tasks.Refused(ctx, spec, ParamError("delete", "deleting '"+k+"' is not supported: the backend keeps it"))
		}
		delete(conf, k)
	}
	if _, err := applyConf(conf, p, ref.String(), old); err != nil {
		return Op{}, s.Tasks.Refused(ctx, spec, err)
	}
	conf.setVMID(vmid)
	_, hasCores := p["cores"]
	_, hasVCPUs := p["vcpus"]
	_, hasMem := p["memory"]
	cpus, mem := g.In.CPUs, g.In.MemoryMiB
	if hasCores || hasVCPUs || hasMem {
		var err error
		if cpus, mem, err = sizing(p, conf, g.In.CPUs, g.In.MemoryMiB); err != nil {
			return Op{}, s.Tasks.Refused(ctx, spec, err)
		}
	}
	scale := cpus != g.In.CPUs || mem != g.In.MemoryMiB
	b, err := s.Fleet.Backend(ref)
	if err != nil {
		return Op{}, s.Tasks.Refused(ctx, spec, err)
	}
	var sc backends.Scaler
	if scale {
		if sc, err = backends.As[backends.Scaler](b, "changing CPUs or memory"); err != nil {
			return Op{}, s.Tasks.Refused(ctx, spec, err)
		}
	}
	t, err := s.Tasks.Do(ctx, spec, func(ctx context.Context, r *tasks.Run) error {
		if scale {
			r.Logf("scale %s to %d CPU, %d MiB", ref, cpus, mem)
			cctx, cancel := s.Fleet.CallContext(ctx)
			defer cancel()
			if err := sc.Scale(cctx, ref, cpus, mem); err != nil {
				return err
			}
		}
		if err := s.Store.SetPVEGuestConfig(ctx, ref.String(), conf.text()); err != nil {
			return err
		}
		r.Logf("update VM %d: %s", vmid, changed(old, conf))
		return nil
	})
	if scale {
		s.Fleet.RefreshContext(context.WithoutCancel(ctx), ref.ContextKey())
	}
	return Op{Task: t, Node: node, Type: "qmconfig", VMID: vmid, User: c.PVEUser}, err
}

// changed names the keys that differ between a and b.
func changed(a, b Conf) string {
	var keys []string
	for k, v := range b {
		if a[k] != v {
			keys = append(keys, "-"+k+" "+v)
		}
	}
	for k := range a {
		if _, ok := b[k]; !ok {
			keys = append(keys, "-delete "+k)
		}
	}
	slices.Sort(keys)
	if len(keys) == 0 {
		return "no change"
	}
	return strings.Join(keys, " ")
}

// powerActions maps PVE's status/* verbs onto Corral's actions and task
// types.
var powerActions = map[string]struct {
	action backends.Action
	typ    string
}{
	"start":    {backends.ActionStart, "qmstart"},
	"stop":     {backends.ActionStop, "qmstop"},
	"shutdown": {backends.ActionShutdown, "qmshutdown"},
	"reboot":   {backends.ActionRestart, "qmreboot"},
	"reset":    {backends.ActionRestart, "qmreset"},
	"suspend":  {backends.ActionPause, "qmsuspend"},
	"resume":   {backends.ActionResume, "qmresume"},
}

// Power performs status/VERB on a guest as a task and waits for it. A
// task that ran and failed is an Op with a failed task (its UPID's
// exitstatus carries the error), as in PVE.
func (s *Service) Power(ctx context.Context, c Caller, node string, vmid int64, verb string, p Params) (Op, error) {
	return s.power(ctx, c, node, vmid, verb, p, "qemu")
}

// PowerCT performs status/VERB on an lxc guest (a CT) like Power; its
// task types are PVE's vz* ones.
func (s *Service) PowerCT(ctx context.Context, c Caller, node string, vmid int64, verb string, p Params) (Op, error) {
	return s.power(ctx, c, node, vmid, verb, p, "lxc")
}

func (s *Service) power(ctx context.Context, c Caller, node string, vmid int64, verb string, p Params, typ string) (Op, error) {
	pa, ok := powerActions[verb]
	if !ok || typ == "lxc" && verb == "reset" {
		return Op{}, &Error{Status: 501, Msg: "Method 'POST /nodes/" + node + "/" + typ + "/" + strconv.FormatInt(vmid, 10) + "/status/" + verb + "' not implemented"}
	}
	g, err := s.guestOf(ctx, node, vmid, typ)
	if err != nil {
		return Op{}, err
	}
	if typ == "lxc" {
		pa.typ = "vz" + strings.TrimPrefix(pa.typ, "qm")
	}
	if verb == "start" && g.Conf["template"] == "1" {
		return Op{}, &Error{Status: 500, Msg: "you can't start a vm if it's a template"}
	}
	action := pa.action
	if verb == "shutdown" && p.Bool("forceStop") && g.In.State == backends.StatePaused {
		action = backends.ActionStop
	}
	t, err := s.Instances.Power(ctx, c.origin(), g.In.Ref.String(), string(action))
	if err != nil && t.ID == "" {
		return Op{}, err
	}
	return Op{Task: t, Node: node, Type: pa.typ, VMID: vmid, User: c.PVEUser}, nil
}

// Delete removes a guest, its registry entry and its stored
// configuration, as a task.
func (s *Service) Delete(ctx context.Context, c Caller, node string, vmid int64) (Op, error) {
	g, err := s.Guest(ctx, node, vmid)
	if err != nil {
		return Op{}, err
	}
	if g.Conf["protection"] == "1" {
		return Op{}, &Error{Status: 500, Msg: "can't remove VM " + strconv.FormatInt(vmid, 10) + " - protection mode enabled"}
	}
	t, err := s.Instances.Delete(ctx, c.origin(), g.In.Ref.String())
	if err != nil && t.ID == "" {
		return Op{}, err
	}
	if err == nil {
		if e := s.Store.DeletePVEGuest(ctx, g.In.Ref.String()); e != nil {
			s.Log.Error("pve: stored configuration left behind", "ref", g.In.Ref.String(), "err", e)
		}
	}
	return Op{Task: t, Node: node, Type: "qmdestroy", VMID: vmid, User: c.PVEUser}, nil
}

// Clone copies a guest to newid (name from "name", default
// "copy-of-NAME") in a background task; the copy's cards get new MACs.
func (s *Service) Clone(ctx context.Context, c Caller, node string, vmid int64, p Params) (Op, error) {
	g, err := s.Guest(ctx, node, vmid)
	if err != nil {
		return Op{}, err
	}
	newid, err := p.Int("newid", 0)
	if err != nil {
		return Op{}, err
	}
	if newid == 0 {
		return Op{}, ParamError("newid", "property is missing and it is not optional")
	}
	if t := p["target"]; t != "" && t != node {
		return Op{}, ParamError("target", "cloning to another node is not supported by Corral: move the clone afterwards")
	}
	if _, err := s.NextID(ctx, newid); err != nil {
		return Op{}, err
	}
	name := p["name"]
	if name == "" {
		name = "copy-of-" + g.In.Ref.Name
	}
	if err := backends.ValidateName("clone", name); err != nil {
		return Op{}, ParamError("name", backends.SafeMessage(err))
	}
	dst := g.In.Ref
	dst.Name = name
	if err := s.Store.ReserveVMID(ctx, dst.String(), newid); err != nil {
		if errors.Is(err, store.ErrExists) {
			return Op{}, ParamError("newid", fmt.Sprintf("VM %d already exists", newid))
		}
		return Op{}, err
	}
	conf := Conf{}
	for k, v := range g.Conf {
		switch {
		case netKey.MatchString(k):
			n, _ := strconv.Atoi(strings.TrimPrefix(k, "net"))
			model, rest, _ := strings.Cut(v, ",")
			m, _, _ := strings.Cut(model, "=")
			conf[k] = m + "=" + MAC(dst.String(), n) + "," + rest
		case diskKey.MatchString(k):
			conf[k] = strings.ReplaceAll(v, "vm-"+strconv.FormatInt(vmid, 10)+"-", "vm-"+strconv.FormatInt(newid, 10)+"-")
		case k != "template":
			conf[k] = v
		}
	}
	if d := p["description"]; d != "" {
		conf["description"] = d
	}
	if err := s.Store.SetPVEGuestConfig(ctx, dst.String(), conf.text()); err != nil {
		return Op{}, err
	}
	t, _, err := s.Instances.Clone(ctx, c.origin(), g.In.Ref.String(), name)
	if err != nil {
		_ = s.Store.DeletePVEGuest(ctx, dst.String())
		_ = s.Store.DeleteInstance(ctx, dst.String())
		return Op{}, err
	}
	return Op{Task: t, Node: node, Type: "qmclone", VMID: vmid, User: c.PVEUser}, nil
}

// Resize grows a guest's disk. Corral's backends cannot resize a disk,
// so only a size equal to the current one (a no-op) succeeds; anything
// else is refused with the reason.
func (s *Service) Resize(ctx context.Context, c Caller, node string, vmid int64, p Params) (Op, error) {
	g, err := s.Guest(ctx, node, vmid)
	if err != nil {
		return Op{}, err
	}
	spec := tasks.Spec{Action: "pve resize", Target: g.In.Ref.String(), Origin: c.origin()}
	size := strings.TrimPrefix(p["size"], "+")
	if p["disk"] == "" || size == "" {
		return Op{}, s.Tasks.Refused(ctx, spec, ParamError("size", "property is missing and it is not optional"))
	}
	mib, err := parseSize(size)
	if err != nil {
		return Op{}, s.Tasks.Refused(ctx, spec, ParamError("size", err.Error()))
	}
	if strings.HasPrefix(p["size"], "+") {
		mib += g.In.DiskMiB
	}
	if mib < g.In.DiskMiB {
		return Op{}, s.Tasks.Refused(ctx, spec, &Error{Status: 500, Msg: "shrinking disks is not supported"})
	}
	if mib != g.In.DiskMiB {
		return Op{}, s.Tasks.Refused(ctx, spec, backends.Refuse(g.In.Ref.Backend, "resizing a disk", "create a guest with the size you need, or clone and move it"))
	}
	t, err := s.Tasks.Do(ctx, spec, func(ctx context.Context, r *tasks.Run) error {
		r.Logf("disk %s of VM %d is already %d MiB", p["disk"], vmid, mib)
		return nil
	})
	return Op{Task: t, Node: node, Type: "qmresize", VMID: vmid, User: c.PVEUser}, err
}

// Template marks a guest as a template: Corral keeps the mark, refuses
// to start it, and the API shows template=1. On a backend that keeps the
// mark itself (backends.Templater: KubeVirt's label) the backend's mark is
// set first, so the dashboard, REST and kubectl agree with this API.
func (s *Service) Template(ctx context.Context, c Caller, node string, vmid int64) (Op, error) {
	g, err := s.Guest(ctx, node, vmid)
	if err != nil {
		return Op{}, err
	}
	if b, err := s.Fleet.Backend(g.In.Ref); err == nil && backends.Supports[backends.Templater](b) && !g.In.Template {
		if _, err := s.Instances.SetTemplate(ctx, c.origin(), g.In.Ref.String(), true); err != nil {
			return Op{}, err
		}
	}
	p := Params{"template": "1"}
	op, err := s.Update(ctx, c, node, vmid, p)
	op.Type = "qmtemplate"
	return op, err
}

// Snapshot creates (name set, action SnapshotCreate), rolls back or
// deletes a snapshot, as a task.
func (s *Service) Snapshot(ctx context.Context, c Caller, node string, vmid int64, action instances.SnapshotAction, name string) (Op, error) {
	g, err := s.Guest(ctx, node, vmid)
	if err != nil {
		return Op{}, err
	}
	typ := map[instances.SnapshotAction]string{instances.SnapshotCreate: "qmsnapshot", instances.SnapshotRevert: "qmrollback", instances.SnapshotDelete: "qmdelsnapshot"}[action]
	t, err := s.Instances.Snapshot(ctx, c.origin(), g.In.Ref.String(), action, name)
	if err != nil && t.ID == "" {
		return Op{}, err
	}
	return Op{Task: t, Node: node, Type: typ, VMID: vmid, User: c.PVEUser}, nil
}

// Snapshots lists a guest's snapshots with PVE's "current" entry last.
func (s *Service) Snapshots(ctx context.Context, node string, vmid int64) ([]map[string]any, error) {
	g, err := s.Guest(ctx, node, vmid)
	if err != nil {
		return nil, err
	}
	out := []map[string]any{}
	list, err := s.Instances.Snapshots(ctx, g.In.Ref.String())
	if err != nil && !errors.Is(err, backends.ErrUnsupported) {
		return nil, err
	}
	parent := ""
	for _, sn := range list {
		e := map[string]any{"name": sn.Name, "snaptime": sn.Created.Unix(), "description": snapshotDescription(sn)}
		if parent != "" {
			e["parent"] = parent
		}
		out = append(out, e)
		parent = sn.Name
	}
	cur := map[string]any{"name": "current", "description": "You are here!", "digest": g.Digest()}
	if g.In.State == backends.StateRunning {
		cur["running"] = 1
	}
	if parent != "" {
		cur["parent"] = parent
	}
	return append(out, cur), nil
}

// snapshotDescription is a snapshot's description with a last line
// "corral-consistency: CONSISTENCY": PVE has no field for it, and this
// is the line Corral's proxmox backend writes on a real PVE and reads
// back (backends/proxmox), so a Corral behind another Corral keeps it.
func snapshotDescription(sn backends.Snapshot) string {
	line := "corral-consistency: " + string(sn.Consistency)
	if sn.Description == "" {
		return line
	}
	return sn.Description + "\n" + line
}
