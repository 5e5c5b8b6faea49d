package docker

import (
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/sandbox"
)

// A CPU limit so small that it rounds to NanoCPUs 0 (no limit) is refused
// before the container is made, as the kubernetes kind refuses it; the
// smallest accepted one reaches the container as itself.
func TestTinyCPULimitIsRefused(t *testing.T) {
	p := &Provider{opts: Options{User: "1000:1000", Network: "none", Image: DefaultImage}, log: slog.New(slog.DiscardHandler)}
	for _, cpus := range []float64{1e-10, 0.004} {
		_, err := p.plan(sandbox.Spec{CPUs: cpus})
		require.Error(t, err, "cpus %v", cpus)
		assert.True(t, outposterr.Is(err, outposterr.Configuration), "%v", err)
	}
	pl, err := p.plan(sandbox.Spec{CPUs: sandbox.MinCPUs})
	require.NoError(t, err)
	_, hc := p.containerConfig(sandbox.Spec{CPUs: sandbox.MinCPUs}, pl, &lease{p: p, leaseID: "0123456789abcdef"})
	assert.Equal(t, int64(1e7), hc.NanoCPUs)
}
