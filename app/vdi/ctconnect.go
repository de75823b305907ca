package vdi

import (
	"context"

	"github.com/corral-dev/corral/app/auth"
	"github.com/corral-dev/corral/backends"
)

// connectCT is Connect for a CT desktop (spec/vdi.md: a CT member offers
// only its terminal). The claim is read through the CT seam, as the
// session count and console access read it; the member must run (its
// pod ready), else the answer is a Conflict that says to start it.
func (s *Service) connectCT(ctx context.Context, who auth.Identity, desktop string) (ConnectAnswer, error) {
	ct, c, err := s.ctHeld(ctx, who, desktop)
	if err != nil {
		return ConnectAnswer{}, err
	}
	pool := PoolID{Kind: "ct", Namespace: c.Desktop.Namespace, Pool: c.Pool}
	if c.Expired(s.now()) {
		return ConnectAnswer{}, backends.Conflictf("the claim on %s expired: claim the pool %s again", c.Desktop, pool)
	}
	m := ct.Members(ctx, []Claim{c})[0]
	if m.Err != nil {
		return ConnectAnswer{}, m.Err
	}
	ref, err := backends.ParseRef(m.Ref)
	if err != nil {
		return ConnectAnswer{}, backends.NotFoundf("desktop %s: member not found in the clusters of pool %s", c.Desktop, pool)
	}
	switch {
	case m.Running:
	case m.Phase == "Starting":
		return ConnectAnswer{}, backends.Conflictf("desktop %s is Starting: connect when it is Ready", c.Desktop)
	default:
		return ConnectAnswer{}, backends.Conflictf("desktop %s is %s: start it first", c.Desktop, m.Phase)
	}
	return ConnectAnswer{Desktop: c.Desktop.String(), Owner: c.Holder, Ref: ref.String(),
		Target:    ConnectOption{Protocol: ProtoTerminal, Kind: string(backends.ConsoleSerial), URL: ConsoleURL(ref, backends.ConsoleSerial)},
		Fallbacks: []ConnectOption{}, Skipped: []string{}}, nil
}
