// Package pool keeps leases created and started ahead of demand: a [Pool]
// wraps a [sandbox.Provider] and is one itself. Acquire hands out a lease
// that was made before the turn asked (the container created and started,
// the CLI mounted or copied in and version-checked by the wrapped
// provider), and the pool makes another in the background.
//
// A pooled lease is used once: Acquire hands each lease out exactly once,
// the caller releases it as any lease, and the pool never takes it back. A
// pool therefore saves the lease's creation, never shares a lease between
// turns. The Release of a handed-out lease returns at once and removes the
// lease in the background (a turn does not wait for its container's
// removal); Close waits for those removals.
//
// Poolable specs: a pooled lease is the lease a cold Acquire of the same
// [sandbox.Spec] would make, so leases are kept per spec (every field: the
// workspace bind mount, image, limits, network, user, mounts, hidden
// directories, forwards, the lease's environment). Whatever belongs to one
// turn must be applied after Acquire — the exec environment of each
// command, files copied in, credentials, gateway grants — which is how the
// harness works. A Spec that differs per turn (a per-turn Env, Forwards or
// Labels value) still works but gains nothing: every turn's spec finds its
// own empty set of leases ([Key] is what is compared). The one spec that
// is not pooled is one Key cannot encode (a CPUs value that is NaN or
// infinite, which JSON cannot hold): Acquire passes it to the wrapped
// provider, and Stats does not count it.
//
// At rest a pool holds up to Size started leases of the specs asked for
// recently (each costs what an idle lease costs: a container or pod running
// "sleep", its memory and nothing else). They are released when no turn
// asked for their spec for IdleTimeout, and all of them on Close.
package pool

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/sandbox"
)

// DefaultIdleTimeout is how long pooled leases of a spec no turn asked for
// are kept when Options.IdleTimeout is zero.
const DefaultIdleTimeout = 5 * time.Minute

// DefaultReleaseTimeout bounds Close's release of the pooled leases.
const DefaultReleaseTimeout = 30 * time.Second

// Options configure a [Pool].
type Options struct {
	// Size is how many started leases the pool keeps ready, across all
	// specs (at least 1).
	Size int
	// IdleTimeout releases the ready leases of a spec no turn asked for
	// in that long (0: DefaultIdleTimeout; negative: kept until Close).
	IdleTimeout time.Duration
	// ReleaseTimeout bounds Close (0: DefaultReleaseTimeout).
	ReleaseTimeout time.Duration
	// Logger receives debug logs (nil: none).
	Logger *slog.Logger
}

// Pool is a provider that hands out leases created ahead of demand. It is
// safe for concurrent use. Close it.
type Pool struct {
	p    sandbox.Provider
	opts Options
	log  *slog.Logger

	ctx    context.Context // the background creations'; cancelled by Close
	cancel context.CancelFunc

	mu      sync.Mutex
	buckets map[string]*bucket
	pooled  int // ready and being created, across buckets
	closed  bool
	wg      sync.WaitGroup // background creations
	rel     sync.WaitGroup // background releases of handed-out leases
	stats   Stats
}

// Stats count what a pool did.
type Stats struct {
	// Warm counts acquisitions answered with a lease the pool had ready.
	Warm int
	// Waited counts acquisitions that waited for a lease being created
	// for them in the background.
	Waited int
	// Cold counts acquisitions the pool passed to the wrapped provider
	// because it was full of other specs' leases.
	Cold int
	// Created counts leases the pool created; Released those it released
	// unused (idle, closed, vanished).
	Created, Released int
	// Removing is the number of handed-out leases whose removal, after
	// their turn released them, is still under way.
	Removing int
}

// bucket is the pool of one spec.
type bucket struct {
	key      string
	spec     sandbox.Spec
	ready    []sandbox.Sandbox
	creating int
	waiters  []chan result
	failed   bool // a background creation failed: no refill until asked
	idle     *time.Timer
}

type result struct {
	sb  sandbox.Sandbox
	err error
}

// New returns a pool of p's leases. Nothing is created until the first
// Acquire (or Warm) of a spec.
func New(p sandbox.Provider, opts Options) (*Pool, error) {
	if opts.Size < 1 {
		return nil, outposterr.New(outposterr.Configuration, "a lease pool keeps at least 1 lease, not %d", opts.Size)
	}
	if opts.IdleTimeout == 0 {
		opts.IdleTimeout = DefaultIdleTimeout
	}
	if opts.ReleaseTimeout <= 0 {
		opts.ReleaseTimeout = DefaultReleaseTimeout
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Pool{p: p, opts: opts, log: log, ctx: ctx, cancel: cancel, buckets: map[string]*bucket{}}, nil
}

// Name is the wrapped provider's name.
func (p *Pool) Name() string { return p.p.Name() }

// Unwrap returns the wrapped provider.
func (p *Pool) Unwrap() sandbox.Provider { return p.p }

// Key identifies the leases of spec: two specs with the same key get
// interchangeable leases. Every field counts. It fails only for a spec
// JSON cannot encode (a NaN or infinite CPUs).
func Key(spec sandbox.Spec) (string, error) {
	b, err := json.Marshal(spec) // maps are encoded sorted
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// Stats returns what the pool did so far.
func (p *Pool) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stats
}

// Ready returns how many leases are ready, across specs.
func (p *Pool) Ready() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, b := range p.buckets {
		n += len(b.ready)
	}
	return n
}

// Warm starts filling the pool for spec without taking a lease: the leases
// of the first turns are then ready when they ask.
func (p *Pool) Warm(spec sandbox.Spec) {
	key, err := Key(spec)
	if err != nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	b := p.bucketLocked(key, spec)
	b.failed = false
	p.refillLocked(b)
}

// Acquire hands out a lease of spec made ahead of demand, or waits for
// the one being made; the pool then makes another. The lease is the
// caller's: it is never handed out again, and the caller releases it.
func (p *Pool) Acquire(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	key, err := Key(spec)
	if err != nil {
		return p.cold(ctx, spec)
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, outposterr.New(outposterr.Sandbox, "the lease pool is closed")
	}
	b := p.bucketLocked(key, spec)
	b.failed = false
	for len(b.ready) > 0 {
		sb := b.ready[0]
		b.ready = b.ready[1:]
		p.pooled--
		p.refillLocked(b)
		p.mu.Unlock()
		if why := sandbox.GoneReason(ctx, sb); why != "" {
			// Removed while it waited (docker rm, an evicted pod).
			p.log.Debug("pooled lease vanished", "lease", sb.ID(), "why", why)
			p.release(sb)
			p.mu.Lock()
			if p.closed {
				p.mu.Unlock()
				return nil, outposterr.New(outposterr.Sandbox, "the lease pool is closed")
			}
			// The spec's idle time may have run out meanwhile: the
			// expiry retired b, which makes nothing any more.
			b = p.bucketLocked(key, spec)
			b.failed = false
			continue
		}
		p.mu.Lock()
		p.stats.Warm++
		p.mu.Unlock()
		return p.handOut(sb), nil
	}
	if b.creating == 0 && p.pooled >= p.opts.Size {
		// The pool is full of other specs' leases: this turn goes cold.
		p.stats.Cold++
		p.mu.Unlock()
		return p.cold(ctx, spec)
	}
	ch := make(chan result, 1)
	b.waiters = append(b.waiters, ch)
	p.refillLocked(b)
	p.stats.Waited++
	p.mu.Unlock()
	select {
	case r := <-ch:
		if r.err != nil {
			return nil, r.err
		}
		return p.handOut(r.sb), nil
	case <-ctx.Done():
		p.mu.Lock()
		for i, w := range b.waiters {
			if w == ch {
				b.waiters = append(b.waiters[:i], b.waiters[i+1:]...)
				break
			}
		}
		p.mu.Unlock()
		// A lease handed over meanwhile goes back to the ready ones.
		select {
		case r := <-ch:
			if r.sb != nil {
				p.put(b, r.sb)
			}
		default:
		}
		return nil, outposterr.Wrap(outposterr.Sandbox, ctx.Err(), "wait for a pooled lease")
	}
}

func (p *Pool) cold(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	return p.p.Acquire(ctx, spec)
}

// bucketLocked returns key's bucket, made on first use, and restarts its
// idle timer.
func (p *Pool) bucketLocked(key string, spec sandbox.Spec) *bucket {
	b, ok := p.buckets[key]
	if !ok {
		b = &bucket{key: key, spec: spec}
		p.buckets[key] = b
	}
	if p.opts.IdleTimeout > 0 {
		if b.idle == nil {
			b.idle = time.AfterFunc(p.opts.IdleTimeout, func() { p.expire(b) })
		} else {
			b.idle.Reset(p.opts.IdleTimeout)
		}
	}
	return b
}

// refillLocked starts background creations until b has what its waiters
// need plus its share of the pool: ready, being created and waited for
// count against Size, waiters are always served.
func (p *Pool) refillLocked(b *bucket) {
	if p.closed || b.failed {
		return
	}
	for b.creating < len(b.waiters) || (p.pooled < p.opts.Size && len(b.ready)+b.creating-len(b.waiters) < p.opts.Size) {
		b.creating++
		p.pooled++
		p.wg.Add(1)
		go p.create(b)
	}
}

// create makes one lease of b's spec in the background.
func (p *Pool) create(b *bucket) {
	defer p.wg.Done()
	sb, err := p.p.Acquire(p.ctx, b.spec)
	p.mu.Lock()
	b.creating--
	p.pooled--
	if err == nil {
		p.stats.Created++
	}
	if p.closed {
		p.mu.Unlock()
		if sb != nil {
			p.release(sb)
		}
		return
	}
	if err != nil {
		p.log.Debug("pooled lease not created", "err", err)
		if len(b.waiters) > 0 {
			w := b.waiters[0]
			b.waiters = b.waiters[1:]
			w <- result{err: err}
		} else {
			// Until a turn asks again: a spec that cannot be made must
			// not be retried in a loop.
			b.failed = true
		}
		p.mu.Unlock()
		return
	}
	if len(b.waiters) > 0 {
		w := b.waiters[0]
		b.waiters = b.waiters[1:]
		p.refillLocked(b)
		// Sent under mu (w holds one result): a waiter that gave up and
		// no longer finds itself among the waiters finds the lease in w.
		w <- result{sb: sb}
		p.mu.Unlock()
		return
	}
	b.ready = append(b.ready, sb)
	p.pooled++
	p.refillLocked(b)
	p.mu.Unlock()
}

// put returns an unused lease to b's ready ones (a waiter that gave up).
func (p *Pool) put(b *bucket, sb sandbox.Sandbox) {
	p.mu.Lock()
	if p.closed || p.pooled >= p.opts.Size || p.buckets[b.key] != b {
		p.mu.Unlock()
		p.release(sb)
		return
	}
	b.ready = append(b.ready, sb)
	p.pooled++
	p.mu.Unlock()
}

// expire releases b's ready leases: no turn asked for its spec in
// IdleTimeout.
func (p *Pool) expire(b *bucket) {
	p.mu.Lock()
	if p.closed || len(b.waiters) > 0 {
		p.mu.Unlock()
		return
	}
	ready := b.ready
	b.ready = nil
	p.pooled -= len(ready)
	if b.creating == 0 && p.buckets[b.key] == b {
		delete(p.buckets, b.key)
	}
	// Creations still under way land in the bucket; the next expiry (or
	// Close) releases them.
	b.failed = true
	if b.creating > 0 {
		b.idle.Reset(p.opts.IdleTimeout)
	}
	p.mu.Unlock()
	if len(ready) > 0 {
		p.log.Debug("pooled leases idle, released", "count", len(ready))
	}
	p.releaseAll(ready)
}

func (p *Pool) release(sb sandbox.Sandbox) {
	p.releaseAll([]sandbox.Sandbox{sb})
}

// releaseAll releases leases concurrently, bounded, also after
// cancellation.
func (p *Pool) releaseAll(sbs []sandbox.Sandbox) {
	if len(sbs) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(p.ctx), p.opts.ReleaseTimeout)
	defer cancel()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for _, sb := range sbs {
		wg.Go(func() {
			if err := sb.Release(ctx); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	p.mu.Lock()
	p.stats.Released += len(sbs)
	p.mu.Unlock()
	if err := errors.Join(errs...); err != nil {
		p.log.Warn("release pooled leases", "err", err)
	}
}

// handOut wraps a lease the pool hands out: its Release runs in the
// background (the turn does not wait for the container's removal), and
// Close waits for it.
func (p *Pool) handOut(sb sandbox.Sandbox) sandbox.Sandbox {
	return &pooledLease{Sandbox: sb, p: p}
}

// pooledLease is a lease handed out by a pool.
type pooledLease struct {
	sandbox.Sandbox
	p    *Pool
	once sync.Once
}

// Release removes the lease in the background, bounded by the pool's
// ReleaseTimeout, also after cancellation; the pool's Close waits for it.
// A release that fails is logged. After Close, it releases at once.
func (l *pooledLease) Release(ctx context.Context) error {
	var err error
	l.once.Do(func() {
		p := l.p
		p.mu.Lock()
		closed := p.closed
		if !closed {
			p.rel.Add(1)
		}
		p.mu.Unlock()
		if closed {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.opts.ReleaseTimeout)
			defer cancel()
			err = l.Sandbox.Release(rctx)
			return
		}
		p.mu.Lock()
		p.stats.Removing++
		p.mu.Unlock()
		go func() {
			defer p.rel.Done()
			defer func() {
				p.mu.Lock()
				p.stats.Removing--
				p.mu.Unlock()
			}()
			rctx, cancel := context.WithTimeout(context.WithoutCancel(p.ctx), p.opts.ReleaseTimeout)
			defer cancel()
			if err := l.Sandbox.Release(rctx); err != nil {
				p.log.Warn("release a pooled lease after its turn", "lease", l.ID(), "err", err)
			}
		}()
	})
	return err
}

// Unwrap returns the wrapped lease.
func (l *pooledLease) Unwrap() sandbox.Sandbox { return l.Sandbox }

// Unisolated passes the wrapped lease's answer on.
func (l *pooledLease) Unisolated() bool {
	u, ok := l.Sandbox.(sandbox.Unisolated)
	return ok && u.Unisolated()
}

// Close stops refilling, cancels the creations under way, releases every
// lease the pool holds and waits for the background releases of those
// it handed out (a handed-out lease not released yet is its caller's). It is idempotent, bounded by Options.ReleaseTimeout, and
// works after cancellation. Acquire fails once it ran.
func (p *Pool) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	p.cancel()
	var ready []sandbox.Sandbox
	for _, b := range p.buckets {
		if b.idle != nil {
			b.idle.Stop()
		}
		ready = append(ready, b.ready...)
		b.ready = nil
		for _, w := range b.waiters {
			w <- result{err: outposterr.New(outposterr.Sandbox, "the lease pool is closed")}
		}
		b.waiters = nil
	}
	p.pooled = 0
	p.mu.Unlock()
	p.releaseAll(ready)
	// Creations under way were cancelled; what they still made is
	// released by create itself. Wait for them, bounded.
	done := make(chan struct{})
	go func() { p.wg.Wait(); p.rel.Wait(); close(done) }()
	t := time.NewTimer(p.opts.ReleaseTimeout)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		p.log.Warn("lease pool closed with lease creations still under way")
	}
}
