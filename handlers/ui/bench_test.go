package ui_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/corral-dev/corral/app/fleet"
	"github.com/corral-dev/corral/backends/sim"
)

// benchFleet is 10,000 simulated instances in 8 contexts of 1,250; the
// first context answers after slow (0 for none).
func benchFleet(b *testing.B, slow time.Duration) *env {
	var sims []*sim.Backend
	for i := range 8 {
		o := sim.Options{Context: fmt.Sprintf("ctx%d", i), Size: 1250}
		if i == 0 {
			o.Latency = slow
		}
		sims = append(sims, sim.New(o))
	}
	return newEnv(b, fleet.Options{Timeout: 8 * time.Second}, sims...)
}

func benchGet(b *testing.B, e *env, target, htmx string) {
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		rec := e.get(target, htmx)
		if rec.Code != http.StatusOK {
			b.Fatalf("status %d", rec.Code)
		}
	}
}

// BenchmarkDatacenterPage renders GET / from the snapshot of a 10,000
// instance fleet. "slow" has a context answering in 5 s; "slow-after"
// makes a context slow after the first refresh and keeps a refresh of it
// in flight while the page renders: the page must not wait for it.
func BenchmarkDatacenterPage(b *testing.B) {
	b.Run("slow", func(b *testing.B) {
		e := benchFleet(b, 5*time.Second) // newEnv's Refresh waits the 5 s once
		if n := len(e.fleet.Snapshot().Instances); n != 10000 {
			b.Fatalf("%d instances in the snapshot", n)
		}
		benchGet(b, e, "/", "")
	})
	b.Run("slow-after", func(b *testing.B) {
		e := benchFleet(b, 0)
		e.sims["ctx0"].SetLatency(5 * time.Second)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := make(chan struct{})
		go func() { e.fleet.Refresh(ctx); close(done) }()
		benchGet(b, e, "/", "")
		b.StopTimer()
		select {
		case <-done:
			b.Log("the background refresh ended during the benchmark")
		default: // still in flight, as intended
		}
	})
	b.Run("fragment", func(b *testing.B) {
		e := benchFleet(b, 0)
		benchGet(b, e, "/?sort=memory&desc=1&page=3", "section#inventory")
	})
	b.Run("search", func(b *testing.B) {
		e := benchFleet(b, 0)
		benchGet(b, e, "/?q=web&state=running", "section#inventory")
	})
}

// TestDatacenterPageDoesNotWait is the benchmark's claim as a test: with a
// refresh of a context that never answers in flight, the page still
// answers from the snapshot. Were the page to wait, the test would hang
// until the test binary's timeout; there is no clock in the assertion.
func TestDatacenterPageDoesNotWait(t *testing.T) {
	e := newEnv(t, fleet.Options{Timeout: time.Hour}, sim.New(sim.Options{Context: "slow", Size: 50}), sim.New(sim.Options{Context: "fast", Size: 50}))
	e.sims["slow"].SetLatency(time.Hour)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go e.fleet.Refresh(ctx)
	rec := e.get("/", "")
	if rec.Code != http.StatusOK {
		t.Fatalf("GET / = %d while a context that never answers refreshed", rec.Code)
	}
	if body := rec.Body.String(); !strings.Contains(body, "slow-0001") || !strings.Contains(body, "fast-0001") {
		t.Fatalf("the page does not show the last known instances of both contexts")
	}
}
