package outpost

import (
	"context"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/sandbox/docker"
	"github.com/outpost-dev/outpost/sandbox/kubernetes"
)

// TestHostRefusesLimitsByFlag: the host sandbox refuses each limit it
// cannot apply with a configuration error naming the kind and exactly the
// flags given; asking for no limit (negative) is what it does anyway.
func TestHostRefusesLimitsByFlag(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	for _, c := range []struct {
		o    SandboxOptions
		want string
	}{
		{SandboxOptions{CPUs: 1}, "the host sandbox cannot apply --cpus: "},
		{SandboxOptions{MemoryBytes: 1 << 30}, "the host sandbox cannot apply --memory: "},
		{SandboxOptions{Pids: 100}, "the host sandbox cannot apply --pids-limit: "},
		{SandboxOptions{CPUs: 1, MemoryBytes: 1 << 30, Pids: 100}, "the host sandbox cannot apply --cpus, --memory, --pids-limit: "},
		{SandboxOptions{CPUs: -1, MemoryBytes: 1 << 30}, "the host sandbox cannot apply --memory: "},
	} {
		_, err := openHost(context.Background(), c.o, log)
		require.Error(t, err, "%+v", c.o)
		assert.True(t, outposterr.Is(err, outposterr.Configuration), "%v", err)
		assert.ErrorContains(t, err, c.want)
	}
	e, err := openHost(context.Background(), SandboxOptions{CPUs: -1, MemoryBytes: -1, Pids: -1}, log)
	require.NoError(t, err, "no limit is what the host sandbox does")
	e.Close()
}

// TestSameDefaultLimits: pods get the Docker leases' default limits.
func TestSameDefaultLimits(t *testing.T) {
	assert.Equal(t, docker.DefaultCPUs, kubernetes.DefaultCPUs)
	assert.Equal(t, docker.DefaultMemoryBytes, kubernetes.DefaultMemoryBytes)
	assert.Equal(t, docker.DefaultPids, kubernetes.DefaultPids)
}
