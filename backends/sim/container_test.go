package sim_test

import (
	"errors"
	"testing"

	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/backends/sim"
)

func TestCreateContainer(t *testing.T) {
	b := sim.New(sim.Options{Context: "lab"})
	ctx := t.Context()
	if _, err := b.CreateContainer(ctx, backends.Spec{Name: "box"}, "", false); !errors.Is(err, backends.ErrInvalid) {
		t.Fatalf("a CT without an image: %v; want Invalid", err)
	}
	in, err := b.CreateContainer(ctx, backends.Spec{Name: "box", Start: true}, "docker.io/library/debian:bookworm", true)
	if err != nil {
		t.Fatal(err)
	}
	got, err := b.Get(ctx, in.Ref)
	if err != nil || got.Type != backends.TypeCT || got.State != backends.StateRunning {
		t.Fatalf("Get = %+v, %v; want a running CT", got, err)
	}
	facts := map[string]string{}
	for _, f := range got.Facts {
		facts[f.Label] = f.Value
	}
	if facts["Image"] != "docker.io/library/debian:bookworm" || facts["Privileged"] != "true" {
		t.Fatalf("facts %v", facts)
	}
	if _, err := b.CreateContainer(ctx, backends.Spec{Name: "box"}, "x", false); !errors.Is(err, backends.ErrConflict) {
		t.Fatalf("a second box: %v; want Conflict", err)
	}
}
