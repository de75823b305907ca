// Package move is the cold move of an instance from one context to
// another, across backends (ADR-0010): Destinations says which contexts
// can receive an instance and why the others cannot, Preflight answers a
// plan with every refusal and warning at once and touches nothing, and
// Move re-runs the preflight and, when nothing refuses, runs the move as a
// task: stop the source, read its disk (straight from the file where the
// backend keeps it on this host, else an export into scratch space),
// import it on the destination with qemu-img converting formats, start
// the copy if the source ran, and delete the source only when asked. A
// failure after the destination was created removes it and leaves the
// source as it was.
package move

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/corral-dev/corral/app/fleet"
	"github.com/corral-dev/corral/app/tasks"
	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/store"
)

// Request is the body of the preflight and of the move (spec/api.md).
type Request struct {
	Ref          string `json:"ref"`
	ToBackend    string `json:"toBackend"`
	ToContext    string `json:"toContext,omitempty"`
	ToNamespace  string `json:"toNamespace,omitempty"`
	Name         string `json:"name,omitempty"`    // default: the source's name
	Scratch      string `json:"scratch,omitempty"` // folder for an export copy; default Options.ScratchDir
	DeleteSource bool   `json:"deleteSource,omitempty"`
}

// The refusal codes: one per reason a move cannot run.
const (
	RefuseNoDestination = "no-destination"   // toBackend missing or no such context
	RefuseSameContext   = "same-context"     // destination is the source's context
	RefuseSourceExport  = "source-export"    // the source's disk cannot be read
	RefuseDestImport    = "dest-import"      // the destination cannot import
	RefuseContainer     = "container"        // CT <-> VM: only VMs move
	RefuseName          = "name"             // invalid name, or namespace where there is none
	RefuseNameTaken     = "name-taken"       // the name exists on the destination
	RefuseFirmware      = "firmware"         // UEFI onto a BIOS-only destination
	RefuseScratch       = "scratch"          // not enough scratch space for the export copy
	RefuseUnreachable   = "unreachable"      // a context did not answer
	RefuseBusy          = "move-in-progress" // another move of the same instance runs
)

// Refusal is one reason the move cannot run, safe to show.
type Refusal struct {
	Code   string `json:"code"`
	Reason string `json:"reason"`
}

// Warning is something the move changes that the caller should know.
type Warning struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Plan is what the move would do.
type Plan struct {
	Source      string   `json:"source"`                // canonical ref
	Destination string   `json:"destination,omitempty"` // canonical ref the copy will have
	SourceState string   `json:"sourceState,omitempty"`
	Read        string   `json:"read,omitempty"`   // "disk-file" or "export"
	Format      string   `json:"format,omitempty"` // the source disk's format
	Convert     bool     `json:"convert"`          // qemu-img converts the format
	DiskMiB     int64    `json:"diskMiB,omitempty"`
	ScratchMiB  int64    `json:"scratchMiB"` // scratch space the export copy needs
	Steps       []string `json:"steps"`
}

// Preflight is the answer of a preflight: refusals and warnings (both
// always lists, possibly empty) and the plan.
type Preflight struct {
	Refusals []Refusal `json:"refusals"`
	Warnings []Warning `json:"warnings"`
	Plan     Plan      `json:"plan"`
}

// Refused reports whether any refusal stands.
func (p Preflight) Refused() bool { return len(p.Refusals) > 0 }

// RefusedError is the error of a Move whose server-side preflight
// refused. It is a Conflict (409); the surface shows Preflight.Refusals.
type RefusedError struct{ Preflight Preflight }

func (e *RefusedError) Error() string {
	reasons := make([]string, len(e.Preflight.Refusals))
	for i, r := range e.Preflight.Refusals {
		reasons[i] = r.Reason
	}
	return "move refused: " + strings.Join(reasons, "; ")
}

// Safe marks the message safe: every reason is.
func (e *RefusedError) Safe() string { return e.Error() }

// Is makes errors.Is(err, backends.ErrConflict) hold.
func (e *RefusedError) Is(target error) bool { return target == backends.ErrConflict }

// Destination is one context as a move target for a given instance.
type Destination struct {
	Context  string   `json:"context"` // context key, e.g. "libvirt/lab"
	Backend  string   `json:"backend"`
	Name     string   `json:"name"`
	OK       bool     `json:"ok"`
	Reasons  []string `json:"reasons"` // why not, when !OK
	Warnings []string `json:"warnings,omitempty"`
}

// Registry is the slice of the store the move keeps in step.
type Registry interface {
	EnsureInstance(ctx context.Context, ref string) (store.Instance, error)
	DeleteInstance(ctx context.Context, ref string) error
	// FolderOf and SetFolderMember file the copy in the source's folder.
	FolderOf(ctx context.Context, ref string) (string, error)
	SetFolderMember(ctx context.Context, path, ref string) error
}

// Options configure a Service.
type Options struct {
	// ScratchDir receives export copies when a source's disk is not a file
	// on this host; default os.TempDir().
	ScratchDir string
	// FreeSpace returns the bytes available in a folder; default statfs.
	FreeSpace func(dir string) (int64, error)
	// ShutdownTimeout bounds how long the move waits for a running source
	// to shut down before it powers it off; default 2 min.
	ShutdownTimeout time.Duration
	// Registry, when set, gets the new ref (and loses the old one with
	// deleteSource).
	Registry Registry
	Logger   *slog.Logger
}

// Service plans and runs moves.
type Service struct {
	fleet *fleet.Fleet
	tasks *tasks.Manager
	opts  Options

	mu     sync.Mutex
	moving map[string]bool // source refs with a move running
}

// New returns a Service.
func New(f *fleet.Fleet, t *tasks.Manager, opts Options) *Service {
	if opts.ScratchDir == "" {
		opts.ScratchDir = os.TempDir()
	}
	if opts.FreeSpace == nil {
		opts.FreeSpace = freeSpace
	}
	if opts.ShutdownTimeout == 0 {
		opts.ShutdownTimeout = 2 * time.Minute
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Service{fleet: f, tasks: t, opts: opts, moving: map[string]bool{}}
}

func freeSpace(dir string) (int64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}

// Destinations lists every configured context as a destination for the
// instance named by ref, each with the reasons it cannot receive it.
func (s *Service) Destinations(ctx context.Context, ref string) ([]Destination, error) {
	if strings.TrimSpace(ref) == "" {
		return nil, backends.Invalidf("ref is required: the canonical ref or the unique name of the instance to move")
	}
	src, err := s.source(ctx, ref)
	if err != nil {
		return nil, err
	}
	var out []Destination
	for _, b := range s.fleet.Backends() {
		req := Request{Ref: src.ref.String(), ToBackend: string(b.Kind()), ToContext: b.Context()}
		p := s.plan(ctx, src, req)
		d := Destination{Context: backends.ContextKey("", b.Kind(), b.Context()), Backend: string(b.Kind()), Name: b.Context(),
			OK: !p.Refused(), Reasons: []string{}}
		for _, r := range p.Refusals {
			d.Reasons = append(d.Reasons, r.Reason)
		}
		for _, w := range p.Warnings {
			d.Warnings = append(d.Warnings, w.Message)
		}
		out = append(out, d)
	}
	return out, nil
}

// Preflight plans the move of req and touches nothing. Every refusal is
// listed at once. A missing ref is Invalid and an unknown one NotFound;
// anything else about the move is an answer, not an error.
func (s *Service) Preflight(ctx context.Context, req Request) (Preflight, error) {
	if strings.TrimSpace(req.Ref) == "" {
		return Preflight{}, backends.Invalidf("ref is required: the canonical ref or the unique name of the instance to move")
	}
	src, err := s.source(ctx, req.Ref)
	if err != nil {
		return Preflight{}, err
	}
	return s.plan(ctx, src, req), nil
}

// source is a resolved source with what the preflight read from it:
// read once per call, however many destinations are planned.
type source struct {
	ref     backends.InstanceRef
	b       backends.Backend
	in      backends.Instance
	readErr error // the live Get failed: in is the snapshot's copy

	disk      backends.Disk // DiskSource's answer, when diskRead
	diskRead  bool          // DiskSource was asked (a DiskSourcer, readable)
	diskErr   error         // DiskSource failed
	snapshots int           // the source's snapshots (0 when unread)
}

func (s *Service) source(ctx context.Context, text string) (source, error) {
	snap := s.fleet.Snapshot()
	ref, err := snap.Resolve(text)
	if err != nil {
		return source{}, err
	}
	b, err := s.fleet.Backend(ref)
	if err != nil {
		return source{}, err
	}
	src := source{ref: ref, b: b}
	cctx, cancel := s.fleet.CallContext(ctx)
	defer cancel()
	in, err := b.Get(cctx, ref)
	switch {
	case errors.Is(err, backends.ErrNotFound):
		return source{}, err
	case err != nil:
		src.readErr = err
		src.in, _ = snap.Find(ref)
	default:
		src.in = in
	}
	if src.readErr != nil {
		return src, nil
	}
	if ds, ok := b.(backends.DiskSourcer); ok {
		cctx, cancel := s.fleet.CallContext(ctx)
		src.disk, src.diskErr = ds.DiskSource(cctx, ref)
		cancel()
		src.diskRead = true
	}
	if sn, ok := b.(backends.Snapshotter); ok {
		cctx, cancel := s.fleet.CallContext(ctx)
		list, err := sn.Snapshots(cctx, ref)
		cancel()
		if err == nil {
			src.snapshots = len(list)
		}
	}
	return src, nil
}

// plan is the preflight proper.
func (s *Service) plan(ctx context.Context, src source, req Request) Preflight {
	p := Preflight{Refusals: []Refusal{}, Warnings: []Warning{}, Plan: Plan{Source: src.ref.String(), SourceState: string(src.in.State), Steps: []string{}}}
	refuse := func(code, format string, args ...any) {
		p.Refusals = append(p.Refusals, Refusal{Code: code, Reason: fmt.Sprintf(format, args...)})
	}
	warn := func(code, format string, args ...any) {
		p.Warnings = append(p.Warnings, Warning{Code: code, Message: fmt.Sprintf(format, args...)})
	}
	if src.readErr != nil {
		refuse(RefuseUnreachable, "the source cannot be read now: %s", safe(src.readErr))
	}
	s.mu.Lock()
	busy := s.moving[src.ref.String()]
	s.mu.Unlock()
	if busy {
		refuse(RefuseBusy, "a move of %s is already running", src.ref)
	}
	if src.in.Type == backends.TypeCT {
		refuse(RefuseContainer, "%s is a container: only VMs move between backends (a CT cannot become a VM, nor a VM a CT)", src.ref.Name)
	}

	// The read side.
	var disk backends.Disk
	_, isDS := src.b.(backends.DiskSourcer)
	exp, isExp := src.b.(backends.Exporter)
	expFormat := ""
	if isExp {
		for _, f := range exp.ExportFormats() {
			if f == "qcow2" || f == "raw.gz" {
				expFormat = f
				break
			}
		}
	}
	switch {
	case isDS && src.diskRead:
		if src.diskErr != nil {
			refuse(RefuseSourceExport, "the disk of %s cannot be read: %s", src.ref.Name, safe(src.diskErr))
		} else {
			disk = src.disk
			p.Plan.Read, p.Plan.Format, p.Plan.DiskMiB = "disk-file", disk.Format, disk.VirtualMiB
		}
	case isDS:
	case expFormat != "":
		p.Plan.Read, p.Plan.Format, p.Plan.DiskMiB = "export", strings.TrimSuffix(expFormat, ".gz"), src.in.DiskMiB
		disk.Firmware = backends.FirmwareBIOS
	default:
		refuse(RefuseSourceExport, "the %s backend cannot hand over the disk of %s: it neither exposes the disk file nor exports qcow2 or raw", src.ref.Backend, src.ref.Name)
	}

	// The destination.
	dst := s.destination(req, refuse)
	name := req.Name
	if name == "" {
		name = src.ref.Name
	}
	if dst != nil {
		key := backends.ContextKey("", dst.Kind(), dst.Context())
		if key == src.ref.ContextKey() {
			refuse(RefuseSameContext, "%s is already in context %s: choose another context (corral migrate moves between nodes of one context)", src.ref.Name, key)
		}
		imp, isImp := dst.(backends.Importer)
		if !isImp {
			refuse(RefuseDestImport, "the %s backend cannot import a disk: choose another destination backend", dst.Kind())
		} else if ic, ok := dst.(backends.ImportChecker); ok {
			if err := ic.CanImport(); err != nil {
				refuse(RefuseDestImport, "context %s cannot import: %s", key, safe(err))
			}
		}
		if req.ToNamespace != "" && dst.Kind() != backends.KindKubeVirt {
			refuse(RefuseName, "the %s backend has no namespaces: leave toNamespace empty", dst.Kind())
		}
		if err := backends.ValidateName("instance", name); err != nil {
			refuse(RefuseName, "%s", safe(err))
		} else {
			dref := backends.InstanceRef{Backend: dst.Kind(), Context: dst.Context(), Namespace: req.ToNamespace, Name: name}
			p.Plan.Destination = dref.String()
			cctx, cancel := s.fleet.CallContext(ctx)
			_, err := dst.Get(cctx, dref)
			cancel()
			switch {
			case err == nil:
				refuse(RefuseNameTaken, "an instance named %s already exists in %s: give the copy another name", name, key)
			case errors.Is(err, backends.ErrNotFound):
			default:
				refuse(RefuseUnreachable, "the destination cannot be checked now: %s", safe(err))
			}
		}
		if isImp && disk.Firmware == backends.FirmwareUEFI && !importsFirmware(imp, backends.FirmwareUEFI) {
			refuse(RefuseFirmware, "%s boots UEFI and the %s backend imports BIOS guests only: choose a destination with UEFI", src.ref.Name, dst.Kind())
		}
		p.Plan.Convert = p.Plan.Format != "" && p.Plan.Format != "qcow2"
	}

	// Scratch space, for an export copy only: a disk file is read in place.
	if p.Plan.Read == "export" {
		dir := req.Scratch
		if dir == "" {
			dir = s.opts.ScratchDir
		}
		need := max(p.Plan.DiskMiB, 1)
		p.Plan.ScratchMiB = need
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			refuse(RefuseScratch, "scratch folder %s does not exist: give an existing folder with %d MiB free", dir, need)
		} else if free, err := s.opts.FreeSpace(dir); err != nil || free>>20 < need {
			refuse(RefuseScratch, "scratch folder %s has %d MiB free, the export copy needs %d MiB: free space or give another scratch folder", dir, max(free, 0)>>20, need)
		}
	}

	// Warnings.
	if dst != nil {
		warn("new-mac", "the copy gets a new MAC address on %s: a DHCP lease or a firewall rule tied to the old one will not follow", dst.Kind())
	}
	if src.snapshots > 0 {
		warn("snapshots", "%d snapshot(s) of %s stay with the source: the copy starts without history", src.snapshots, src.ref.Name)
	}
	if len(src.in.Tags) > 0 {
		if dst != nil && !backends.Supports[backends.Tagger](dst) {
			warn("tags", "the tags %s are written into the copy's definition, but the %s backend cannot change them later: use folders", strings.Join(src.in.Tags, ", "), dst.Kind())
		}
	}
	if src.in.State != backends.StateStopped && src.in.State != "" {
		warn("downtime", "%s is %s: it is shut down for the whole move and the copy is started afterwards", src.ref.Name, src.in.State)
	}
	if req.DeleteSource {
		warn("delete-source", "the source %s is deleted once the copy is in place", src.ref)
	}

	p.Plan.Steps = s.steps(src, p.Plan, req)
	return p
}

func orRef(ref string) string {
	if ref == "" {
		return "(the new ref)"
	}
	return ref
}

// destination finds the context req names, or refuses.
func (s *Service) destination(req Request, refuse func(code, format string, args ...any)) backends.Backend {
	if req.ToBackend == "" {
		refuse(RefuseNoDestination, "choose a destination: toBackend is required (and toContext where a backend has several contexts)")
		return nil
	}
	var cands []backends.Backend
	var keys []string
	for _, b := range s.fleet.Backends() {
		keys = append(keys, backends.ContextKey("", b.Kind(), b.Context()))
		if string(b.Kind()) == req.ToBackend && (req.ToContext == "" || b.Context() == req.ToContext) {
			cands = append(cands, b)
		}
	}
	switch {
	case len(cands) == 1:
		return cands[0]
	case len(cands) == 0:
		refuse(RefuseNoDestination, "no context %s is configured: accepted are %s", backends.ContextKey("", backends.Kind(req.ToBackend), req.ToContext), strings.Join(keys, ", "))
	default:
		var names []string
		for _, b := range cands {
			names = append(names, b.Context())
		}
		refuse(RefuseNoDestination, "the %s backend has several contexts: name one in toContext (%s)", req.ToBackend, strings.Join(names, ", "))
	}
	return nil
}

func importsFirmware(imp backends.Importer, fw backends.Firmware) bool {
	fi, ok := imp.(backends.FirmwareImporter)
	return ok && slices.Contains(fi.ImportFirmwares(), fw)
}

func (s *Service) steps(src source, p Plan, req Request) []string {
	var st []string
	if src.in.State != backends.StateStopped && src.in.State != "" {
		st = append(st, fmt.Sprintf("shut down %s (power off after %s)", p.Source, s.opts.ShutdownTimeout))
	}
	switch p.Read {
	case "disk-file":
		st = append(st, fmt.Sprintf("read the %s disk file of %s in place (%d MiB)", p.Format, p.Source, p.DiskMiB))
	case "export":
		st = append(st, fmt.Sprintf("export the disk of %s as %s into scratch space (%d MiB)", p.Source, p.Format, p.ScratchMiB))
	}
	if p.Destination != "" {
		conv := "copy"
		if p.Convert {
			conv = "convert to qcow2 with qemu-img and"
		}
		st = append(st, fmt.Sprintf("%s import the disk as %s", conv, p.Destination))
		if src.in.State != backends.StateStopped && src.in.State != "" {
			st = append(st, "start "+p.Destination)
		}
	}
	if req.DeleteSource {
		st = append(st, "delete "+p.Source)
	} else {
		st = append(st, "keep "+p.Source+" (stopped)")
	}
	return st
}

// safe is an error's safe message, or a generic one.
func safe(err error) string {
	if m := backends.SafeMessage(err); m != "" {
		return m
	}
	return "the backend failed (the server log has the cause)"
}
