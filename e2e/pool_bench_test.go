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

// The pool benchmarks interleave the cases they compare within each
// iteration, alternating their order, so that every case sees the same
// load (this machine is shared); each case's median is reported as a
// metric, with the ratio of medians.

// warmPool returns a pool of e's leases of spec, started filling.
func warmPool(b *testing.B, e benchEnv, spec sandbox.Spec, size int) *pool.Pool {
	b.Helper()
	p, err := pool.New(e.p, pool.Options{Size: size})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(p.Close)
	p.Warm(spec)
	return p
}

// settle waits until p has n leases ready and no removal of a used lease
// under way, in the pool or in the engine (a released Docker container's
// removal ends after its Release): a measured turn finds its lease made,
// and the background work (the last turn's removal, the refill) does not
// run beside the measurement.
func settle(b *testing.B, p *pool.Pool, n int) {
	b.Helper()
	prov, _ := p.Unwrap().(interface{ Removing() int })
	removing := func() bool { return p.Stats().Removing > 0 || (prov != nil && prov.Removing() > 0) }
	for deadline := time.Now().Add(2 * time.Minute); p.Ready() < n || removing(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			b.Fatalf("the pool never settled with %d leases ready", n)
		}
	}
}

func median(d []time.Duration) float64 {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return float64(s[len(s)/2]) / 1e6
}

func quantile(d []time.Duration, q float64) float64 {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return float64(s[int(q*float64(len(s)-1))]) / 1e6
}

// alternate runs first and second in iteration i, in swapped order on
// odd iterations.
func alternate(i int, first, second func()) {
	if i%2 == 1 {
		first, second = second, first
	}
	first()
	second()
}

// requireReady fails b unless every turn through p found its lease made
// (the first may have waited for the pool's first lease).
func requireReady(b *testing.B, p *pool.Pool) {
	b.Helper()
	if st := p.Stats(); st.Waited > 1 || st.Cold > 0 {
		b.Fatalf("a turn did not find its lease ready: %+v", st)
	}
}

func timed(f func()) time.Duration {
	t0 := time.Now()
	f()
	return time.Since(t0)
}

func rawDockerRun(b *testing.B, e benchEnv) {
	rawRun(b, "run", "--rm", "-i", "--network", "none", "-e", fakecli.ChildEnv+"=1",
		"-v", e.exe+":"+fakeInContainer+":ro", docker.DefaultImage, fakeInContainer)
}

// BenchmarkPooledTurnVsDockerRun: a turn through a warm pool (its lease
// made before it asked; acquired, used once, released — the removal runs
// in the background) against the same binary run by raw `docker run --rm
// -i`, interleaved.
func BenchmarkPooledTurnVsDockerRun(b *testing.B) {
	e := newBenchEnv(b)
	p := warmPool(b, e, e.turn.Spec, 1)
	turn := e.turn
	turn.Provider = p
	var pooled, raw []time.Duration
	for i := 0; i < b.N; i++ {
		cases := []func(){
			func() {
				settle(b, p, 1)
				pooled = append(pooled, timed(func() {
					if _, err := harness.Run(context.Background(), turn); err != nil {
						b.Fatal(err)
					}
				}))
			},
			func() {
				settle(b, p, 1)
				raw = append(raw, timed(func() { rawDockerRun(b, e) }))
			},
		}
		alternate(i, cases[0], cases[1])
	}
	requireReady(b, p)
	b.ReportMetric(median(pooled), "pooled-ms")
	b.ReportMetric(median(raw), "docker-run-ms")
	b.ReportMetric(median(pooled)/median(raw), "ratio")
}

// BenchmarkPoolAcquire measures Acquire of a ready lease alone and
// reports its p50 and p99 (the release and the refill are off the clock).
func BenchmarkPoolAcquire(b *testing.B) {
	e := newBenchEnv(b)
	p := warmPool(b, e, e.turn.Spec, 2)
	var took []time.Duration
	for b.Loop() {
		b.StopTimer()
		settle(b, p, 2)
		b.StartTimer()
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
	b.ReportMetric(quantile(took, 0.50), "p50-ms")
	b.ReportMetric(quantile(took, 0.99), "p99-ms")
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

// BenchmarkGatewayTurns: per iteration, interleaved in rotating order, a
// cold Docker turn whose lease reaches the default gateway (the socket
// forward: a supervised socat started by the container's entrypoint, which
// reports on the lifeline attach once it listens), the same cold turn
// without it,
// the gateway turn through a warm pool, and raw `docker run --rm -i`.
// A turn's clock stops when harness.Run returns (its lease's container has
// stopped; the engine may still be removing it); the "-removed" metrics
// run on until the provider has seen the container removed, the clock
// `docker run --rm` has.
func BenchmarkGatewayTurns(b *testing.B) {
	e := newBenchEnv(b)
	spec := gatewaySpec(b, e)
	p := warmPool(b, e, spec, 1)
	gwTurn := e.turn
	gwTurn.Spec = spec
	pooledTurn := gwTurn
	pooledTurn.Provider = p
	run := func(t harness.Turn) func() {
		return func() {
			if _, err := harness.Run(context.Background(), t); err != nil {
				b.Fatal(err)
			}
		}
	}
	names := []string{"cold-gateway", "cold-plain", "pooled-gateway", "docker-run"}
	fns := []func(){run(gwTurn), run(e.turn), run(pooledTurn), func() { rawDockerRun(b, e) }}
	took := make([][]time.Duration, len(fns))
	removed := make([][]time.Duration, len(fns))
	for i := 0; i < b.N; i++ {
		for k := range fns {
			c := (i + k) % len(fns)
			settle(b, p, 1)
			t0 := time.Now()
			fns[c]()
			took[c] = append(took[c], time.Since(t0))
			if err := e.p.AwaitRemovals(context.Background()); err != nil {
				b.Fatal(err)
			}
			removed[c] = append(removed[c], time.Since(t0))
		}
	}
	for c, n := range names {
		b.ReportMetric(median(took[c]), n+"-ms")
	}
	b.ReportMetric(median(removed[0]), "cold-gateway-removed-ms")
	b.ReportMetric(median(removed[1]), "cold-plain-removed-ms")
	b.ReportMetric(median(removed[0])/median(took[3]), "cold-gateway-removed/docker-run")
	b.ReportMetric(median(took[0])/median(took[3]), "cold-gateway/docker-run")
	b.ReportMetric(median(took[2])/median(took[3]), "pooled-gateway/docker-run")
}
