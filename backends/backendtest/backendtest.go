// Package backendtest is the conformance suite every backend adapter runs,
// in the manner of testing/fstest.TestFS and go-cloud's drivertest. It
// checks through the public contract alone what every surface relies on:
// listing, creation, power transitions and their conflicts, the error
// kinds, snapshots and their consistency, clone, delete, and refusals for
// capabilities a backend lacks.
package backendtest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/corral-dev/corral/backends"
)

// Harness adapts one backend to the suite.
type Harness struct {
	// New returns the backend under test, bound to a context the test owns.
	New func(t *testing.T) backends.Backend
	// Spec returns a spec that Create accepts for the given name; the suite
	// only changes Name.
	Spec func(t *testing.T, name string) backends.Spec
	// Settle bounds how long the suite waits for an asynchronous state
	// change (an ACPI shutdown, a boot). Zero means 30 s.
	Settle time.Duration
	// Ready, when set, waits until a started instance has booted far
	// enough to take an ACPI shutdown (a real guest must reach its marker
	// first). It fails the test if the guest never gets there.
	Ready func(t *testing.T, b backends.Backend, ref backends.InstanceRef)
	// RunningSnapshot says what CreateSnapshot of a running instance gives:
	// a consistency, or "" when the backend must refuse it as Unsupported.
	RunningSnapshot backends.Consistency
	// Pause reports whether the backend pauses; when false, pause must be
	// refused as Unsupported.
	Pause bool
}

// Run runs the conformance suite against the harness.
func Run(t *testing.T, h Harness) {
	if h.Settle == 0 {
		h.Settle = 30 * time.Second
	}
	b := h.New(t)
	s := &suite{h: h, b: b}
	if b.Kind() == "" || b.Context() == "" {
		t.Fatalf("Kind() = %q, Context() = %q: both must be set", b.Kind(), b.Context())
	}
	t.Run("NotFound", s.notFound)
	t.Run("CreateListGet", s.createListGet)
	t.Run("InvalidName", s.invalidName)
	t.Run("Power", s.power)
	t.Run("Snapshots", s.snapshots)
	t.Run("Clone", s.clone)
	t.Run("Delete", s.delete)
}

type suite struct {
	h Harness
	b backends.Backend
}

func (s *suite) ref(name string) backends.InstanceRef {
	return backends.InstanceRef{Backend: s.b.Kind(), Context: s.b.Context(), Namespace: s.h.Spec(nil, name).Namespace, Name: name}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// create makes an instance for one subtest and deletes it afterwards.
func (s *suite) create(t *testing.T, name string) backends.Instance {
	t.Helper()
	ctx := ctxT(t)
	in, err := s.b.Create(ctx, s.h.Spec(t, name))
	if err != nil {
		t.Fatalf("Create(%s): %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if cur, err := s.b.Get(ctx, in.Ref); err == nil && cur.State != backends.StateStopped {
			_ = s.b.Power(ctx, in.Ref, backends.ActionStop)
		}
		_ = s.b.Delete(ctx, in.Ref)
	})
	return in
}

// wantKind fails the test unless err wraps kind.
func wantKind(t *testing.T, what string, err, kind error) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s succeeded, want an error of kind %v", what, kind)
	}
	if !errors.Is(err, kind) {
		t.Fatalf("%s: %v (kind %v), want kind %v", what, err, backends.KindOf(err), kind)
	}
	if backends.SafeMessage(err) == "" {
		t.Fatalf("%s: error %v has no message safe to show", what, err)
	}
}

// waitState polls Get until the instance reaches want.
func (s *suite) waitState(t *testing.T, ref backends.InstanceRef, want backends.State) {
	t.Helper()
	deadline := time.Now().Add(s.h.Settle)
	var last backends.State
	for {
		in, err := s.b.Get(ctxT(t), ref)
		if err != nil {
			t.Fatalf("Get(%s) while waiting for %s: %v", ref, want, err)
		}
		if last = in.State; last == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s is %s after %v, want %s", ref, last, s.h.Settle, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (s *suite) notFound(t *testing.T) {
	ctx := ctxT(t)
	ref := s.ref("corral-no-such-instance")
	_, err := s.b.Get(ctx, ref)
	wantKind(t, "Get of a missing instance", err, backends.ErrNotFound)
	wantKind(t, "Power of a missing instance", s.b.Power(ctx, ref, backends.ActionStart), backends.ErrNotFound)
	wantKind(t, "Delete of a missing instance", s.b.Delete(ctx, ref), backends.ErrNotFound)
}

func (s *suite) createListGet(t *testing.T) {
	ctx := ctxT(t)
	name := "conf-create"
	in := s.create(t, name)
	want := s.ref(name)
	if in.Ref != want {
		t.Fatalf("Create returned ref %v, want %v", in.Ref, want)
	}
	if in.State != backends.StateStopped {
		t.Fatalf("a new instance is %s, want stopped", in.State)
	}
	if in.CPUs <= 0 || in.MemoryMiB <= 0 {
		t.Fatalf("a new instance reports %d CPUs and %d MiB", in.CPUs, in.MemoryMiB)
	}
	list, err := s.b.List(ctx)
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	if !slices.ContainsFunc(list, func(i backends.Instance) bool { return i.Ref == want }) {
		t.Fatalf("List does not show the created instance %v", want)
	}
	got, err := s.b.Get(ctx, want)
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if got.Ref != want || got.CPUs != in.CPUs || got.MemoryMiB != in.MemoryMiB {
		t.Fatalf("Get = %+v, Create returned %+v", got, in)
	}
	_, err = s.b.Create(ctx, s.h.Spec(t, name))
	wantKind(t, "Create of a name in use", err, backends.ErrConflict)
}

func (s *suite) invalidName(t *testing.T) {
	for _, name := range []string{"", "Bad Name", "../escape", "-lead"} {
		_, err := s.b.Create(ctxT(t), s.h.Spec(t, name))
		if err == nil {
			_ = s.b.Delete(ctxT(t), s.ref(name))
		}
		wantKind(t, fmt.Sprintf("Create(%q)", name), err, backends.ErrInvalid)
	}
}

func (s *suite) power(t *testing.T) {
	ctx := ctxT(t)
	in := s.create(t, "conf-power")
	ref := in.Ref
	step := func(a backends.Action, want backends.State) {
		t.Helper()
		if err := s.b.Power(ctx, ref, a); err != nil {
			t.Fatalf("Power(%s): %v", a, err)
		}
		s.waitState(t, ref, want)
	}
	wantKind(t, "stop of a stopped instance", s.b.Power(ctx, ref, backends.ActionStop), backends.ErrConflict)
	step(backends.ActionStart, backends.StateRunning)
	wantKind(t, "start of a running instance", s.b.Power(ctx, ref, backends.ActionStart), backends.ErrConflict)
	if s.h.Ready != nil {
		s.h.Ready(t, s.b, ref)
	}
	if s.h.Pause {
		step(backends.ActionPause, backends.StatePaused)
		wantKind(t, "pause of a paused instance", s.b.Power(ctx, ref, backends.ActionPause), backends.ErrConflict)
		step(backends.ActionResume, backends.StateRunning)
	} else {
		wantKind(t, "pause", s.b.Power(ctx, ref, backends.ActionPause), backends.ErrUnsupported)
	}
	step(backends.ActionRestart, backends.StateRunning)
	if s.h.Ready != nil {
		s.h.Ready(t, s.b, ref)
	}
	step(backends.ActionShutdown, backends.StateStopped)
	step(backends.ActionStart, backends.StateRunning)
	step(backends.ActionStop, backends.StateStopped)
	wantKind(t, "an unknown action", s.b.Power(ctx, ref, backends.Action("explode")), backends.ErrInvalid)
}

func (s *suite) snapshots(t *testing.T) {
	snap, ok := s.b.(backends.Snapshotter)
	if !ok {
		_, err := backends.Snapshots(s.b)
		var u *backends.Unsupported
		if !errors.As(err, &u) || u.Op != "snapshot" || u.Backend != string(s.b.Kind()) {
			t.Fatalf("Snapshots helper on a backend without snapshots: %v, want *Unsupported", err)
		}
		return
	}
	ctx := ctxT(t)
	in := s.create(t, "conf-snap")
	ref := in.Ref
	sn, err := snap.CreateSnapshot(ctx, ref, "before")
	if err != nil {
		t.Fatalf("CreateSnapshot of a stopped instance: %v", err)
	}
	if sn.Name != "before" || sn.Consistency != backends.ConsistencyOffline {
		t.Fatalf("snapshot of a stopped instance = %+v, want name before and offline consistency", sn)
	}
	_, err = snap.CreateSnapshot(ctx, ref, "before")
	wantKind(t, "CreateSnapshot of a name in use", err, backends.ErrConflict)
	list, err := snap.Snapshots(ctx, ref)
	if err != nil {
		t.Fatalf("Snapshots: %v", err)
	}
	if len(list) != 1 || list[0].Name != "before" || list[0].Consistency != backends.ConsistencyOffline {
		t.Fatalf("Snapshots = %+v, want one offline snapshot named before", list)
	}
	if err := snap.RevertSnapshot(ctx, ref, "before"); err != nil {
		t.Fatalf("RevertSnapshot: %v", err)
	}
	wantKind(t, "RevertSnapshot of a missing snapshot", snap.RevertSnapshot(ctx, ref, "nope"), backends.ErrNotFound)

	if err := s.b.Power(ctx, ref, backends.ActionStart); err != nil {
		t.Fatalf("start: %v", err)
	}
	s.waitState(t, ref, backends.StateRunning)
	live, err := snap.CreateSnapshot(ctx, ref, "live")
	switch {
	case s.h.RunningSnapshot == "":
		wantKind(t, "CreateSnapshot of a running instance", err, backends.ErrUnsupported)
	case err != nil:
		t.Fatalf("CreateSnapshot of a running instance: %v", err)
	case live.Consistency != s.h.RunningSnapshot:
		t.Fatalf("snapshot of a running instance has consistency %s, want %s", live.Consistency, s.h.RunningSnapshot)
	}
	if err := s.b.Power(ctx, ref, backends.ActionStop); err != nil {
		t.Fatalf("stop: %v", err)
	}
	s.waitState(t, ref, backends.StateStopped)
	if err := snap.DeleteSnapshot(ctx, ref, "before"); err != nil {
		t.Fatalf("DeleteSnapshot: %v", err)
	}
	wantKind(t, "DeleteSnapshot twice", snap.DeleteSnapshot(ctx, ref, "before"), backends.ErrNotFound)
	list, err = snap.Snapshots(ctx, ref)
	if err != nil {
		t.Fatalf("Snapshots: %v", err)
	}
	if slices.ContainsFunc(list, func(s backends.Snapshot) bool { return s.Name == "before" }) {
		t.Fatalf("deleted snapshot still listed: %+v", list)
	}
}

func (s *suite) clone(t *testing.T) {
	cl, ok := s.b.(backends.Cloner)
	if !ok {
		_, err := backends.Clones(s.b)
		wantKind(t, "Clones helper on a backend without clone", err, backends.ErrUnsupported)
		return
	}
	ctx := ctxT(t)
	in := s.create(t, "conf-clone-src")
	c, err := cl.Clone(ctx, in.Ref, "conf-clone-dst")
	if err != nil {
		t.Fatalf("Clone: %v", err)
	}
	t.Cleanup(func() { _ = s.b.Delete(context.Background(), c.Ref) })
	if c.Ref != s.ref("conf-clone-dst") || c.State != backends.StateStopped {
		t.Fatalf("Clone = %+v", c)
	}
	if _, err := s.b.Get(ctx, c.Ref); err != nil {
		t.Fatalf("Get of the clone: %v", err)
	}
	_, err = cl.Clone(ctx, in.Ref, "conf-clone-dst")
	wantKind(t, "Clone onto a name in use", err, backends.ErrConflict)
}

func (s *suite) delete(t *testing.T) {
	ctx := ctxT(t)
	in, err := s.b.Create(ctx, s.h.Spec(t, "conf-delete"))
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	if err := s.b.Delete(ctx, in.Ref); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	_, err = s.b.Get(ctx, in.Ref)
	wantKind(t, "Get after Delete", err, backends.ErrNotFound)
	list, err := s.b.List(ctx)
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	if slices.ContainsFunc(list, func(i backends.Instance) bool { return i.Ref == in.Ref }) {
		t.Fatalf("List still shows the deleted instance")
	}
}
