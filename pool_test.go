package outpost_test

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost"
	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/agents"
	"github.com/outpost-dev/outpost/batch"
	"github.com/outpost-dev/outpost/internal/fakecli"
	"github.com/outpost-dev/outpost/sandbox"
)

// countingKind is the host kind whose provider counts the leases it
// made, those alive and those released.
type counting struct {
	mu       sync.Mutex
	live     map[string]bool
	released []string
}

func (c *counting) liveCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.live)
}

type countingEngine struct {
	sandbox.Engine
	c *counting
}

func (e countingEngine) Lease(cli *sandbox.CLI, ws string) (sandbox.Provider, sandbox.Spec, error) {
	p, spec, err := e.Engine.Lease(cli, ws)
	return countingProvider{p, e.c}, spec, err
}

type countingProvider struct {
	sandbox.Provider
	c *counting
}

func (p countingProvider) Acquire(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	sb, err := p.Provider.Acquire(ctx, spec)
	if err != nil {
		return nil, err
	}
	p.c.mu.Lock()
	p.c.live[sb.ID()] = true
	p.c.mu.Unlock()
	return countingLease{sb, p.c}, nil
}

type countingLease struct {
	sandbox.Sandbox
	c *counting
}

func (l countingLease) Release(ctx context.Context) error {
	l.c.mu.Lock()
	if l.c.live[l.ID()] {
		delete(l.c.live, l.ID())
		l.c.released = append(l.c.released, l.ID())
	}
	l.c.mu.Unlock()
	return l.Sandbox.Release(ctx)
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Minute); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
	}
}

// TestRunnerPoolHandsEachTurnALeaseMadeBeforeIt: with Options.Pool, each
// turn takes a lease the pool made before the turn asked, never one
// another turn used, and closing the runner leaves no lease.
func TestRunnerPoolHandsEachTurnALeaseMadeBeforeIt(t *testing.T) {
	exe, err := os.Executable()
	require.NoError(t, err)
	reg := agents.New()
	require.NoError(t, reg.Register(agents.Agent{Name: "fake", New: func() adapters.Adapter { return fakecli.New(exe) }}))
	c := &counting{live: map[string]bool{}}
	host := outpost.SandboxKinds()["host"]
	kind := host
	kind.Name = "counting"
	kind.Open = func(ctx context.Context, cfg sandbox.Config) (sandbox.Engine, error) {
		e, err := host.Open(ctx, cfg)
		if err != nil {
			return nil, err
		}
		return countingEngine{e, c}, nil
	}
	const size = 2
	r, err := outpost.New(context.Background(), outpost.Options{Project: t.TempDir(), NoStore: true, Agents: reg,
		Sandbox: outpost.SandboxOptions{Kind: "counting"}, Sandboxes: sandbox.Kinds{"counting": kind},
		Getenv: func(k string) string {
			if k == "PATH" {
				return os.Getenv("PATH")
			}
			return ""
		}, TempDir: t.TempDir(), Pool: outpost.PoolOptions{Size: size}})
	require.NoError(t, err)
	defer r.Close()
	ctx := context.Background()
	script := `emit {"type":"finished","ok":true}`

	// The first turn waits for the pool's first lease; later ones find
	// theirs ready.
	releasedCount := func() int { c.mu.Lock(); defer c.mu.Unlock(); return len(c.released) }
	for i := range 4 {
		if i > 0 {
			waitUntil(t, "the last turn's lease removed and the pool refilled", func() bool {
				return releasedCount() == i && c.liveCount() == size
			})
		}
		_, err = r.Run(ctx, outpost.Turn{Agent: "fake", Prompt: script})
		require.NoError(t, err)
	}
	st := r.PoolStats()
	assert.Equal(t, 3, st.Warm, "every turn after the first took a lease made before it asked: %+v", st)
	waitUntil(t, "the last turn's lease removed", func() bool { return releasedCount() == 4 })
	c.mu.Lock()
	released := append([]string(nil), c.released...)
	c.mu.Unlock()
	seen := map[string]bool{}
	for _, id := range released {
		assert.False(t, seen[id], "lease %s served two turns", id)
		seen[id] = true
	}

	// A batch draws on the same pool.
	recs, err := r.Batch(ctx, []batch.Job{{ID: "a", Agent: "fake", Prompt: script}, {ID: "b", Agent: "fake", Prompt: script}},
		outpost.BatchOptions{Options: batch.Options{Concurrency: 2}})
	require.NoError(t, err)
	for _, rec := range recs {
		assert.True(t, rec.Outcome.OK, "%+v", rec)
	}

	r.Close()
	assert.Zero(t, c.liveCount(), "closing the runner released every pooled lease")
}

func TestRunnerRefusesANegativePool(t *testing.T) {
	_, err := outpost.New(context.Background(), outpost.Options{Project: t.TempDir(), NoStore: true,
		Pool: outpost.PoolOptions{Size: -1}})
	assert.ErrorContains(t, err, "must not be negative")
}
