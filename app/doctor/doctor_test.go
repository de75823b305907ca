package doctor_test

import (
	"context"
	"testing"
	"time"

	"github.com/corral-dev/corral/app/doctor"
	"github.com/corral-dev/corral/backends"
	"github.com/corral-dev/corral/backends/libvirt"
	"github.com/corral-dev/corral/backends/sim"
)

// noDoctor is a backend without diagnostics.
type noDoctor struct{ backends.Backend }

func TestRun(t *testing.T) {
	ok := sim.New(sim.Options{Context: "ok"})
	slow := sim.New(sim.Options{Context: "slow", Latency: time.Hour})
	// libvirt pointed at a socket that does not exist: a real failing check.
	down := libvirt.New(libvirt.Options{Context: "down", URI: "qemu+unix:///system?socket=/nonexistent/sock"})
	defer down.Close()
	rs := doctor.Run(context.Background(), []backends.Backend{ok, slow, down, noDoctor{ok}}, 200*time.Millisecond)
	if !rs[0].OK() || rs[0].Context != "sim/ok" {
		t.Fatalf("healthy context: %+v", rs[0])
	}
	if rs[1].OK() || len(rs[1].Checks) != 1 {
		t.Fatalf("slow context: %+v", rs[1])
	}
	if rs[2].OK() {
		t.Fatalf("unreachable libvirt reported healthy: %+v", rs[2])
	}
	if rs[3].Supported || rs[3].OK() {
		t.Fatalf("a backend without diagnostics: %+v", rs[3])
	}
}
