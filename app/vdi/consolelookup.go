package vdi

import (
	"time"

	"github.com/corral-dev/corral/backends"
)

// consoleLookup is what a holder's console access check found for an
// instance: its desktop and where that desktop's claim is kept. The open
// that follows (ConsoleOpened, once the bridge has dialed) counts the
// session with it instead of reading the pools a second time.
type consoleLookup struct {
	d      DesktopID
	claims claimRW
	at     time.Time
}

// Bounds of the remembered lookups: a console page checks access too and
// opens nothing, so what is not taken is dropped after lookupTTL, and at
// most maxLookups are kept.
const (
	lookupTTL  = 30 * time.Second
	maxLookups = 1024
)

// rememberLookup keeps what ConsoleAccess found for ref.
func (s *Service) rememberLookup(ref backends.InstanceRef, d DesktopID, claims claimRW) {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lookups == nil {
		s.lookups = map[string]consoleLookup{}
	}
	for k, l := range s.lookups {
		if now.Sub(l.at) >= lookupTTL {
			delete(s.lookups, k)
		}
	}
	if len(s.lookups) >= maxLookups {
		return
	}
	s.lookups[ref.String()] = consoleLookup{d: d, claims: claims, at: now}
}

// takeLookup returns and forgets the lookup remembered for ref, when it
// is recent.
func (s *Service) takeLookup(ref backends.InstanceRef) (consoleLookup, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.lookups[ref.String()]
	delete(s.lookups, ref.String())
	if !ok || s.now().Sub(l.at) >= lookupTTL {
		return consoleLookup{}, false
	}
	return l, true
}
