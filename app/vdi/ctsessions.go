package vdi

import (
	"context"
	"errors"

	"github.com/corral-dev/corral/app/tasks"
)

// ctPass applies the policy of Pass to the users' claims on CT pool
// members: renewal of their Leases, and reclaim (the CT release: the
// member destroyed and made again from its image) past the disconnect
// grace or the maximum duration.
func (s *Service) ctPass(ctx context.Context) error {
	if s.opts.CT == nil {
		return nil
	}
	ct := s.opts.CT
	claims, err := ct.Claims(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, c := range s.servedClaims(claims) { // other namespaces: left alone
		if Reserved(c.Holder) {
			continue // a release or the reconciler holds it
		}
		if err := s.apply(ctx, c, ct, func(ctx context.Context, c Claim, r *tasks.Run) error {
			unlock := s.lock(c.Desktop)
			defer unlock()
			if err := ct.Release(ctx, c); err != nil {
				return err
			}
			r.Logf("reclaimed %s: destroyed and made again from its image", c.Desktop)
			s.changed()
			return nil
		}); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
