package leasekit

import (
	"context"
	"sync"
)

// Tracked is what a Tracker holds: a lease that names itself and can be
// released.
type Tracked interface {
	comparable
	ID() string
	Release(context.Context) error
}

// Tracker keeps a provider's live leases: acquired and not yet released.
// The zero value is ready; it is safe for concurrent use.
type Tracker[L Tracked] struct {
	mu     sync.Mutex
	leases map[L]struct{}
}

// Track registers a live lease.
func (t *Tracker[L]) Track(l L) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.leases == nil {
		t.leases = map[L]struct{}{}
	}
	t.leases[l] = struct{}{}
}

// Untrack forgets a released lease.
func (t *Tracker[L]) Untrack(l L) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.leases, l)
}

// All returns the live leases.
func (t *Tracker[L]) All() []L {
	t.mu.Lock()
	defer t.mu.Unlock()
	ls := make([]L, 0, len(t.leases))
	for l := range t.leases {
		ls = append(ls, l)
	}
	return ls
}

// Live returns the ids of the live leases.
func (t *Tracker[L]) Live() []string {
	ls := t.All()
	ids := make([]string, 0, len(ls))
	for _, l := range ls {
		ids = append(ids, l.ID())
	}
	return ids
}

// ReleaseAll releases every live lease concurrently and joins the errors
// (see [ReleaseAll]).
func (t *Tracker[L]) ReleaseAll(ctx context.Context) error { return ReleaseAll(ctx, t.All()) }
