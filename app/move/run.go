package move

import (
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/corral-dev/corral/app/tasks"
	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/store"
)

// Move re-runs the preflight and, when nothing refuses, runs the move as a
// task and returns it at once. A refusal is a *RefusedError (409) carrying
// the preflight; a missing or unknown ref is Invalid or NotFound.
func (s *Service) Move(ctx context.Context, o tasks.Origin, req Request) (store.Task, Preflight, error) {
	spec := tasks.Spec{Action: "move", Target: req.Ref, Origin: o}
	pf, err := s.Preflight(ctx, req)
	if err != nil {
		return store.Task{}, pf, s.tasks.Refused(ctx, spec, err)
	}
	spec.Target = pf.Plan.Source
	if pf.Refused() {
		return store.Task{}, pf, s.tasks.Refused(ctx, spec, &RefusedError{Preflight: pf})
	}
	// Claim the source: a second move of it is refused until this ends.
	s.mu.Lock()
	if s.moving[pf.Plan.Source] {
		s.mu.Unlock()
		pf.Refusals = append(pf.Refusals, Refusal{Code: RefuseBusy, Reason: "a move of " + pf.Plan.Source + " is already running"})
		return store.Task{}, pf, s.tasks.Refused(ctx, spec, &RefusedError{Preflight: pf})
	}
	s.moving[pf.Plan.Source] = true
	s.mu.Unlock()
	src, _ := backends.ParseRef(pf.Plan.Source)
	dst, _ := backends.ParseRef(pf.Plan.Destination)
	t, err := s.tasks.Start(ctx, spec, func(ctx context.Context, r *tasks.Run) error {
		defer func() {
			s.mu.Lock()
			delete(s.moving, pf.Plan.Source)
			s.mu.Unlock()
			s.fleet.RefreshContext(context.WithoutCancel(ctx), src.ContextKey())
			s.fleet.RefreshContext(context.WithoutCancel(ctx), dst.ContextKey())
		}()
		return s.run(ctx, r, src, dst, req, pf.Plan)
	})
	if err != nil {
		s.mu.Lock()
		delete(s.moving, pf.Plan.Source)
		s.mu.Unlock()
	}
	return t, pf, err
}

// run is the move task. Every failure after the source was stopped
// restarts it if it ran; every failure after the destination was created
// deletes the copy: the source is then as it was.
func (s *Service) run(ctx context.Context, r *tasks.Run, src, dst backends.InstanceRef, req Request, plan Plan) (err error) {
	sb, err := s.fleet.Backend(src)
	if err != nil {
		return err
	}
	db, err := s.fleet.Backend(dst)
	if err != nil {
		return err
	}
	imp, err := backends.Imports(db)
	if err != nil {
		return err
	}
	r.Logf("move %s to %s", src, dst)
	in, err := sb.Get(ctx, src)
	if err != nil {
		return err
	}

	// 1. Stop the source, remembering whether it ran.
	wasRunning := in.State != backends.StateStopped
	committed := false // the copy is in place: the source must stay stopped
	if wasRunning {
		if err := s.stop(ctx, r, sb, src, in.State); err != nil {
			return err
		}
		defer func() {
			if err == nil || committed {
				return
			}
			r.Logf("restart the source %s, which ran before the move", src)
			if e := sb.Power(context.WithoutCancel(ctx), src, backends.ActionStart); e != nil {
				s.opts.Logger.Error("move: the source could not be restarted", "ref", src.String(), "err", e)
				r.Logf("the source could not be restarted: %s", safe(e))
			}
		}()
	}
	r.Progress(20)

	// 2. The disk: the file in place, or an export copy in scratch.
	path, format, cleanup, err := s.disk(ctx, r, sb, src, req, plan)
	if err != nil {
		return err
	}
	defer cleanup()
	r.Progress(50)

	// 3. Import on the destination.
	if format != "qcow2" {
		r.Logf("convert the %s disk to qcow2 with qemu-img and import it as %s", format, dst)
	} else {
		r.Logf("copy the qcow2 disk and import it as %s", dst)
	}
	spec := backends.Spec{Name: dst.Name, Namespace: dst.Namespace, Type: backends.TypeVM, CPUs: in.CPUs, MemoryMiB: in.MemoryMiB, Tags: in.Tags}
	created, err := imp.Import(ctx, spec, path, format)
	if err != nil {
		// A Conflict is a name someone took since the preflight: theirs,
		// not ours to remove. Any other failure may have left a partial
		// copy (importers clean up, but a backend may not have).
		if !errors.Is(err, backends.ErrConflict) {
			s.removeCopy(ctx, r, db, dst)
		}
		return err
	}
	r.Progress(80)
	r.Logf("imported %s: %d CPU, %s memory", created.Ref, created.CPUs, backends.FormatMiB(created.MemoryMiB, 0))

	// 4. Start the copy if the source ran.
	if wasRunning {
		r.Logf("start %s", dst)
		if err := db.Power(ctx, dst, backends.ActionStart); err != nil {
			s.removeCopy(ctx, r, db, dst)
			return err
		}
	}
	committed = true
	if s.opts.Registry != nil {
		if _, err := s.opts.Registry.EnsureInstance(ctx, created.Ref.String()); err != nil {
			s.opts.Logger.Error("move: registry entry not written", "ref", created.Ref.String(), "err", err)
		}
		s.refile(ctx, r, src, created.Ref)
	}
	r.Progress(90)

	// 5. The source: kept, stopped, unless deleteSource.
	if !req.DeleteSource {
		r.Logf("moved: %s is in place; the source %s is kept, stopped", dst, src)
		return nil
	}
	r.Logf("delete the source %s", src)
	if err := sb.Delete(ctx, src); err != nil {
		// The copy is complete and running as the source did: undoing it
		// now would be the half-done change. Say what is left.
		return &backends.Error{Kind: backends.ErrFailed, Err: err,
			Msg: fmt.Sprintf("moved to %s, but the source %s could not be deleted: it is kept, stopped; delete it by hand", dst, src)}
	}
	if s.opts.Registry != nil {
		if err := s.opts.Registry.DeleteInstance(ctx, src.String()); err != nil {
			s.opts.Logger.Error("move: registry entry left behind", "ref", src.String(), "err", err)
		}
	}
	r.Logf("moved: %s is in place; the source is deleted", dst)
	return nil
}

// stop shuts a running source down (ACPI), powering it off when it does
// not stop within ShutdownTimeout; a paused one is powered off.
func (s *Service) stop(ctx context.Context, r *tasks.Run, b backends.Backend, ref backends.InstanceRef, state backends.State) error {
	if state == backends.StateRunning {
		r.Logf("shut down %s", ref)
		if err := b.Power(ctx, ref, backends.ActionShutdown); err != nil && !errors.Is(err, backends.ErrConflict) {
			return err
		}
		deadline := time.Now().Add(s.opts.ShutdownTimeout)
		for time.Now().Before(deadline) {
			in, err := b.Get(ctx, ref)
			if err != nil {
				return err
			}
			if in.State == backends.StateStopped {
				r.Logf("%s is stopped", ref)
				return nil
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(500 * time.Millisecond):
			}
		}
		r.Logf("%s did not shut down within %s: power it off", ref, s.opts.ShutdownTimeout)
	} else {
		r.Logf("power off %s (%s)", ref, state)
	}
	if err := b.Power(ctx, ref, backends.ActionStop); err != nil && !errors.Is(err, backends.ErrConflict) {
		return err
	}
	if in, err := b.Get(ctx, ref); err != nil {
		return err
	} else if in.State != backends.StateStopped {
		return backends.Failed(fmt.Sprintf("%s did not stop", ref), nil)
	}
	return nil
}

// disk returns a readable image of the stopped source and a cleanup.
func (s *Service) disk(ctx context.Context, r *tasks.Run, b backends.Backend, ref backends.InstanceRef, req Request, plan Plan) (string, string, func(), error) {
	if ds, ok := b.(backends.DiskSourcer); ok {
		d, err := ds.DiskSource(ctx, ref)
		if err != nil {
			return "", "", nil, err
		}
		if d.InUse {
			return "", "", nil, backends.Conflictf("the disk of %s is in use: it was started during the move", ref.Name)
		}
		r.Logf("read the %s disk of %s in place (%s)", d.Format, ref, backends.FormatMiB(d.VirtualMiB, 0))
		return d.Path, d.Format, func() {}, nil
	}
	exp, err := backends.Exports(b)
	if err != nil {
		return "", "", nil, err
	}
	dir := req.Scratch
	if dir == "" {
		dir = s.opts.ScratchDir
	}
	f, err := os.CreateTemp(dir, ".corral-move-"+ref.Name+"-*")
	if err != nil {
		return "", "", nil, backends.Failed("could not create the export copy in scratch space", err)
	}
	cleanup := func() { _ = os.Remove(f.Name()) }
	format := "qcow2"
	var w io.Writer = f
	var gz *gunzipWriter
	if plan.Format == "raw" {
		format = "raw"
		gz = newGunzipWriter(f)
		w = gz
	}
	r.Logf("export the disk of %s as %s into scratch space", ref, format)
	expFormat := format
	if format == "raw" {
		expFormat = "raw.gz"
	}
	_, err = exp.Export(ctx, ref, expFormat, w)
	if gz != nil {
		if err != nil {
			_ = gz.pw.CloseWithError(err)
			<-gz.done
		} else {
			err = gz.Close()
		}
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		cleanup()
		return "", "", nil, err
	}
	return f.Name(), format, cleanup, nil
}

// removeCopy deletes a copy the move created; a failure is logged (the
// copy is then debris the operator must remove, and the log says so).
func (s *Service) removeCopy(ctx context.Context, r *tasks.Run, b backends.Backend, ref backends.InstanceRef) {
	ctx = context.WithoutCancel(ctx)
	in, err := b.Get(ctx, ref)
	if errors.Is(err, backends.ErrNotFound) {
		return
	}
	r.Logf("remove the partial copy %s", ref)
	if err == nil && in.State != backends.StateStopped {
		_ = b.Power(ctx, ref, backends.ActionStop)
	}
	if err := b.Delete(ctx, ref); err != nil {
		s.opts.Logger.Error("move: the partial copy could not be removed", "ref", ref.String(), "err", err)
		r.Logf("the partial copy %s could not be removed: delete it by hand", ref)
	}
}

// gunzipWriter decompresses what is written to it into w (an export in
// raw.gz becomes a raw image the importer reads).
type gunzipWriter struct {
	pw   *io.PipeWriter
	done chan error
}

func newGunzipWriter(w io.Writer) *gunzipWriter {
	pr, pw := io.Pipe()
	g := &gunzipWriter{pw: pw, done: make(chan error, 1)}
	go func() {
		zr, err := gzip.NewReader(pr)
		if err == nil {
			_, err = io.Copy(w, zr)
		}
		_ = pr.CloseWithError(err)
		g.done <- err
	}()
	return g
}

func (g *gunzipWriter) Write(p []byte) (int, error) { return g.pw.Write(p) }

func (g *gunzipWriter) Close() error {
	_ = g.pw.Close()
	return <-g.done
}

// refile puts the copy in the folder the source is in (folders hold
// instances by ref, and the copy has a new one). The move is done either
// way: a failure is logged and said in the task's log.
func (s *Service) refile(ctx context.Context, r *tasks.Run, src, dst backends.InstanceRef) {
	path, err := s.opts.Registry.FolderOf(ctx, src.String())
	if errors.Is(err, store.ErrNotFound) {
		return
	}
	if err == nil {
		err = s.opts.Registry.SetFolderMember(ctx, path, dst.String())
	}
	if err != nil {
		s.opts.Logger.Error("move: the copy is not filed in the source's folder", "ref", dst.String(), "err", err)
		r.Logf("the copy %s could not be filed in the source's folder: file it by hand", dst)
		return
	}
	r.Logf("filed %s in folder %s, beside the source", dst, path)
}
