package docker

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/internal/testenv"
	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/sandbox"
)

// TestRemoteEngineDelivery: an engine that cannot see this machine's
// files gets CLIs by copy and refuses the in-place workspace of outpost
// run with a configuration error that names the alternatives; a local
// engine mounts.
func TestRemoteEngineDelivery(t *testing.T) {
	host, flags := testenv.SSHEngine(t)
	ctx := context.Background()
	p, err := New(ctx, Options{Host: host, SSHFlags: flags, Version: "test"})
	require.NoError(t, err)
	e := &engine{ctx: ctx, p: p}
	defer e.Close()
	assert.Equal(t, sandbox.DeliverCopy, e.Delivery().Mode)
	_, _, err = e.Lease(nil, t.TempDir())
	require.Error(t, err)
	assert.True(t, outposterr.Is(err, outposterr.Configuration), "%v", err)
	assert.Contains(t, err.Error(), "not on this machine")
	assert.Contains(t, err.Error(), "--sandbox host")

	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if c, err := NewClient(""); err != nil {
		testenv.Missing(t, testenv.RequireDockerEnv, "Docker engine")
	} else if _, err := c.Ping(dctx); err != nil {
		testenv.Missing(t, testenv.RequireDockerEnv, "Docker engine")
	}
	lp, err := New(ctx, Options{Version: "test"})
	require.NoError(t, err)
	local := &engine{ctx: ctx, p: lp}
	defer local.Close()
	assert.Equal(t, sandbox.DeliverMount, local.Delivery().Mode)
}
