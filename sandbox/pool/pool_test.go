package pool_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/outpost-dev/outpost/sandbox"
	"github.com/outpost-dev/outpost/sandbox/pool"
)

// fakeProvider counts the leases it made and those still alive.
type fakeProvider struct {
	mu      sync.Mutex
	n       int
	live    map[string]*fakeLease
	specs   map[string]sandbox.Spec
	gate    chan struct{} // non-nil: Acquire waits for it (or ctx)
	relGate chan struct{} // non-nil: Release waits for it
	fail    error
	acquire int
}

func newFake() *fakeProvider {
	return &fakeProvider{live: map[string]*fakeLease{}, specs: map[string]sandbox.Spec{}}
}

func (f *fakeProvider) Name() string { return "fake" }

func (f *fakeProvider) Acquire(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	f.mu.Lock()
	f.acquire++
	gate, fail := f.gate, f.fail
	f.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if fail != nil {
		return nil, fail
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
	l := &fakeLease{f: f, id: fmt.Sprintf("lease-%d", f.n)}
	f.live[l.id] = l
	f.specs[l.id] = spec
	return l, nil
}

func (f *fakeProvider) spec(id string) sandbox.Spec {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.specs[id]
}

func (f *fakeProvider) liveCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.live)
}

type fakeLease struct {
	f    *fakeProvider
	id   string
	mu   sync.Mutex
	gone bool
}

func (l *fakeLease) ID() string { return l.id }
func (l *fakeLease) Exec(context.Context, sandbox.Command) (sandbox.Process, error) {
	return nil, errors.New("not here")
}
func (l *fakeLease) CopyIn(context.Context, string, io.Reader) error { return nil }
func (l *fakeLease) CopyOut(context.Context, string) (io.ReadCloser, error) {
	return nil, errors.New("not here")
}
func (l *fakeLease) Home() string { return "/home" }
func (l *fakeLease) Root() string { return "/workspace" }
func (l *fakeLease) Release(context.Context) error {
	l.f.mu.Lock()
	gate := l.f.relGate
	l.f.mu.Unlock()
	if gate != nil {
		<-gate
	}
	l.f.mu.Lock()
	defer l.f.mu.Unlock()
	delete(l.f.live, l.id)
	return nil
}
func (l *fakeLease) Unisolated() bool { return true }

func (l *fakeLease) Gone(context.Context) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.gone {
		return "removed"
	}
	return ""
}

// waitFor polls cond until it holds (a condition, not a duration: the
// bound only keeps a broken pool from hanging the test run).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
	}
}

var spec = sandbox.Spec{Image: "img", Network: "none", Env: map[string]string{"PATH": "/bin"}}

func newPool(t *testing.T, f sandbox.Provider, o pool.Options) *pool.Pool {
	t.Helper()
	p, err := pool.New(f, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

func TestAcquireHandsOutReadyLeasesOnceAndRefills(t *testing.T) {
	f := newFake()
	p := newPool(t, f, pool.Options{Size: 2})
	p.Warm(spec)
	waitFor(t, "two leases ready", func() bool { return p.Ready() == 2 })
	seen := map[string]bool{}
	for i := range 6 {
		waitFor(t, "refilled", func() bool { return p.Ready() == 2 })
		sb, err := p.Acquire(context.Background(), spec)
		if err != nil {
			t.Fatal(err)
		}
		if seen[sb.ID()] {
			t.Fatalf("turn %d got lease %s a second time", i, sb.ID())
		}
		seen[sb.ID()] = true
		if got := f.spec(sb.ID()); got.Image != spec.Image || got.Network != spec.Network {
			t.Fatalf("lease made for spec %+v", got)
		}
		if err := sb.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if st := p.Stats(); st.Warm != 6 || st.Cold != 0 {
		t.Fatalf("stats %+v, want 6 warm acquisitions", st)
	}
	p.Close()
	if n := f.liveCount(); n != 0 {
		t.Fatalf("%d leases left after Close", n)
	}
	p.Close() // idempotent
	if _, err := p.Acquire(context.Background(), spec); err == nil {
		t.Fatal("Acquire after Close succeeded")
	}
}

func TestConcurrentTurnsNeverShareALease(t *testing.T) {
	f := newFake()
	p := newPool(t, f, pool.Options{Size: 3})
	var mu sync.Mutex
	seen := map[string]int{}
	var wg sync.WaitGroup
	for range 40 {
		wg.Go(func() {
			sb, err := p.Acquire(context.Background(), spec)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			seen[sb.ID()]++
			mu.Unlock()
			_ = sb.Release(context.Background())
		})
	}
	wg.Wait()
	if len(seen) != 40 {
		t.Fatalf("40 turns got %d distinct leases", len(seen))
	}
	p.Close()
	if n := f.liveCount(); n != 0 {
		t.Fatalf("%d leases left after Close", n)
	}
}

func TestSpecsArePooledApart(t *testing.T) {
	f := newFake()
	p := newPool(t, f, pool.Options{Size: 2})
	other := spec
	other.Image = "other"
	p.Warm(spec)
	waitFor(t, "two leases ready", func() bool { return p.Ready() == 2 })
	sb, err := p.Acquire(context.Background(), other)
	if err != nil {
		t.Fatal(err)
	}
	if got := f.spec(sb.ID()).Image; got != "other" {
		t.Fatalf("a turn of image other got a lease of %q", got)
	}
}

func TestCloseReleasesReadyAndCancelsCreations(t *testing.T) {
	f := newFake()
	p := newPool(t, f, pool.Options{Size: 3})
	p.Warm(spec)
	waitFor(t, "three leases ready", func() bool { return p.Ready() == 3 })
	f.mu.Lock()
	f.gate = make(chan struct{}) // the refill hangs until cancelled
	f.mu.Unlock()
	sb, err := p.Acquire(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a refill under way", func() bool { f.mu.Lock(); defer f.mu.Unlock(); return f.acquire == 4 })
	p.Close() // returns once the hanging creation saw its cancellation
	if n := f.liveCount(); n != 1 {
		t.Fatalf("%d leases alive after Close, want only the one handed out", n)
	}
	_ = sb.Release(context.Background())
}

func TestCloseReleasesWhatACreationMadeAfterIt(t *testing.T) {
	f := newFake()
	gate := make(chan struct{})
	f.gate = gate
	// A provider that finishes its creation although cancelled.
	p := newPool(t, &ignoresCancel{f}, pool.Options{Size: 1, ReleaseTimeout: time.Minute})
	p.Warm(spec)
	waitFor(t, "creation started", func() bool { f.mu.Lock(); defer f.mu.Unlock(); return f.acquire == 1 })
	closed := make(chan struct{})
	go func() { p.Close(); close(closed) }()
	close(gate)
	<-closed
	if n := f.liveCount(); n != 0 {
		t.Fatalf("%d leases left after Close", n)
	}
}

// ignoresCancel creates its lease even after the context ended.
type ignoresCancel struct{ *fakeProvider }

func (i *ignoresCancel) Acquire(_ context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	return i.fakeProvider.Acquire(context.Background(), spec)
}

func TestIdleLeasesAreReleased(t *testing.T) {
	f := newFake()
	p := newPool(t, f, pool.Options{Size: 2, IdleTimeout: time.Millisecond})
	p.Warm(spec)
	waitFor(t, "leases made", func() bool { return p.Stats().Created == 2 })
	waitFor(t, "idle leases released", func() bool { return f.liveCount() == 0 && p.Ready() == 0 })
	// Asked again, the pool fills again.
	sb, err := p.Acquire(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	_ = sb.Release(context.Background())
	waitFor(t, "released again", func() bool { return f.liveCount() == 0 })
}

func TestCancelledWaitKeepsItsLeaseInThePool(t *testing.T) {
	f := newFake()
	gate := make(chan struct{})
	f.gate = gate
	p := newPool(t, f, pool.Options{Size: 1})
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := p.Acquire(ctx, spec)
		errc <- err
	}()
	waitFor(t, "creation started", func() bool { f.mu.Lock(); defer f.mu.Unlock(); return f.acquire >= 1 })
	cancel()
	if err := <-errc; err == nil {
		t.Fatal("a cancelled Acquire succeeded")
	}
	close(gate)
	waitFor(t, "the lease made meanwhile is ready", func() bool { return p.Ready() == 1 })
	p.Close()
	if n := f.liveCount(); n != 0 {
		t.Fatalf("%d leases left after Close", n)
	}
}

func TestVanishedLeaseIsSkipped(t *testing.T) {
	f := newFake()
	p := newPool(t, f, pool.Options{Size: 1})
	p.Warm(spec)
	waitFor(t, "a lease ready", func() bool { return p.Ready() == 1 })
	f.mu.Lock()
	for _, l := range f.live {
		l.mu.Lock()
		l.gone = true
		l.mu.Unlock()
	}
	f.mu.Unlock()
	sb, err := p.Acquire(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	if sandbox.GoneReason(context.Background(), sb) != "" {
		t.Fatal("handed out a lease that vanished")
	}
}

func TestCreationFailureReachesTheTurnWithoutALoop(t *testing.T) {
	f := newFake()
	f.fail = errors.New("no image")
	p := newPool(t, f, pool.Options{Size: 2})
	if _, err := p.Acquire(context.Background(), spec); err == nil || err.Error() != "no image" {
		t.Fatalf("err %v, want the provider's", err)
	}
	// The background creations failed too, and stopped.
	waitFor(t, "creations ended", func() bool { f.mu.Lock(); defer f.mu.Unlock(); return f.acquire >= 2 })
	p.Close()
	f.mu.Lock()
	n := f.acquire
	f.mu.Unlock()
	if n > 3 {
		t.Fatalf("%d creation attempts for a spec that cannot be made", n)
	}
}

func TestSizeMustBePositive(t *testing.T) {
	if _, err := pool.New(newFake(), pool.Options{}); err == nil {
		t.Fatal("a pool of 0 leases was accepted")
	}
}

func TestReleaseOfAHandedOutLeaseDoesNotHoldTheTurn(t *testing.T) {
	f := newFake()
	p := newPool(t, f, pool.Options{Size: 1})
	sb, err := p.Acquire(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	if u, ok := sb.(sandbox.Unisolated); !ok || !u.Unisolated() {
		t.Fatal("the handed-out lease hides that it is unisolated")
	}
	gate := make(chan struct{})
	f.mu.Lock()
	f.relGate = gate // the container's removal hangs
	f.mu.Unlock()
	if err := sb.Release(context.Background()); err != nil { // returns: the removal runs in the background
		t.Fatal(err)
	}
	if err := sb.Release(context.Background()); err != nil { // idempotent
		t.Fatal(err)
	}
	if st := p.Stats(); st.Removing != 1 {
		t.Fatalf("stats %+v, want one removal under way", st)
	}
	close(gate)
	waitFor(t, "the removal done", func() bool { return p.Stats().Removing == 0 })
	p.Close() // waits for the removal
	if n := f.liveCount(); n != 0 {
		t.Fatalf("%d leases left after Close", n)
	}
}
