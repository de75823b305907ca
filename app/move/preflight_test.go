package move_test

import (
	"compress/gzip"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/corral-dev/corral/app/fleet"
	"github.com/corral-dev/corral/app/move"
	"github.com/corral-dev/corral/app/tasks"
	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/backends/sim"
	"github.com/corral-dev/corral/store"
)

// local is a sim context that behaves, for the move's logic only, like a
// backend keeping disk files on this host: it hands out a disk and imports
// one. Real disks are moved in move_engine_test.go.
type local struct {
	*sim.Backend
	firmware map[string]backends.Firmware
	uefi     bool                    // imports UEFI guests too
	importFn func(name string) error // injected after the instance is created
	imported []string
}

func (l *local) DiskSource(ctx context.Context, ref backends.InstanceRef) (backends.Disk, error) {
	in, err := l.Get(ctx, ref)
	if err != nil {
		return backends.Disk{}, err
	}
	fw := l.firmware[ref.Name]
	if fw == "" {
		fw = backends.FirmwareBIOS
	}
	return backends.Disk{Path: "/dev/null", Format: "raw", VirtualMiB: in.DiskMiB, Firmware: fw, InUse: in.State != backends.StateStopped}, nil
}

func (l *local) Import(ctx context.Context, spec backends.Spec, path, format string) (backends.Instance, error) {
	in, err := l.Create(ctx, spec)
	if err != nil {
		return in, err
	}
	l.imported = append(l.imported, spec.Name)
	if l.importFn != nil {
		if err := l.importFn(spec.Name); err != nil {
			return backends.Instance{}, err // the copy is left behind, as a careless backend would
		}
	}
	return in, nil
}

type uefiLocal struct{ *local }

func (u uefiLocal) ImportFirmwares() []backends.Firmware {
	return []backends.Firmware{backends.FirmwareBIOS, backends.FirmwareUEFI}
}

type env struct {
	svc        *move.Service
	tm         *tasks.Manager
	fleet      *fleet.Fleet
	a, b       *local
	plain      *sim.Backend
	scratchMiB int64
	st         *store.Store
}

func newEnv(t *testing.T, extra ...backends.Backend) *env {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "c.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	e := &env{
		a:          &local{Backend: sim.New(sim.Options{Context: "a"}), firmware: map[string]backends.Firmware{}},
		b:          &local{Backend: sim.New(sim.Options{Context: "b"}), firmware: map[string]backends.Firmware{}},
		plain:      sim.New(sim.Options{Context: "plain"}),
		scratchMiB: 1 << 20,
		st:         st,
	}
	e.fleet = fleet.New(fleet.Options{Timeout: time.Minute})
	for _, b := range append([]backends.Backend{e.a, e.b, e.plain}, extra...) {
		if err := e.fleet.Add(b); err != nil {
			t.Fatal(err)
		}
	}
	e.tm = tasks.New(st, tasks.Options{})
	t.Cleanup(e.tm.Close)
	e.svc = move.New(e.fleet, e.tm, move.Options{Registry: st, ShutdownTimeout: time.Second,
		FreeSpace: func(string) (int64, error) { return e.scratchMiB << 20, nil }})
	return e
}

func (e *env) create(t *testing.T, b backends.Backend, spec backends.Spec) {
	t.Helper()
	if _, err := b.Create(context.Background(), spec); err != nil {
		t.Fatal(err)
	}
	e.fleet.Refresh(context.Background())
}

func codes[T any](list []T, code func(T) string) []string {
	var out []string
	for _, x := range list {
		out = append(out, code(x))
	}
	slices.Sort(out)
	return out
}

func refusalCodes(p move.Preflight) []string {
	return codes(p.Refusals, func(r move.Refusal) string { return r.Code })
}

func warningCodes(p move.Preflight) []string {
	return codes(p.Warnings, func(w move.Warning) string { return w.Code })
}

func TestPreflight(t *testing.T) {
	e := newEnv(t)
	e.create(t, e.a, backends.Spec{Name: "web", DiskMiB: 100, Tags: []string{"prod"}})
	e.create(t, e.a, backends.Spec{Name: "ct1", Type: backends.TypeCT})
	e.create(t, e.a, backends.Spec{Name: "efi", DiskMiB: 100})
	e.a.firmware["efi"] = backends.FirmwareUEFI
	e.create(t, e.a, backends.Spec{Name: "live", Start: true})
	e.create(t, e.b, backends.Spec{Name: "taken"})
	e.create(t, e.plain, backends.Spec{Name: "plainvm"})
	if _, err := e.a.CreateSnapshot(context.Background(), backends.InstanceRef{Backend: backends.KindSim, Context: "a", Name: "web"}, "s1"); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		req      move.Request
		refusals []string
		warnings []string // a subset that must be there
	}{
		{"ok", move.Request{Ref: "sim/a/-/web", ToBackend: "sim", ToContext: "b"}, nil, []string{"new-mac", "snapshots"}},
		{"bare name", move.Request{Ref: "web", ToBackend: "sim", ToContext: "b", Name: "web2"}, nil, nil},
		{"same context", move.Request{Ref: "web", ToBackend: "sim", ToContext: "a"}, []string{"name-taken", "same-context"}, nil},
		{"no destination", move.Request{Ref: "web"}, []string{"no-destination"}, nil},
		{"unknown context", move.Request{Ref: "web", ToBackend: "incus"}, []string{"no-destination"}, nil},
		{"several contexts", move.Request{Ref: "web", ToBackend: "sim"}, []string{"no-destination"}, nil},
		{"destination cannot import", move.Request{Ref: "web", ToBackend: "sim", ToContext: "plain"}, []string{"dest-import"}, nil},
		{"source cannot export", move.Request{Ref: "plainvm", ToBackend: "sim", ToContext: "b"}, []string{"source-export"}, nil},
		{"container", move.Request{Ref: "ct1", ToBackend: "sim", ToContext: "b"}, []string{"container"}, nil},
		{"name taken", move.Request{Ref: "web", ToBackend: "sim", ToContext: "b", Name: "taken"}, []string{"name-taken"}, nil},
		{"invalid name", move.Request{Ref: "web", ToBackend: "sim", ToContext: "b", Name: "Bad_Name"}, []string{"name"}, nil},
		{"namespace", move.Request{Ref: "web", ToBackend: "sim", ToContext: "b", ToNamespace: "ns"}, []string{"name"}, nil},
		{"uefi to bios-only", move.Request{Ref: "efi", ToBackend: "sim", ToContext: "b"}, []string{"firmware"}, nil},
		{"running", move.Request{Ref: "live", ToBackend: "sim", ToContext: "b", DeleteSource: true}, nil, []string{"delete-source", "downtime"}},
		{"everything at once", move.Request{Ref: "ct1", ToBackend: "sim", ToContext: "plain", Name: "plainvm"}, []string{"container", "dest-import", "name-taken"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := e.svc.Preflight(context.Background(), tt.req)
			if err != nil {
				t.Fatalf("Preflight: %v", err)
			}
			if got := refusalCodes(p); !slices.Equal(got, tt.refusals) {
				t.Fatalf("refusals = %v (%+v), want %v", got, p.Refusals, tt.refusals)
			}
			for _, r := range p.Refusals {
				if r.Reason == "" {
					t.Fatalf("refusal %s has no reason", r.Code)
				}
			}
			got := warningCodes(p)
			for _, w := range tt.warnings {
				if !slices.Contains(got, w) {
					t.Fatalf("warnings = %v, want %s among them", got, w)
				}
			}
			if p.Refusals == nil || p.Warnings == nil || p.Plan.Steps == nil {
				t.Fatalf("lists must be empty, never null: %+v", p)
			}
		})
	}
	if p, _ := e.svc.Preflight(context.Background(), move.Request{Ref: "web", ToBackend: "sim", ToContext: "b"}); p.Plan.Destination != "sim/b/-/web" || p.Plan.Read != "disk-file" || !p.Plan.Convert || p.Plan.DiskMiB != 100 {
		t.Fatalf("plan = %+v, want web read from its raw file, converted, into sim/b/-/web", p.Plan)
	}
	for _, req := range []move.Request{{}, {Ref: "nosuch", ToBackend: "sim"}} {
		if _, err := e.svc.Preflight(context.Background(), req); !errors.Is(err, backends.ErrInvalid) && !errors.Is(err, backends.ErrNotFound) {
			t.Fatalf("Preflight(%+v) = %v, want Invalid or NotFound", req, err)
		}
	}
}

func TestPreflightUEFIDestination(t *testing.T) {
	u := uefiLocal{&local{Backend: sim.New(sim.Options{Context: "efi"})}}
	e := newEnv(t, u)
	e.create(t, e.a, backends.Spec{Name: "efi"})
	e.a.firmware["efi"] = backends.FirmwareUEFI
	p, err := e.svc.Preflight(context.Background(), move.Request{Ref: "efi", ToBackend: "sim", ToContext: "efi"})
	if err != nil || p.Refused() {
		t.Fatalf("UEFI onto a UEFI importer: %+v, %v; want no refusal", p.Refusals, err)
	}
}

// exporter is a sim context whose disks come out only as an export
// stream (raw.gz), so the move needs scratch space for the copy.
type exporter struct{ *sim.Backend }

func (x exporter) ExportFormats() []string { return []string{"raw.gz"} }

func (x exporter) Export(ctx context.Context, ref backends.InstanceRef, format string, w io.Writer) (backends.Consistency, error) {
	if format != "raw.gz" {
		return "", backends.Invalidf("format %s", format)
	}
	zw := gzip.NewWriter(w)
	if _, err := zw.Write([]byte("DISK-OF-" + ref.Name)); err != nil {
		return "", err
	}
	return backends.ConsistencyOffline, zw.Close()
}

// reader records what a move hands to Import.
type reader struct {
	*local
	got []byte
	fmt string
}

func (r *reader) Import(ctx context.Context, spec backends.Spec, path, format string) (backends.Instance, error) {
	r.got, _ = os.ReadFile(path)
	r.fmt = format
	return r.local.Import(ctx, spec, path, format)
}

func TestMoveThroughScratch(t *testing.T) {
	x := exporter{sim.New(sim.Options{Context: "x"})}
	rd := &reader{local: &local{Backend: sim.New(sim.Options{Context: "rd"})}}
	e := newEnv(t, x, rd)
	e.create(t, x, backends.Spec{Name: "web", DiskMiB: 100})
	req := move.Request{Ref: "web", ToBackend: "sim", ToContext: "rd", Scratch: t.TempDir()}

	e.scratchMiB = 99
	p, err := e.svc.Preflight(context.Background(), req)
	if err != nil || !slices.Equal(refusalCodes(p), []string{"scratch"}) || p.Plan.Read != "export" || p.Plan.ScratchMiB != 100 {
		t.Fatalf("99 MiB of scratch for a 100 MiB export: %+v, %v; want a scratch refusal", p, err)
	}
	if p, _ := e.svc.Preflight(context.Background(), move.Request{Ref: "web", ToBackend: "sim", ToContext: "rd", Scratch: "/no/such/dir"}); !slices.Equal(refusalCodes(p), []string{"scratch"}) {
		t.Fatalf("a missing scratch folder: %+v", p.Refusals)
	}
	e.scratchMiB = 100
	task, _, err := e.svc.Move(context.Background(), tasks.Origin{Actor: "t", Surface: "test"}, req)
	if err != nil {
		t.Fatalf("Move: %v", err)
	}
	if done, lines := waitTask(t, e.tm, task.ID); done.Status != store.TaskDone {
		t.Fatalf("task = %+v, log %+v", done, lines)
	}
	if string(rd.got) != "DISK-OF-web" || rd.fmt != "raw" {
		t.Fatalf("the importer read %q as %s, want the gunzipped export as raw", rd.got, rd.fmt)
	}
	if left, _ := filepath.Glob(filepath.Join(req.Scratch, "*")); len(left) != 0 {
		t.Fatalf("scratch space not cleaned: %v", left)
	}
}

// TestMoveRefusedIsConflict: a commit the server-side preflight refuses
// starts no task and carries the same refusal list.
func TestMoveRefusedIsConflict(t *testing.T) {
	e := newEnv(t)
	e.create(t, e.a, backends.Spec{Name: "web"})
	e.create(t, e.b, backends.Spec{Name: "web"})
	_, pf, err := e.svc.Move(context.Background(), tasks.Origin{Actor: "t", Surface: "test"}, move.Request{Ref: "sim/a/-/web", ToBackend: "sim", ToContext: "b"})
	var re *move.RefusedError
	if !errors.As(err, &re) || !errors.Is(err, backends.ErrConflict) {
		t.Fatalf("Move onto a taken name: %v, want a RefusedError (Conflict)", err)
	}
	if got := refusalCodes(re.Preflight); !slices.Equal(got, []string{"name-taken"}) || !slices.Equal(refusalCodes(pf), got) {
		t.Fatalf("refusals = %v / %v, want [name-taken]", got, refusalCodes(pf))
	}
	if !strings.Contains(backends.SafeMessage(err), "already exists") {
		t.Fatalf("safe message %q", backends.SafeMessage(err))
	}
	if recent, _ := e.tm.Recent(context.Background(), 10); len(recent) != 0 {
		t.Fatalf("a refused move started tasks: %+v", recent)
	}
}

func waitTask(t *testing.T, tm *tasks.Manager, id string) (store.Task, []store.LogLine) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Minute)
	for {
		task, lines, err := tm.Get(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if task.Status != store.TaskRunning {
			return task, lines
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s still running: %+v", id, lines)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestMoveFailureAfterCopy: the destination fails after it created the
// copy (import, then the start of the copy): the copy is removed and the
// running source is running again, untouched.
func TestMoveFailureAfterCopy(t *testing.T) {
	for _, stage := range []string{"import", "start"} {
		t.Run(stage, func(t *testing.T) {
			e := newEnv(t)
			e.create(t, e.a, backends.Spec{Name: "web", Start: true, Tags: []string{"x"}})
			switch stage {
			case "import":
				e.b.importFn = func(string) error { return backends.Failed("disk copy failed", nil) }
			case "start":
				e.b.SetFail(func(op string) error {
					if op == "power" {
						return backends.Failed("the hypervisor refused to start it", nil)
					}
					return nil
				})
			}
			task, _, err := e.svc.Move(context.Background(), tasks.Origin{Actor: "t", Surface: "test"}, move.Request{Ref: "web", ToBackend: "sim", ToContext: "b", DeleteSource: true})
			if err != nil {
				t.Fatalf("Move: %v", err)
			}
			done, lines := waitTask(t, e.tm, task.ID)
			if done.Status != store.TaskError {
				t.Fatalf("task = %+v, want an error", done)
			}
			if len(e.b.imported) != 1 {
				t.Fatalf("the destination imported %v, want one attempt", e.b.imported)
			}
			if _, err := e.b.Get(context.Background(), backends.InstanceRef{Backend: backends.KindSim, Context: "b", Name: "web"}); !errors.Is(err, backends.ErrNotFound) {
				t.Fatalf("the partial copy is still there: %v; log %+v", err, lines)
			}
			in, err := e.a.Get(context.Background(), backends.InstanceRef{Backend: backends.KindSim, Context: "a", Name: "web"})
			if err != nil || in.State != backends.StateRunning || !slices.Equal(in.Tags, []string{"x"}) {
				t.Fatalf("source after a failed move = %+v, %v; want it running as before", in, err)
			}
		})
	}
}

// TestMoveKeepsOrDeletesSource: a successful move of a running source
// starts the copy; the source is kept stopped, or deleted with
// deleteSource. A second move of the same source while one runs is
// refused.
func TestMoveKeepsOrDeletesSource(t *testing.T) {
	for _, del := range []bool{false, true} {
		e := newEnv(t)
		e.create(t, e.a, backends.Spec{Name: "web", Start: true, CPUs: 3, MemoryMiB: 768})
		if err := e.st.CreateFolder(context.Background(), "team"); err != nil {
			t.Fatal(err)
		}
		if err := e.st.SetFolderMember(context.Background(), "team", "sim/a/-/web"); err != nil {
			t.Fatal(err)
		}
		task, _, err := e.svc.Move(context.Background(), tasks.Origin{Actor: "t", Surface: "test"}, move.Request{Ref: "web", ToBackend: "sim", ToContext: "b", DeleteSource: del})
		if err != nil {
			t.Fatalf("Move: %v", err)
		}
		done, lines := waitTask(t, e.tm, task.ID)
		if done.Status != store.TaskDone {
			t.Fatalf("task = %+v, log %+v", done, lines)
		}
		cp, err := e.b.Get(context.Background(), backends.InstanceRef{Backend: backends.KindSim, Context: "b", Name: "web"})
		if err != nil || cp.State != backends.StateRunning || cp.CPUs != 3 || cp.MemoryMiB != 768 {
			t.Fatalf("copy = %+v, %v; want running with 3 CPUs and 768 MiB", cp, err)
		}
		src, err := e.a.Get(context.Background(), backends.InstanceRef{Backend: backends.KindSim, Context: "a", Name: "web"})
		if del && !errors.Is(err, backends.ErrNotFound) {
			t.Fatalf("deleteSource: the source is still there: %+v, %v", src, err)
		}
		if !del && (err != nil || src.State != backends.StateStopped) {
			t.Fatalf("the kept source = %+v, %v; want it stopped", src, err)
		}
		// The copy is filed beside the source; a deleted source leaves
		// the folder.
		if p, err := e.st.FolderOf(context.Background(), "sim/b/-/web"); err != nil || p != "team" {
			t.Errorf("the copy's folder = %q, %v; want team, the source's", p, err)
		}
		p, err := e.st.FolderOf(context.Background(), "sim/a/-/web")
		if del && !errors.Is(err, store.ErrNotFound) {
			t.Errorf("deleteSource: the source is still in folder %q (%v)", p, err)
		}
		if !del && p != "team" {
			t.Errorf("the kept source's folder = %q, %v; want team", p, err)
		}
	}
}

// TestMoveInProgress: while a move of an instance runs, its preflight and
// a second commit are refused; once it ends they are not.
func TestMoveInProgress(t *testing.T) {
	e := newEnv(t)
	e.create(t, e.a, backends.Spec{Name: "web"})
	release := make(chan struct{})
	e.b.importFn = func(string) error { <-release; return nil }
	o := tasks.Origin{Actor: "t", Surface: "test"}
	task, _, err := e.svc.Move(context.Background(), o, move.Request{Ref: "web", ToBackend: "sim", ToContext: "b", Name: "one"})
	if err != nil {
		t.Fatalf("Move: %v", err)
	}
	p, _ := e.svc.Preflight(context.Background(), move.Request{Ref: "web", ToBackend: "sim", ToContext: "b", Name: "two"})
	if !slices.Contains(refusalCodes(p), "move-in-progress") {
		t.Fatalf("preflight during a move = %+v, want move-in-progress", p.Refusals)
	}
	if _, _, err := e.svc.Move(context.Background(), o, move.Request{Ref: "web", ToBackend: "sim", ToContext: "b", Name: "two"}); !errors.Is(err, backends.ErrConflict) {
		t.Fatalf("a second move during the first: %v, want a Conflict", err)
	}
	close(release)
	if done, lines := waitTask(t, e.tm, task.ID); done.Status != store.TaskDone {
		t.Fatalf("task = %+v, log %+v", done, lines)
	}
	if p, _ := e.svc.Preflight(context.Background(), move.Request{Ref: "web", ToBackend: "sim", ToContext: "b", Name: "two"}); p.Refused() {
		t.Fatalf("preflight after the move = %+v, want none", p.Refusals)
	}
}
