package e2e

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/outpost-dev/outpost/gateway"
	"github.com/outpost-dev/outpost/harness"
	"github.com/outpost-dev/outpost/internal/fakecli"
	"github.com/outpost-dev/outpost/sandbox"
	"github.com/outpost-dev/outpost/sandbox/docker"
	"github.com/outpost-dev/outpost/sandbox/pool"
)

// warmPool returns a pool of e's leases with size leases ready.
func warmPool(b *testing.B, e benchEnv, spec sandbox.Spec, size int) *pool.Pool {
	b.Helper()
	p, err := pool.New(e.p, pool.Options{Size: size})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(p.Close)
	p.Warm(spec)
	waitReady(b, p, size)
	return p
}

// waitReady waits, off the clock, until p has n leases ready: the
// benchmarks measure a turn that finds its lease made.
func waitReady(b *testing.B, p *pool.Pool, n int) {
	b.Helper()
	b.StopTimer()
	defer b.StartTimer()
	for deadline := time.Now().Add(time.Minute); p.Ready() < n; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			b.Fatalf("the pool never had %d leases ready", n)
		}
	}
}

// BenchmarkPooledTurn: a turn through a warm pool (the lease made before
// the turn asked; acquired, used once, released) against the same binary
// run by raw `docker run --rm -i`, side by side.
func BenchmarkPooledTurn(b *testing.B) {
	e := newBenchEnv(b)
	b.Run("harness-pool", func(b *testing.B) {
		p := warmPool(b, e, e.turn.Spec, 1)
		turn := e.turn
		turn.Provider = p
		for b.Loop() {
			waitReady(b, p, 1)
			if _, err := harness.Run(context.Background(), turn); err != nil {
				b.Fatal(err)
			}
		}
		if st := p.Stats(); st.Waited+st.Cold > 0 {
			b.Fatalf("a turn did not find its lease ready: %+v", st)
		}
	})
	b.Run("raw-docker-run", func(b *testing.B) {
		for b.Loop() {
			rawRun(b, "run", "--rm", "-i", "--network", "none", "-e", fakecli.ChildEnv+"=1",
				"-v", e.exe+":"+fakeInContainer+":ro", docker.DefaultImage, fakeInContainer)
		}
	})
}

// BenchmarkPoolAcquire measures Acquire of a ready lease alone and
// reports its p50 and p99 (the release and the refill are off the clock).
func BenchmarkPoolAcquire(b *testing.B) {
	e := newBenchEnv(b)
	p := warmPool(b, e, e.turn.Spec, 2)
	var took []time.Duration
	for b.Loop() {
		waitReady(b, p, 2)
		t0 := time.Now()
		sb, err := p.Acquire(context.Background(), e.turn.Spec)
		took = append(took, time.Since(t0))
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		_ = sb.Release(context.Background())
		b.StartTimer()
	}
	sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
	q := func(f float64) float64 { return float64(took[int(f*float64(len(took)-1))]) / 1e6 }
	b.ReportMetric(q(0.50), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
}

// gatewaySpec is e's spec as the runner builds it with the default
// gateway: the runner's gateway socket forwarded onto the lease's
// loopback, no network.
func gatewaySpec(b *testing.B, e benchEnv) sandbox.Spec {
	b.Helper()
	gw, err := gateway.New(gateway.Options{Upstreams: []string{"http://127.0.0.1:9"}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = gw.Close() })
	dir, err := os.MkdirTemp("", "outpost-bench-gw-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = os.RemoveAll(dir) })
	sock := filepath.Join(dir, "gateway.sock")
	if err := gw.ListenUnix(sock); err != nil {
		b.Fatal(err)
	}
	spec := e.turn.Spec
	spec.Network = "none"
	spec.Forwards = []sandbox.Forward{{Socket: sock, Port: gateway.DefaultLeasePort}}
	return spec
}

// BenchmarkColdTurnGateway: a cold Docker turn whose lease reaches the
// default gateway (the socket forward: a supervised socat started by the
// container's entrypoint, and the wait until it listens), the same turn
// without it, and raw `docker run --rm -i`, side by side.
func BenchmarkColdTurnGateway(b *testing.B) {
	e := newBenchEnv(b)
	spec := gatewaySpec(b, e)
	b.Run("harness-gateway", func(b *testing.B) {
		turn := e.turn
		turn.Spec = spec
		for b.Loop() {
			if _, err := harness.Run(context.Background(), turn); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("harness-plain", func(b *testing.B) {
		for b.Loop() {
			if _, err := harness.Run(context.Background(), e.turn); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("raw-docker-run", func(b *testing.B) {
		for b.Loop() {
			rawRun(b, "run", "--rm", "-i", "--network", "none", "-e", fakecli.ChildEnv+"=1",
				"-v", e.exe+":"+fakeInContainer+":ro", docker.DefaultImage, fakeInContainer)
		}
	})
}

// BenchmarkPooledTurnGateway: a turn with the default gateway through a
// warm pool: the forwarder started and waited for with the lease, before
// the turn asked.
func BenchmarkPooledTurnGateway(b *testing.B) {
	e := newBenchEnv(b)
	spec := gatewaySpec(b, e)
	p := warmPool(b, e, spec, 1)
	turn := e.turn
	turn.Spec, turn.Provider = spec, p
	for b.Loop() {
		waitReady(b, p, 1)
		if _, err := harness.Run(context.Background(), turn); err != nil {
			b.Fatal(err)
		}
	}
}
