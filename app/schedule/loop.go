package schedule

import (
	"context"
	"time"
)

// Run ticks every interval until ctx ends, on boundaries of the interval
// (a 30 s interval ticks at :00 and :30 of each minute), and logs what
// each tick fired. Options.After, when set, replaces time.After so tests
// drive the loop with an injected clock.
func (s *Service) Run(ctx context.Context, every time.Duration) {
	after := s.opts.After
	if after == nil {
		after = time.After
	}
	for {
		now := s.opts.Now()
		wait := now.Truncate(every).Add(every).Sub(now)
		select {
		case <-ctx.Done():
			return
		case <-after(wait):
		}
		fired, err := s.Tick(ctx, s.opts.Now())
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			s.log.Error("schedule: tick failed", "err", err)
			continue
		}
		for _, f := range fired {
			s.log.Info("schedule: fired", "id", f.ID, "target", f.Target, "due", f.Due, "result", f.Result, "message", f.Message, "task", f.Task)
		}
		if s.opts.OnTick != nil {
			s.opts.OnTick(fired)
		}
	}
}
