package docker_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/sandbox"
	"github.com/outpost-dev/outpost/sandbox/docker"
)

// BenchmarkWarmExec runs `true` in an existing lease (exec create, attach,
// wait, close): the per-turn overhead of a warm session.
func BenchmarkWarmExec(b *testing.B) {
	p := benchProvider(b)
	sb, err := p.Acquire(context.Background(), sandbox.Spec{})
	require.NoError(b, err)
	b.Cleanup(func() { _ = sb.Release(context.Background()) })
	b.ResetTimer()
	for b.Loop() {
		pr, err := sb.Exec(context.Background(), sandbox.Command{Args: []string{"true"}})
		require.NoError(b, err)
		st, err := pr.Wait()
		require.NoError(b, err)
		require.True(b, st.Success())
		require.NoError(b, pr.Close())
	}
}

// BenchmarkColdCycle acquires a lease, runs `true` and releases it.
func BenchmarkColdCycle(b *testing.B) {
	p := benchProvider(b)
	for b.Loop() {
		sb, err := p.Acquire(context.Background(), sandbox.Spec{})
		require.NoError(b, err)
		pr, err := sb.Exec(context.Background(), sandbox.Command{Args: []string{"true"}})
		require.NoError(b, err)
		_, err = pr.Wait()
		require.NoError(b, err)
		require.NoError(b, pr.Close())
		require.NoError(b, sb.Release(context.Background()))
	}
}

func benchProvider(b *testing.B) *docker.Provider {
	b.Helper()
	p, err := docker.New(context.Background(), docker.Options{Network: "none", Version: "bench"})
	if err != nil {
		b.Skipf("docker engine unavailable: %v", err)
	}
	b.Cleanup(func() {
		_ = p.ReleaseAll(context.Background())
		_ = p.Close()
	})
	return p
}
