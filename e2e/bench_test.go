package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/harness"
	"github.com/outpost-dev/outpost/internal/fakecli"
	"github.com/outpost-dev/outpost/sandbox"
	"github.com/outpost-dev/outpost/sandbox/docker"
)

// The overhead benchmarks compare a turn through the harness with the same
// fake CLI run by the raw docker command, side by side in one run. The fake
// CLI prints a conversation, a result and a finished event.
const benchScript = `emit {"type":"conversation","id":"bench"}
emit {"type":"result","text":"ok"}
emit {"type":"finished","ok":true}`

type benchEnv struct {
	p    *docker.Provider
	exe  string
	turn harness.Turn
}

func newBenchEnv(b *testing.B) benchEnv {
	b.Helper()
	if _, err := exec.LookPath("docker"); err != nil {
		b.Skip("docker command not found")
	}
	p, err := docker.New(context.Background(), docker.Options{Network: "none", RunID: "bench-" + uuid.NewString(), Version: "bench"})
	if err != nil {
		b.Skipf("docker engine unavailable: %v", err)
	}
	b.Cleanup(func() { _ = p.ReleaseAll(context.Background()); _ = p.Close() })
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	return benchEnv{p: p, exe: exe, turn: harness.Turn{
		Adapter:  fakecli.New(fakeInContainer),
		Input:    adapters.Input{Prompt: benchScript},
		Provider: p,
		Spec:     sandbox.Spec{Mounts: []sandbox.Mount{{Source: exe, Target: fakeInContainer, ReadOnly: true}}},
	}}
}

func rawRun(b *testing.B, args ...string) {
	b.Helper()
	cmd := exec.Command("docker", args...)
	cmd.Stdin = strings.NewReader(benchScript)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), `"finished"`) {
		b.Fatalf("docker %v: %v\n%s", args, err, out)
	}
}

func BenchmarkWarmTurn(b *testing.B) {
	e := newBenchEnv(b)
	sb, err := e.p.Acquire(context.Background(), e.turn.Spec)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = sb.Release(context.Background()) })
	b.Run("harness", func(b *testing.B) {
		turn := e.turn
		turn.Sandbox = sb
		for b.Loop() {
			if _, err := harness.Run(context.Background(), turn); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("raw-docker-exec", func(b *testing.B) {
		for b.Loop() {
			rawRun(b, "exec", "-i", "-e", fakecli.ChildEnv+"=1", sb.ID(), fakeInContainer)
		}
	})
}

func BenchmarkColdTurn(b *testing.B) {
	e := newBenchEnv(b)
	b.Run("harness", func(b *testing.B) {
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

// BenchmarkParallel32 runs 32 cold turns at once per iteration; every turn
// must succeed.
func BenchmarkParallel32(b *testing.B) {
	e := newBenchEnv(b)
	par := func(b *testing.B, f func() error) {
		for b.Loop() {
			var wg sync.WaitGroup
			errs := make(chan error, 32)
			for range 32 {
				wg.Go(func() {
					if err := f(); err != nil {
						errs <- err
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				b.Fatal(err)
			}
		}
	}
	b.Run("harness", func(b *testing.B) {
		par(b, func() error { _, err := harness.Run(context.Background(), e.turn); return err })
		b.ReportMetric(float64(peakRSS())/(1<<20), "peak-RSS-MiB")
	})
	b.Run("raw-docker-run", func(b *testing.B) {
		par(b, func() error {
			cmd := exec.Command("docker", "run", "--rm", "-i", "--network", "none", "-e", fakecli.ChildEnv+"=1",
				"-v", e.exe+":"+fakeInContainer+":ro", docker.DefaultImage, fakeInContainer)
			cmd.Stdin = strings.NewReader(benchScript)
			out, err := cmd.CombinedOutput()
			if err != nil {
				return fmt.Errorf("%w: %s", err, out)
			}
			return nil
		})
	})
}

// peakRSS is this process's peak resident set size in bytes (VmHWM).
func peakRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "VmHWM:") {
			var kb int64
			_, _ = fmt.Sscanf(strings.TrimSpace(strings.TrimPrefix(l, "VmHWM:")), "%d", &kb)
			return kb << 10
		}
	}
	return 0
}

// BenchmarkConcurrent64 starts 64 cold turns at once with the default
// gateway path (the lease reaches the runner's gateway socket through its
// forward, no network), 64 the same without the forward, and 64 raw
// `docker run --rm -i` of the same binary started the same way (one
// goroutine each), interleaved: per iteration, one batch of each, in
// rotating order. Every turn must succeed. While a harness batch runs,
// this process's resident memory and open file descriptors are sampled;
// their peak over the level before the batch, divided by 64, is what a
// lease costs the runner (the largest of all batches is reported).
func BenchmarkConcurrent64(b *testing.B) {
	const n = 64
	e := newBenchEnv(b)
	gwTurn := e.turn
	gwTurn.Spec = gatewaySpec(b, e)
	var rssPer, fdPer []float64 // per lease, each harness batch
	batch := func(f func() error) time.Duration {
		t0 := time.Now()
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for range n {
			wg.Go(func() {
				if err := f(); err != nil {
					errs <- err
				}
			})
		}
		wg.Wait()
		took := time.Since(t0)
		close(errs)
		for err := range errs {
			b.Fatal(err)
		}
		return took
	}
	harnessBatch := func(turn harness.Turn) time.Duration {
		runtime.GC()
		rss0, fd0 := procRSS(), procFDs()
		stop := make(chan struct{})
		peak := make(chan [2]int64, 1)
		go func() {
			var rss, fds int64
			for {
				rss, fds = max(rss, procRSS()), max(fds, procFDs())
				select {
				case <-stop:
					peak <- [2]int64{rss, fds}
					return
				case <-time.After(5 * time.Millisecond):
				}
			}
		}()
		took := batch(func() error { _, err := harness.Run(context.Background(), turn); return err })
		close(stop)
		p := <-peak
		rssPer = append(rssPer, float64(p[0]-rss0)/n/(1<<20))
		fdPer = append(fdPer, float64(p[1]-fd0)/n)
		return took
	}
	rawBatch := func() time.Duration {
		return batch(func() error {
			cmd := exec.Command("docker", "run", "--rm", "-i", "--network", "none", "-e", fakecli.ChildEnv+"=1",
				"-v", e.exe+":"+fakeInContainer+":ro", docker.DefaultImage, fakeInContainer)
			cmd.Stdin = strings.NewReader(benchScript)
			out, err := cmd.CombinedOutput()
			if err == nil && !strings.Contains(string(out), `"finished"`) {
				err = errors.New("no finished event")
			}
			if err != nil {
				return fmt.Errorf("docker run: %w: %s", err, out)
			}
			return nil
		})
	}
	fns := []func() time.Duration{
		func() time.Duration { return harnessBatch(gwTurn) },
		func() time.Duration { return harnessBatch(e.turn) },
		rawBatch,
	}
	took := make([][]time.Duration, len(fns))
	for i := 0; i < b.N; i++ {
		for k := range fns {
			c := (i + k) % len(fns)
			took[c] = append(took[c], fns[c]())
		}
	}
	b.ReportMetric(median(took[0]), "gateway-ms")
	b.ReportMetric(median(took[1]), "plain-ms")
	b.ReportMetric(median(took[2]), "docker-run-ms")
	b.ReportMetric(median(took[0])/median(took[2]), "gateway/docker-run")
	b.ReportMetric(median(took[1])/median(took[2]), "plain/docker-run")
	b.ReportMetric(slices.Max(rssPer), "RSS-MiB/lease")
	b.ReportMetric(slices.Max(fdPer), "fds/lease")
}

// procRSS is this process's resident set size in bytes (VmRSS).
func procRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "VmRSS:") {
			var kb int64
			_, _ = fmt.Sscanf(strings.TrimSpace(strings.TrimPrefix(l, "VmRSS:")), "%d", &kb)
			return kb << 10
		}
	}
	return 0
}

// procFDs is the number of this process's open file descriptors.
func procFDs() int64 {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return 0
	}
	return int64(len(ents))
}
