package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"

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
