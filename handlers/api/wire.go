package api

import (
	"strings"
	"time"

	"github.com/corral-dev/corral/app/fleet"
	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/store"
)

// vmJSON is an instance on the wire. The first fields keep the shape of
// spec/api.md; ref, backend, context and peer add the canonical identity.
type vmJSON struct {
	Name      string   `json:"name"`
	Namespace string   `json:"namespace"`
	Status    string   `json:"status"`
	Ready     bool     `json:"ready"`
	Running   bool     `json:"running"`
	CPU       int      `json:"cpu"`
	Mem       string   `json:"mem"`
	Disk      string   `json:"disk"`
	IP        string   `json:"ip"`
	Node      string   `json:"node"`
	Ref       string   `json:"ref"`
	Peer      string   `json:"peer,omitempty"`
	Backend   string   `json:"backend"`
	Context   string   `json:"context"`
	Type      string   `json:"type"`
	State     string   `json:"state"`
	Tags      []string `json:"tags"`
	MemMiB    int64    `json:"memMiB"`
	DiskMiB   int64    `json:"diskMiB"`
	Template  bool     `json:"isTemplate"`
}

func toVM(in backends.Instance) vmJSON {
	tags := in.Tags
	if tags == nil {
		tags = []string{}
	}
	st := string(in.State)
	return vmJSON{
		Name: in.Ref.Name, Namespace: in.Ref.Namespace,
		Status:  strings.ToUpper(st[:1]) + st[1:],
		Ready:   in.State == backends.StateRunning && in.IP != "",
		Running: in.State == backends.StateRunning,
		CPU:     in.CPUs, Mem: backends.FormatMiB(in.MemoryMiB, 0), Disk: backends.FormatMiB(in.DiskMiB, 0),
		IP: in.IP, Node: in.Node,
		Ref: in.Ref.String(), Peer: in.Ref.Peer, Backend: string(in.Ref.Backend), Context: in.Ref.Context,
		Type: string(in.Type), State: st, Tags: tags, MemMiB: in.MemoryMiB, DiskMiB: in.DiskMiB,
		Template: in.Template,
	}
}

type contextJSON struct {
	Key         string     `json:"key"`
	Peer        string     `json:"peer,omitempty"`
	Backend     string     `json:"backend"`
	Name        string     `json:"name"`
	Health      string     `json:"health"`
	Error       string     `json:"error,omitempty"`
	Count       int        `json:"count"`
	Running     int        `json:"running"`
	RefreshedAt *time.Time `json:"refreshedAt,omitempty"`
	TookMs      int64      `json:"tookMs"`
}

func toContext(c fleet.ContextStatus) contextJSON {
	out := contextJSON{Key: c.Key, Peer: c.Peer, Backend: string(c.Backend), Name: c.Name, Health: string(c.Health),
		Error: c.Error, Count: c.Count, Running: c.Running, TookMs: c.Took.Milliseconds()}
	if !c.RefreshedAt.IsZero() {
		t := c.RefreshedAt.UTC()
		out.RefreshedAt = &t
	}
	return out
}

// taskJSON is a task on the wire: status is running, done, error or
// interrupted; log is its lines joined by newlines, as spec/api.md shows.
type taskJSON struct {
	ID         string     `json:"id"`
	Action     string     `json:"action"`
	Target     string     `json:"target"`
	Actor      string     `json:"actor"`
	Surface    string     `json:"surface"`
	Status     string     `json:"status"`
	Progress   int        `json:"progress"`
	Error      string     `json:"error"`
	Log        string     `json:"log"`
	CreatedAt  time.Time  `json:"createdAt"`
	FinishedAt *time.Time `json:"finishedAt,omitempty"`
}

func toTask(t store.Task, lines []store.LogLine) taskJSON {
	var b strings.Builder
	for _, l := range lines {
		b.WriteString(l.Line)
		b.WriteByte('\n')
	}
	out := taskJSON{ID: t.ID, Action: t.Action, Target: t.Target, Actor: t.Actor, Surface: t.Surface, Status: string(t.Status),
		Progress: t.Progress, Error: t.Error, Log: b.String(), CreatedAt: t.CreatedAt.UTC()}
	if !t.FinishedAt.IsZero() {
		f := t.FinishedAt.UTC()
		out.FinishedAt = &f
	}
	return out
}

type auditJSON struct {
	ID      int64     `json:"id"`
	At      time.Time `json:"at"`
	Actor   string    `json:"actor"`
	Surface string    `json:"surface"`
	Action  string    `json:"action"`
	Target  string    `json:"target"`
	Outcome string    `json:"outcome"`
	Detail  string    `json:"detail"`
	Hash    string    `json:"hash"`
}
