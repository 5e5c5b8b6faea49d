package pool_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/outpost-dev/outpost/sandbox"
	"github.com/outpost-dev/outpost/sandbox/pool"
)

// slowGoneProvider is a fakeProvider whose first lease answers Gone only
// when gone is closed, and then says it vanished.
type slowGoneProvider struct {
	*fakeProvider
	gone  chan struct{}
	asked chan struct{}
	once  sync.Once
	first sync.Once
}

type slowGoneLease struct {
	*fakeLease
	sp *slowGoneProvider
}

func (l *slowGoneLease) Gone(context.Context) string {
	l.sp.once.Do(func() { close(l.sp.asked) })
	<-l.sp.gone
	return "removed"
}

func (p *slowGoneProvider) Acquire(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	sb, err := p.fakeProvider.Acquire(ctx, spec)
	if err != nil {
		return nil, err
	}
	slow := false
	p.first.Do(func() { slow = true })
	if slow {
		return &slowGoneLease{fakeLease: sb.(*fakeLease), sp: p}, nil
	}
	return sb, nil
}

// An Acquire that finds its ready lease vanished while the spec's idle
// time ran out (the expiry took the bucket's other leases and retired the
// bucket) still gets a lease: it used to wait on the retired bucket, which
// makes nothing, until its context ended.
func TestVanishedLeaseRetryAfterIdleExpiry(t *testing.T) {
	f := &slowGoneProvider{fakeProvider: newFake(), gone: make(chan struct{}), asked: make(chan struct{})}
	p := newPool(t, f, pool.Options{Size: 1, IdleTimeout: 50 * time.Millisecond})
	p.Warm(spec)
	waitFor(t, "a lease ready", func() bool { return p.Ready() == 1 })

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	type res struct {
		sb  sandbox.Sandbox
		err error
	}
	done := make(chan res, 1)
	go func() {
		sb, err := p.Acquire(ctx, spec)
		done <- res{sb, err}
	}()
	<-f.asked
	// The refill made while the first lease is checked is released by
	// the expiry, which retires the bucket.
	waitFor(t, "the refill released by the idle expiry", func() bool { return p.Stats().Released >= 1 })
	close(f.gone)
	r := <-done
	if r.err != nil {
		t.Fatalf("Acquire after a vanished lease and an idle expiry: %v", r.err)
	}
	_ = r.sb.Release(context.Background())
}

// A waiter that gives up just as its lease is handed over never loses
// the lease: it goes back to the pool (or is released), and after Close
// no lease is left.
func TestCancelledWaiterRacingHandOverLeaksNothing(t *testing.T) {
	for i := range 1000 {
		f := newFake()
		gate := make(chan struct{})
		f.gate = gate
		p, err := pool.New(f, pool.Options{Size: 1})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan sandbox.Sandbox, 1)
		go func() {
			sb, _ := p.Acquire(ctx, spec)
			done <- sb
		}()
		waitFor(t, "creation started", func() bool { f.mu.Lock(); defer f.mu.Unlock(); return f.acquire >= 1 })
		go cancel()
		close(gate)
		if sb := <-done; sb != nil {
			_ = sb.Release(context.Background())
		}
		p.Close()
		if n := f.liveCount(); n != 0 {
			t.Fatalf("iteration %d: %d leases left after Close (lost by a waiter that gave up)", i, n)
		}
		cancel()
	}
}
