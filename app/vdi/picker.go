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
// claimant a different candidate, and tells a claimant the pool is full
// only after a read that saw every claim of this process.
type Picker struct {
	mu       sync.Mutex
	cond     *sync.Cond
	inflight map[DesktopID]bool
	busy     map[string]int // Acquires in flight, by pool
	gen      uint64         // incremented by every Acquire that ended
	lists    map[string]*listCall
}

type listCall struct {
	gen    uint64
	done   chan struct{}
	claims []Claim
	err    error
}

// NewPicker returns an empty picker.
func NewPicker() *Picker {
	p := &Picker{inflight: map[DesktopID]bool{}, busy: map[string]int{}, lists: map[string]*listCall{}}
	p.cond = sync.NewCond(&p.mu)
	return p
}

// Pick claims one free member of pool for holder: a member of members
// that has no claim and for which free (when not nil) reports true. It
// returns ErrNoFree when none is left.
func (p *Picker) Pick(ctx context.Context, s ClaimStore, pool PoolID, members []DesktopID, holder string, now time.Time,
	free func(DesktopID) bool) (Claim, error) {
	tried := map[DesktopID]bool{}
	for {
		claims, gen, err := p.list(ctx, s, pool)
		if err != nil {
			return Claim{}, err
		}
		held := make(map[DesktopID]bool, len(claims))
		for _, c := range claims {
			held[c.Desktop] = true
		}
		key := pool.String()
		p.mu.Lock()
		var cands []DesktopID
		for _, d := range members {
			if !p.inflight[d] && !held[d] && !tried[d] && (free == nil || free(d)) {
				cands = append(cands, d)
			}
		}
		if len(cands) == 0 {
			if p.busy[key] == 0 && gen == p.gen {
				p.mu.Unlock()
				return Claim{}, ErrNoFree
			}
			// Wait until no Acquire of this pool is in flight, then read
			// the claims again: every waiter reads them in one List, and
			// sees every claim this process made.
			for p.busy[key] > 0 {
				p.cond.Wait()
			}
			p.mu.Unlock()
			if err := ctx.Err(); err != nil {
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
		p.cond.Broadcast()
		p.mu.Unlock()
		switch {
		case err == nil:
			return c, nil
		case errors.Is(err, ErrClaimed):
			tried[d] = true
		default:
			return Claim{}, err
		}
	}
}

// list returns the pool's claims, read once for every caller that asks
// while no Acquire ended since the read began, and the generation the
// read began at.
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
	c.claims, c.err = s.List(context.WithoutCancel(ctx), pool.Kind, pool.Namespace, pool.Pool)
	close(c.done)
	p.mu.Lock()
	if p.lists[key] == c {
		delete(p.lists, key)
	}
	p.mu.Unlock()
	return c.claims, c.gen, c.err
}
