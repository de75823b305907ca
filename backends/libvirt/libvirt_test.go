package libvirt_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	golibvirt "libvirt.org/go/libvirt"

	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/backends/backendtest"
	"github.com/corral-dev/corral/backends/libvirt"
	"github.com/corral-dev/corral/internal/qemuimg"
)

// requireEngine skips the test when libvirt.so.0 cannot be loaded, or
// fails it when CORRAL_REQUIRE_ENGINES=1 says the engine must be here.
func requireEngine(t *testing.T) {
	t.Helper()
	if _, err := golibvirt.GetVersion(); err != nil {
		if os.Getenv("CORRAL_REQUIRE_ENGINES") == "1" {
			t.Fatalf("engine: libvirt not available: %v", err)
		} else {
			t.Skipf("engine: libvirt not available: %v", err)
		}
	}
}

// newTest returns a backend on libvirt's in-process test driver. Each
// value has its own connection and therefore its own fresh state.
func newTest(t *testing.T, opts libvirt.Options) *libvirt.Backend {
	t.Helper()
	requireEngine(t)
	opts.Context, opts.URI = "test", "test:///default"
	b := libvirt.New(opts)
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return b
}

func TestConformance(t *testing.T) {
	backendtest.Run(t, backendtest.Harness{
		New: func(t *testing.T) backends.Backend { return newTest(t, libvirt.Options{}) },
		Spec: func(t *testing.T, name string) backends.Spec {
			return backends.Spec{Name: name, CPUs: 2, MemoryMiB: 256}
		},
		Settle:          10 * time.Second,
		RunningSnapshot: backends.ConsistencyCrash,
		Pause:           true,
	})
}

func ref(name string) backends.InstanceRef {
	return backends.InstanceRef{Backend: backends.KindLibvirt, Context: "test", Name: name}
}

func TestUnreachableIsUnavailable(t *testing.T) {
	// Runs with or without libvirt: a missing library and a missing
	// daemon must look the same to callers.
	b := libvirt.New(libvirt.Options{Context: "lab", URI: "qemu+unix:///system?socket=/nonexistent/sock"})
	defer b.Close()
	ctx := context.Background()
	_, listErr := b.List(ctx)
	_, getErr := b.Get(ctx, backends.InstanceRef{Backend: backends.KindLibvirt, Context: "lab", Name: "web"})
	_, createErr := b.Create(ctx, backends.Spec{Name: "web"})
	for name, err := range map[string]error{"List": listErr, "Get": getErr, "Create": createErr} {
		if !errors.Is(err, backends.ErrUnavailable) {
			t.Fatalf("%s on an unreachable daemon: %v, want ErrUnavailable", name, err)
		}
		msg := backends.SafeMessage(err)
		if !strings.Contains(msg, "lab") || strings.Contains(msg, "/nonexistent") {
			t.Fatalf("%s: safe message %q must name the context and not the socket path", name, msg)
		}
	}
	for _, c := range b.Doctor(ctx) {
		if strings.Contains(c.Message, "/nonexistent") || strings.Contains(c.Name, "/nonexistent") {
			t.Fatalf("Doctor check %+v shows the URI", c)
		}
		if strings.HasPrefix(c.Name, "connection") && c.OK {
			t.Fatalf("Doctor says the unreachable context answers: %+v", c)
		}
	}
}

func TestOneConnectionPerBackend(t *testing.T) {
	// The test driver's state lives in its connection: every call seeing
	// the domain proves concurrent calls share one connection.
	b := newTest(t, libvirt.Options{})
	ctx := context.Background()
	if _, err := b.Create(ctx, backends.Spec{Name: "shared"}); err != nil {
		t.Fatalf("Create: %v", err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for range 16 {
		wg.Go(func() {
			if _, err := b.Get(ctx, ref("shared")); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("concurrent Get: %v", err)
	}
	// After Close the next call connects again: to a fresh test driver.
	if err := b.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := b.Get(ctx, ref("shared")); !errors.Is(err, backends.ErrNotFound) {
		t.Fatalf("Get after Close: %v, want ErrNotFound from a new connection", err)
	}
}

func TestPredefinedDomainListed(t *testing.T) {
	b := newTest(t, libvirt.Options{})
	list, err := b.List(context.Background())
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	i := slices.IndexFunc(list, func(in backends.Instance) bool { return in.Ref == ref("test") })
	if i < 0 {
		t.Fatalf("List = %+v, want the test driver's predefined domain", list)
	}
	// Defined outside Corral: no metadata, so no tags and no creation time.
	if in := list[i]; in.State != backends.StateRunning || len(in.Tags) != 0 || !in.Created.IsZero() || in.CPUs <= 0 {
		t.Fatalf("predefined domain = %+v", in)
	}
}

func TestTagsAndCreatedRoundTrip(t *testing.T) {
	now := time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)
	b := newTest(t, libvirt.Options{Now: func() time.Time { return now }})
	ctx := context.Background()
	in, err := b.Create(ctx, backends.Spec{Name: "tagged", Tags: []string{"prod", "web"}, Start: true})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	if in.State != backends.StateRunning || in.CPUs != 1 || in.MemoryMiB != 512 {
		t.Fatalf("Create with defaults and Start = %+v, want running, 1 CPU, 512 MiB", in)
	}
	got, err := b.Get(ctx, in.Ref)
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if !slices.Equal(got.Tags, []string{"prod", "web"}) || !got.Created.Equal(now) {
		t.Fatalf("Get = tags %v created %v, want [prod web] and %v", got.Tags, got.Created, now)
	}
	// A clone keeps the tags and gets its own creation time.
	later := now.Add(time.Hour)
	now = later
	if err := b.Power(ctx, in.Ref, backends.ActionStop); err != nil {
		t.Fatalf("stop: %v", err)
	}
	c, err := b.Clone(ctx, in.Ref, "tagged-copy")
	if err != nil {
		t.Fatalf("Clone: %v", err)
	}
	if !slices.Equal(c.Tags, []string{"prod", "web"}) || !c.Created.Equal(later) {
		t.Fatalf("Clone = tags %v created %v, want [prod web] and %v", c.Tags, c.Created, later)
	}
}

func TestCloneOfRunningIsConflict(t *testing.T) {
	b := newTest(t, libvirt.Options{})
	ctx := context.Background()
	_, err := b.Clone(ctx, ref("test"), "copy")
	if !errors.Is(err, backends.ErrConflict) || !strings.Contains(backends.SafeMessage(err), "stop it first") {
		t.Fatalf("Clone of a running domain: %v, want a Conflict saying to stop it first", err)
	}
	if _, err := b.Clone(ctx, ref("test"), "Bad_Name"); !errors.Is(err, backends.ErrInvalid) {
		t.Fatalf("Clone to an invalid name: %v, want ErrInvalid", err)
	}
}

func TestPowerConflicts(t *testing.T) {
	b := newTest(t, libvirt.Options{})
	ctx := context.Background()
	// The predefined domain is running.
	for _, a := range []backends.Action{backends.ActionStart, backends.ActionResume} {
		if err := b.Power(ctx, ref("test"), a); !errors.Is(err, backends.ErrConflict) {
			t.Fatalf("%s of a running domain: %v, want ErrConflict", a, err)
		}
	}
	if err := b.Power(ctx, ref("test"), backends.ActionPause); err != nil {
		t.Fatalf("pause: %v", err)
	}
	for _, a := range []backends.Action{backends.ActionShutdown, backends.ActionRestart, backends.ActionStart} {
		if err := b.Power(ctx, ref("test"), a); !errors.Is(err, backends.ErrConflict) {
			t.Fatalf("%s of a paused domain: %v, want ErrConflict", a, err)
		}
	}
	if err := b.Power(ctx, ref("test"), backends.ActionStop); err != nil {
		t.Fatalf("stop of a paused domain: %v", err)
	}
}

func TestDoctor(t *testing.T) {
	b := newTest(t, libvirt.Options{})
	checks := b.Doctor(context.Background())
	if len(checks) != 3 {
		t.Fatalf("Doctor = %+v, want 3 checks", checks)
	}
	for _, c := range checks {
		if !c.OK || c.Message == "" {
			t.Fatalf("check %+v on the test driver, want OK with a message", c)
		}
	}
	if checks[1].Name != "connection to test answers" || !strings.HasPrefix(checks[2].Message, "TEST") {
		t.Fatalf("Doctor = %+v", checks)
	}
}

func TestStateMapping(t *testing.T) {
	tests := []struct {
		native golibvirt.DomainState
		want   backends.State
	}{
		{golibvirt.DOMAIN_RUNNING, backends.StateRunning},
		{golibvirt.DOMAIN_BLOCKED, backends.StateRunning},
		{golibvirt.DOMAIN_PAUSED, backends.StatePaused},
		{golibvirt.DOMAIN_PMSUSPENDED, backends.StatePaused},
		{golibvirt.DOMAIN_SHUTDOWN, backends.StateStopping},
		{golibvirt.DOMAIN_SHUTOFF, backends.StateStopped},
		{golibvirt.DOMAIN_CRASHED, backends.StateStopped},
		{golibvirt.DOMAIN_NOSTATE, backends.StateUnknown},
		{golibvirt.DomainState(99), backends.StateUnknown},
	}
	for _, tt := range tests {
		if got := libvirt.StateOf(tt.native); got != tt.want {
			t.Errorf("StateOf(%d) = %s, want %s", tt.native, got, tt.want)
		}
	}
}

func TestConsistencyMapping(t *testing.T) {
	for state, want := range map[string]backends.Consistency{
		"shutoff": backends.ConsistencyOffline,
		"running": backends.ConsistencyCrash,
		"paused":  backends.ConsistencyCrash,
		"":        backends.ConsistencyCrash,
	} {
		if got := libvirt.ConsistencyOf(state); got != want {
			t.Errorf("ConsistencyOf(%q) = %s, want %s", state, got, want)
		}
	}
}

func TestToMiB(t *testing.T) {
	tests := []struct {
		v    uint
		unit string
		want int64
	}{
		{524288, "", 512},
		{524288, "KiB", 512},
		{512, "MiB", 512},
		{2, "G", 2048},
		{1 << 30, "bytes", 1024},
	}
	for _, tt := range tests {
		if got := libvirt.ToMiB(tt.v, tt.unit); got != tt.want {
			t.Errorf("ToMiB(%d, %q) = %d, want %d", tt.v, tt.unit, got, tt.want)
		}
	}
}

func TestErrorMapping(t *testing.T) {
	// secret stands for what libvirt's text can carry: it must reach the
	// cause and never the safe message.
	const secret = "/var/run/libvirt/secret-host.example"
	lv := func(code golibvirt.ErrorNumber) error {
		return golibvirt.Error{Code: code, Message: "failed at " + secret, Level: golibvirt.ERR_ERROR}
	}
	tests := []struct {
		name string
		err  error
		kind error
		msg  string // a fragment the safe message must contain
	}{
		{"no domain", lv(golibvirt.ERR_NO_DOMAIN), backends.ErrNotFound, "web does not exist"},
		{"no snapshot", lv(golibvirt.ERR_NO_DOMAIN_SNAPSHOT), backends.ErrNotFound, "snapshot web does not exist"},
		{"invalid operation", lv(golibvirt.ERR_OPERATION_INVALID), backends.ErrConflict, "cannot start web"},
		{"domain exists", lv(golibvirt.ERR_DOM_EXIST), backends.ErrConflict, "web already exists"},
		{"unsupported", lv(golibvirt.ERR_OPERATION_UNSUPPORTED), backends.ErrUnsupported, "start is not supported by the libvirt backend"},
		{"no support", lv(golibvirt.ERR_NO_SUPPORT), backends.ErrUnsupported, "context lab"},
		{"no connect", lv(golibvirt.ERR_NO_CONNECT), backends.ErrUnavailable, "context lab is unreachable"},
		{"system error", lv(golibvirt.ERR_SYSTEM_ERROR), backends.ErrUnavailable, "context lab is unreachable"},
		{"rpc", lv(golibvirt.ERR_RPC), backends.ErrUnavailable, "context lab is unreachable"},
		{"auth", lv(golibvirt.ERR_AUTH_FAILED), backends.ErrUnavailable, "context lab is unreachable"},
		{"internal", lv(golibvirt.ERR_INTERNAL_ERROR), backends.ErrFailed, "libvirt could not start web"},
		{"not libvirt", fmt.Errorf("boom at %s", secret), backends.ErrFailed, "libvirt could not start web"},
		{"deadline", context.DeadlineExceeded, backends.ErrUnavailable, "context lab"},
		{"no qemu-img", &qemuimg.MissingBinary{Name: "qemu-img", Err: exec.ErrNotFound}, backends.ErrUnavailable, "context lab is unreachable"},
		{"already a kind", backends.Conflictf("kept as is"), backends.ErrConflict, "kept as is"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := libvirt.MapError("lab", "start", "web", tt.err)
			if !errors.Is(got, tt.kind) {
				t.Fatalf("MapError = %v (kind %v), want kind %v", got, backends.KindOf(got), tt.kind)
			}
			msg := backends.SafeMessage(got)
			if !strings.Contains(msg, tt.msg) || strings.Contains(msg, secret) {
				t.Fatalf("safe message %q: want it to contain %q and not libvirt's text", msg, tt.msg)
			}
			if !errors.Is(got, tt.err) {
				t.Fatalf("MapError = %v: the cause %v must stay in the chain", got, tt.err)
			}
		})
	}
	if libvirt.MapError("lab", "start", "web", nil) != nil {
		t.Fatal("MapError(nil) != nil")
	}
}
