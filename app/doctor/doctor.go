// Package doctor runs every context's own diagnostics (the Doctor
// capability) in parallel and reports them per context; a backend without
// diagnostics is reported as such rather than as healthy.
package doctor

import (
	"context"
	"sync"
	"time"

	"github.com/corral-dev/corral/backends"
)

// Report is the result for one context.
type Report struct {
	Context string // context key
	Backend backends.Kind
	// Supported is false for a backend without diagnostics.
	Supported bool
	Checks    []backends.Check
}

// OK reports whether every check passed.
func (r Report) OK() bool {
	for _, c := range r.Checks {
		if !c.OK {
			return false
		}
	}
	return r.Supported
}

// Run asks every backend for its diagnostics, each bounded by timeout, in
// the order given.
func Run(ctx context.Context, bs []backends.Backend, timeout time.Duration) []Report {
	out := make([]Report, len(bs))
	var wg sync.WaitGroup
	for i, b := range bs {
		out[i] = Report{Context: backends.ContextKey("", b.Kind(), b.Context()), Backend: b.Kind()}
		d, ok := b.(backends.Doctor)
		if !ok {
			continue
		}
		out[i].Supported = true
		wg.Go(func() {
			cctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			done := make(chan []backends.Check, 1)
			go func() { done <- d.Doctor(cctx) }()
			select {
			case checks := <-done:
				out[i].Checks = checks
			case <-cctx.Done():
				out[i].Checks = []backends.Check{{Name: "diagnostics answer", Message: "the context did not answer within " + timeout.String()}}
			}
		})
	}
	wg.Wait()
	return out
}
