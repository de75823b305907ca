package sim_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/backends/backendtest"
	"github.com/corral-dev/corral/backends/sim"
)

func TestConformance(t *testing.T) {
	backendtest.Run(t, backendtest.Harness{
		New: func(t *testing.T) backends.Backend { return sim.New(sim.Options{Context: "conf", Size: 3}) },
		Spec: func(t *testing.T, name string) backends.Spec {
			return backends.Spec{Name: name, CPUs: 2, MemoryMiB: 1024}
		},
		RunningSnapshot: backends.ConsistencyCrash,
		Pause:           true,
	})
}

func TestLatencyHonoursContext(t *testing.T) {
	b := sim.New(sim.Options{Context: "slow", Size: 1, Latency: time.Hour})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	_, err := b.List(ctx)
	if !errors.Is(err, backends.ErrUnavailable) {
		t.Fatalf("List past its deadline: %v, want ErrUnavailable", err)
	}
}

func TestFailureInjection(t *testing.T) {
	boom := backends.Failed("simulated failure", errors.New("disk on fire"))
	b := sim.New(sim.Options{Size: 2, Fail: func(op string) error {
		if op == "power" {
			return boom
		}
		return nil
	}})
	list, err := b.List(context.Background())
	if err != nil || len(list) != 2 {
		t.Fatalf("List = %d, %v", len(list), err)
	}
	if err := b.Power(context.Background(), list[0].Ref, backends.ActionStop); !errors.Is(err, backends.ErrFailed) {
		t.Fatalf("Power with injected failure: %v", err)
	}
}
