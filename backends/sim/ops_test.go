package sim_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/backends/sim"
)

func TestScale(t *testing.T) {
	ctx := context.Background()
	b := sim.New(sim.Options{Context: "ops", Size: 1})
	ref := backends.InstanceRef{Backend: backends.KindSim, Context: "ops", Name: "web-ops-0000"}
	if err := b.Scale(ctx, ref, 4, 8192); err != nil {
		t.Fatal(err)
	}
	if in, _ := b.Get(ctx, ref); in.CPUs != 4 || in.MemoryMiB != 8192 {
		t.Errorf("after Scale(4, 8192): %d CPU, %d MiB", in.CPUs, in.MemoryMiB)
	}
	if err := b.Scale(ctx, ref, 0, 8192); !errors.Is(err, backends.ErrInvalid) {
		t.Errorf("Scale to 0 CPU: %v, want ErrInvalid", err)
	}
}

func TestTemplate(t *testing.T) {
	ctx := context.Background()
	b := sim.New(sim.Options{Context: "ops", Size: 3})
	running := backends.InstanceRef{Backend: backends.KindSim, Context: "ops", Name: "web-ops-0000"}
	stopped := backends.InstanceRef{Backend: backends.KindSim, Context: "ops", Name: "cache-ops-0002"}
	if err := b.SetTemplate(ctx, running, true); !errors.Is(err, backends.ErrConflict) {
		t.Errorf("mark a running instance: %v, want ErrConflict", err)
	}
	if err := b.SetTemplate(ctx, stopped, true); err != nil {
		t.Fatal(err)
	}
	if in, _ := b.Get(ctx, stopped); !in.Template {
		t.Error("the mark is not reported by Get")
	}
	if err := b.Power(ctx, stopped, backends.ActionStart); !errors.Is(err, backends.ErrUnsupported) {
		t.Errorf("start a template: %v, want a refusal", err)
	}
	c, err := b.Clone(ctx, stopped, "from-template")
	if err != nil || c.Template {
		t.Fatalf("clone of a template: %+v, %v; want an instance that is no template", c, err)
	}
	if err := b.Power(ctx, c.Ref, backends.ActionStart); err != nil {
		t.Errorf("start the clone: %v", err)
	}
	if err := b.SetTemplate(ctx, stopped, false); err != nil {
		t.Fatal(err)
	}
	if err := b.Power(ctx, stopped, backends.ActionStart); err != nil {
		t.Errorf("start after unmarking: %v", err)
	}
}

func TestMigrate(t *testing.T) {
	ctx := context.Background()
	b := sim.New(sim.Options{Context: "ops", Size: 3})
	ref := backends.InstanceRef{Backend: backends.KindSim, Context: "ops", Name: "web-ops-0000"} // running on node-0
	for _, tc := range []struct {
		name, node string
		kind       error
	}{{"current node", "node-0", backends.ErrInvalid}, {"unknown node", "node-9", backends.ErrInvalid}} {
		if _, err := b.Migrate(ctx, ref, tc.node); !errors.Is(err, tc.kind) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.kind)
		}
	}
	if _, err := b.Migrate(ctx, backends.InstanceRef{Backend: backends.KindSim, Context: "ops", Name: "cache-ops-0002"}, ""); !errors.Is(err, backends.ErrConflict) {
		t.Errorf("migrate a stopped instance: %v, want ErrConflict", err)
	}
	m, err := b.Migrate(ctx, ref, "node-2")
	if err != nil {
		t.Fatal(err)
	}
	var phases []string
	if err := m.Wait(ctx, func(p string) { phases = append(phases, p) }); err != nil {
		t.Fatal(err)
	}
	if want := []string{"Scheduling", "Running", "Succeeded"}; !slices.Equal(phases, want) {
		t.Errorf("phases = %q, want %q", phases, want)
	}
	if in, _ := b.Get(ctx, ref); in.Node != "node-2" {
		t.Errorf("node after the migration = %q, want node-2", in.Node)
	}
	m, err = b.Migrate(ctx, ref, "") // the scheduler: any other node
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Power(ctx, ref, backends.ActionStop); err != nil {
		t.Fatal(err)
	}
	if err := m.Wait(ctx, nil); !errors.Is(err, backends.ErrFailed) {
		t.Errorf("a migration whose instance stopped: %v, want ErrFailed", err)
	}
}
