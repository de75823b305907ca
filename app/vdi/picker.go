package vdi

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"time"
)

// ErrNoFree: the pool has no free member.
var ErrNoFree = errors.New("vdi: pool has no free members")

// Picker hands free members of a pool to concurrent claimants of one
// process. The claim store's compare-and-swap is what makes a claim
// exclusive, across processes too; the picker only keeps the claimants
// of this process from racing each other for the same member: it reads
// a pool's claims once for all the claimants waiting on it, gives each
// claimant a different candidate, and remembers which members its own
// Acquires took (or found taken) after that read, so a claimant learns
// the pool is full as soon as the last Acquire in flight ends, without
// reading the claims again.
type Picker struct {
	mu       sync.Mutex
	cond     *sync.Cond
	inflight map[DesktopID]bool
	busy     map[string]int                  // Acquires in flight, by pool
	active   map[string]int                  // Picks in progress, by pool
	taken    map[string]map[DesktopID]uint64 // by pool: member -> gen at which an Acquire found it held
	gen      uint64                          // incremented by every Acquire that ended
	freed    uint64                          // incremented by every Acquire that failed and left its member free
	lists    map[string]*listCall
	recent   map[string]map[string]recentClaim // by pool: holder -> the member Pick gave them lately
}

// recentClaim is a member Pick gave a holder, remembered for recentTTL:
// a holder's retry finds it even where the pool's claims are read from a
// cache that does not show it yet (CachedLister).
type recentClaim struct {
	d  DesktopID
	at time.Time
}

const recentTTL = time.Minute

type listCall struct {
	gen    uint64
	done   chan struct{}
	claims []Claim
	err    error
}

// NewPicker returns an empty picker.
func NewPicker() *Picker {
	p := &Picker{inflight: map[DesktopID]bool{}, busy: map[string]int{}, active: map[string]int{},
		taken: map[string]map[DesktopID]uint64{}, lists: map[string]*listCall{}, recent: map[string]map[string]recentClaim{}}
	p.cond = sync.NewCond(&p.mu)
	return p
}

// Pick claims one free member of pool for holder: a member of members
// that has no claim and for which free (when not nil) reports true. It
// returns ErrNoFree when none is left.
//
// It reads the pool's claims once. A member is then a candidate unless
// that read shows a claim on it, an Acquire of this process is trying
// it, or an Acquire of this process that ended after the read began
// won it or found it claimed. With no candidate left and no Acquire in
// flight, every member was held at some moment during the call: the
// pool is full. A member whose Acquire failed for another reason is a
// candidate again.
func (p *Picker) Pick(ctx context.Context, s ClaimStore, pool PoolID, members []DesktopID, holder string, now time.Time,
	free func(DesktopID) bool) (Claim, error) {
	key := pool.String()
	p.mu.Lock()
	p.active[key]++
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		if p.active[key]--; p.active[key] == 0 {
			delete(p.active, key)
			delete(p.taken, key) // only Picks in progress compare against it
		}
		p.mu.Unlock()
	}()

	claims, listGen, err := p.list(ctx, s, pool)
	if err != nil {
		return Claim{}, err
	}
	held := make(map[DesktopID]bool, len(claims))
	for _, c := range claims {
		held[c.Desktop] = true
	}
	p.mu.Lock()
	for {
		var cands []DesktopID
		taken := p.taken[key]
		for _, d := range members {
			if !p.inflight[d] && !held[d] && taken[d] <= listGen && (free == nil || free(d)) {
				cands = append(cands, d)
			}
		}
		if len(cands) == 0 {
			if p.busy[key] == 0 {
				p.mu.Unlock()
				return Claim{}, ErrNoFree
			}
			// Wait until no Acquire of this pool is in flight, or one
			// failed and gave its member back.
			for freed := p.freed; p.busy[key] > 0 && p.freed == freed; {
				p.cond.Wait()
			}
			if err := ctx.Err(); err != nil {
				p.mu.Unlock()
				return Claim{}, err
			}
			continue
		}
		d := cands[rand.IntN(len(cands))]
		p.inflight[d] = true
		p.busy[key]++
		p.mu.Unlock()

		c, err := s.Acquire(ctx, d, pool.Pool, holder, now)

		p.mu.Lock()
		delete(p.inflight, d)
		if p.busy[key]--; p.busy[key] == 0 {
			delete(p.busy, key)
		}
		p.gen++
		if err == nil || errors.Is(err, ErrClaimed) {
			if p.taken[key] == nil {
				p.taken[key] = map[DesktopID]uint64{}
			}
			p.taken[key][d] = p.gen
		} else {
			p.freed++
		}
		if p.busy[key] == 0 || err != nil && !errors.Is(err, ErrClaimed) {
			p.cond.Broadcast()
		}
		switch {
		case err == nil:
			p.remember(key, holder, d)
			p.mu.Unlock()
			return c, nil
		case errors.Is(err, ErrClaimed):
		default:
			p.mu.Unlock()
			return Claim{}, err
		}
	}
}

// list returns the pool's claims, read once for every caller that asks
// while no Acquire ended since the read began, and the generation the
// read began at. It reads the store's cache when the store has one
// (CachedLister).
func (p *Picker) list(ctx context.Context, s ClaimStore, pool PoolID) ([]Claim, uint64, error) {
	key := pool.String()
	p.mu.Lock()
	if c, ok := p.lists[key]; ok && c.gen == p.gen {
		p.mu.Unlock()
		select {
		case <-c.done:
			return c.claims, c.gen, c.err
		case <-ctx.Done():
			return nil, 0, ctx.Err()
		}
	}
	c := &listCall{gen: p.gen, done: make(chan struct{})}
	p.lists[key] = c
	p.mu.Unlock()
	list := s.List
	if cl, ok := s.(CachedLister); ok {
		list = cl.ListCached
	}
	c.claims, c.err = list(context.WithoutCancel(ctx), pool.Kind, pool.Namespace, pool.Pool)
	close(c.done)
	p.mu.Lock()
	if p.lists[key] == c {
		delete(p.lists, key)
	}
	p.mu.Unlock()
	return c.claims, c.gen, c.err
}

// remember records that holder got d in pool key, and forgets records
// older than recentTTL. p.mu is held.
func (p *Picker) remember(key, holder string, d DesktopID) {
	now := time.Now()
	for k, hs := range p.recent {
		for h, r := range hs {
			if now.Sub(r.at) >= recentTTL {
				delete(hs, h)
			}
		}
		if len(hs) == 0 {
			delete(p.recent, k)
		}
	}
	if p.recent[key] == nil {
		p.recent[key] = map[string]recentClaim{}
	}
	p.recent[key][holder] = recentClaim{d: d, at: now}
}

// Recent returns the member Pick gave holder in pool within recentTTL.
func (p *Picker) Recent(pool PoolID, holder string) (DesktopID, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	r, ok := p.recent[pool.String()][holder]
	if !ok || time.Since(r.at) >= recentTTL {
		return DesktopID{}, false
	}
	return r.d, true
}
