package pve

import (
	"context"
	"fmt"
	"hash/crc32"
	"strconv"
	"strings"
	"time"

	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/store"
)

// UPID returns the UPID of an operation:
// UPID:NODE:PID:PSTART:STARTTIME:TYPE:ID:USER: with PID the random part
// of the task id and STARTTIME its time, so the UPID alone names the
// task, also after a restart.
func (s *Service) UPID(op Op) string {
	t := op.Task
	start := t.CreatedAt
	pid := crc32.ChecksumIEEE([]byte(t.ID))
	if ts, rnd, ok := strings.Cut(t.ID, "-"); ok && len(rnd) == 8 {
		if at, err := time.Parse("20060102T150405", ts); err == nil {
			if n, err := strconv.ParseUint(rnd, 16, 32); err == nil {
				start, pid = at, uint32(n)
			}
		}
	}
	upid := fmt.Sprintf("UPID:%s:%08X:%08X:%08X:%s:%d:%s:", op.Node, pid, crc32.ChecksumIEEE([]byte("pstart"+t.ID)),
		start.Unix(), op.Type, op.VMID, op.User)
	if s.taskID(upid) != t.ID {
		s.upids.Store(upid, t.ID)
	}
	return upid
}

// upidFields are the parts of a UPID.
type upidFields struct {
	node, typ, id, user  string
	pid, pstart, started uint64
}

func parseUPID(upid string) (upidFields, bool) {
	p := strings.Split(upid, ":")
	if len(p) != 9 || p[0] != "UPID" {
		return upidFields{}, false
	}
	var f upidFields
	var err1, err2, err3 error
	f.pid, err1 = strconv.ParseUint(p[2], 16, 32)
	f.pstart, err2 = strconv.ParseUint(p[3], 16, 32)
	f.started, err3 = strconv.ParseUint(p[4], 16, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return upidFields{}, false
	}
	f.node, f.typ, f.id, f.user = p[1], p[5], p[6], p[7]
	return f, true
}

func (s *Service) taskID(upid string) string {
	if v, ok := s.upids.Load(upid); ok {
		return v.(string)
	}
	f, ok := parseUPID(upid)
	if !ok {
		return ""
	}
	return time.Unix(int64(f.started), 0).UTC().Format("20060102T150405") + fmt.Sprintf("-%08x", f.pid)
}

// TaskStatus answers GET /nodes/{node}/tasks/{upid}/status: exitstatus
// and endtime only once the task has finished.
func (s *Service) TaskStatus(ctx context.Context, node, upid string) (map[string]any, error) {
	f, t, _, err := s.task(ctx, node, upid, false)
	if err != nil {
		return nil, err
	}
	out := map[string]any{"upid": upid, "node": f.node, "pid": f.pid, "pstart": f.pstart, "starttime": f.started,
		"type": f.typ, "id": f.id, "user": f.user, "status": "running"}
	if t.Status != store.TaskRunning {
		out["status"] = "stopped"
		out["exitstatus"] = exitStatus(t)
		out["endtime"] = max(t.FinishedAt.Unix(), int64(f.started))
	}
	return out, nil
}

func exitStatus(t store.Task) string {
	switch t.Status {
	case store.TaskDone:
		return "OK"
	case store.TaskInterrupted:
		return "interrupted: the server stopped while the task ran"
	}
	if t.Error == "" {
		return "unexpected status"
	}
	return t.Error
}

// TaskLog answers GET .../tasks/{upid}/log: lines numbered from 1, from
// start, at most limit (default 50), with PVE's closing "TASK OK" or
// "TASK ERROR: ..." once finished.
func (s *Service) TaskLog(ctx context.Context, node, upid string, start, limit int) ([]map[string]any, int, error) {
	_, t, lines, err := s.task(ctx, node, upid, true)
	if err != nil {
		return nil, 0, err
	}
	text := make([]string, 0, len(lines)+1)
	for _, l := range lines {
		text = append(text, l.Line)
	}
	if t.Status == store.TaskDone {
		text = append(text, "TASK OK")
	} else if t.Status != store.TaskRunning {
		text = append(text, "TASK ERROR: "+exitStatus(t))
	}
	if limit <= 0 {
		limit = 50
	}
	out := []map[string]any{}
	for i := start; i < len(text) && len(out) < limit; i++ {
		out = append(out, map[string]any{"n": i + 1, "t": text[i]})
	}
	return out, len(text), nil
}

func (s *Service) task(ctx context.Context, node, upid string, withLog bool) (upidFields, store.Task, []store.LogLine, error) {
	f, ok := parseUPID(upid)
	if !ok {
		return f, store.Task{}, nil, ParamError("upid", "unable to parse worker upid '"+upid+"'")
	}
	gone := &Error{Status: 500, Msg: "no such task '" + upid + "'"}
	if f.node != node {
		return f, store.Task{}, nil, gone
	}
	t, lines, err := s.Tasks.Get(ctx, s.taskID(upid))
	if err != nil {
		if backends.KindOf(err) == backends.ErrNotFound {
			return f, store.Task{}, nil, gone
		}
		return f, store.Task{}, nil, err
	}
	return f, t, lines, nil
}

// taskTypes maps Corral's task actions onto PVE's task types, for the
// task list.
var taskTypes = map[string]string{"create": "qmcreate", "start": "qmstart", "stop": "qmstop", "shutdown": "qmshutdown",
	"restart": "qmreboot", "pause": "qmsuspend", "resume": "qmresume", "delete": "qmdestroy", "clone": "qmclone",
	"snapshot": "qmsnapshot", "revert snapshot": "qmrollback", "delete snapshot": "qmdelsnapshot", "pve config": "qmconfig",
	"pve resize": "qmresize", "export": "vzdump"}

// NodeTasks lists the recent tasks on node (GET /nodes/{node}/tasks), newest
// first, from every surface.
func (s *Service) NodeTasks(ctx context.Context, node string, limit int) ([]map[string]any, error) {
	x, err := s.view(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := x.node(node); err != nil {
		return nil, err
	}
	if limit <= 0 {
		limit = 50
	}
	recent, err := s.Tasks.Recent(ctx, 500)
	if err != nil {
		return nil, err
	}
	ids, err := s.Store.VMIDs(ctx)
	if err != nil {
		return nil, err
	}
	out := []map[string]any{}
	for _, t := range recent {
		target, _, _ := strings.Cut(t.Target, "@")
		ref, err := backends.ParseRef(target)
		if err != nil || NodeName(ref.ContextKey()) != node {
			continue
		}
		typ := taskTypes[t.Action]
		if typ == "" {
			typ = "corral"
		}
		upid := s.UPID(Op{Task: t, Node: node, Type: typ, VMID: ids[target], User: t.Actor})
		f, _ := parseUPID(upid)
		e := map[string]any{"upid": upid, "node": node, "pid": f.pid, "pstart": f.pstart, "starttime": f.started,
			"type": typ, "id": strconv.FormatInt(ids[target], 10), "user": t.Actor}
		if t.Status != store.TaskRunning {
			e["status"] = exitStatus(t)
			e["endtime"] = t.FinishedAt.Unix()
		}
		out = append(out, e)
		if len(out) == limit {
			break
		}
	}
	return out, nil
}
