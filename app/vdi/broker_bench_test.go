package vdi_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/corral-dev/corral/app/auth"
	"github.com/corral-dev/corral/app/vdi"
	"github.com/corral-dev/corral/backends"
)

// BenchmarkBrokerClaimRace is the race of DESIGN.md through the whole
// broker: 200 users call Service.Claim at once on a pool of 100 stopped
// members in a simulated context, each claim a task with its audit row
// and a start of the member (instant: no guest boots). It reports the
// p99 latency of one claim.
func BenchmarkBrokerClaimRace(b *testing.B) {
	var p99s []float64
	for b.Loop() {
		b.StopTimer()
		e := newEnv(b, vdi.Options{})
		if _, err := e.svc.CreatePool(context.Background(), admin, vdi.PoolRequest{Name: "desk", Golden: golden, Size: 100}); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		var (
			mu   sync.Mutex
			lat  []time.Duration
			won  = map[string]bool{}
			lost int
			wg   sync.WaitGroup
			gate = make(chan struct{})
		)
		for i := range 200 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				who := auth.Identity{Login: fmt.Sprintf("user%03d@example.com", i), Via: auth.ViaTailscale}
				<-gate
				start := time.Now()
				d, err := e.svc.Claim(context.Background(), who, "rest", "vm/-/desk")
				took := time.Since(start)
				mu.Lock()
				defer mu.Unlock()
				lat = append(lat, took)
				switch {
				case errors.Is(err, backends.ErrConflict):
					lost++
				case err != nil:
					b.Errorf("%s: %v", who.Login, err)
				case won[d.ID]:
					b.Errorf("%s given twice", d.ID)
				default:
					won[d.ID] = true
				}
			}()
		}
		close(gate)
		wg.Wait()
		b.StopTimer()
		if len(won) != 100 || lost != 100 {
			b.Fatalf("%d winners, %d losers", len(won), lost)
		}
		slices.Sort(lat)
		p99s = append(p99s, float64(lat[len(lat)*99/100-1].Microseconds())/1000)
		b.StartTimer()
	}
	sum := 0.0
	for _, p := range p99s {
		sum += p
	}
	b.ReportMetric(sum/float64(len(p99s)), "p99-ms")
}
