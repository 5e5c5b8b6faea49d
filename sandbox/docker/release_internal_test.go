package docker

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/events"
	"github.com/docker/docker/api/types/filters"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/internal/testenv"
	"github.com/outpost-dev/outpost/sandbox"
)

// localProvider is a provider of the local Docker engine, or skips.
func localProvider(t *testing.T) *Provider {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	p, err := New(ctx, Options{Network: "none", Version: "test"})
	if err != nil {
		testenv.Missing(t, testenv.RequireDockerEnv, "Docker engine ("+err.Error()+")")
	}
	t.Cleanup(func() {
		assert.NoError(t, p.ReleaseAll(context.Background()))
		_ = p.Close()
	})
	if _, err := p.cli.ImageInspect(ctx, DefaultImage); err != nil {
		testenv.Missing(t, testenv.RequireDockerEnv, "image "+DefaultImage)
	}
	return p
}

// Release cuts the lifeline and waits for the engine's own removal. A
// container that does not end by itself at the cut (here the lease's
// lifeline is swapped for a pipe, so the cut reaches no keeper; the real
// attach stays open until the test ends) is removed by force after
// removeGrace: Release still returns with the container gone.
func TestReleaseForcesAContainerThatOutlivesTheCut(t *testing.T) {
	testenv.Short(t)
	p := localProvider(t)
	if p.flavor == flavorPodman {
		t.Skip("Podman leases are always removed by force")
	}
	sb, err := p.Acquire(context.Background(), sandbox.Spec{})
	require.NoError(t, err)
	l := sb.(*lease)
	decoy, far := net.Pipe()
	defer far.Close()
	l.lifeMu.Lock()
	real := l.lifeline
	l.lifeline = decoy
	l.lifeMu.Unlock()
	defer real.Close()

	require.NoError(t, sb.Release(context.Background()))
	_, err = p.cli.ContainerInspect(context.Background(), l.id)
	assert.True(t, cerrdefs.IsNotFound(err), "container still there: %v", err)
}

// With the lifeline held, Release ends the container through it: the
// container is gone when Release returns, and it was never removed by
// force (no kill: the engine's "destroy" event follows a "die" whose exit
// is the keeper's own, 0, not SIGKILL's 137).
func TestReleaseEndsTheContainerThroughItsLifeline(t *testing.T) {
	testenv.Short(t)
	p := localProvider(t)
	if p.flavor == flavorPodman {
		t.Skip("Podman leases are always removed by force")
	}
	sb, err := p.Acquire(context.Background(), sandbox.Spec{})
	require.NoError(t, err)
	l := sb.(*lease)
	since := time.Now()
	require.NoError(t, sb.Release(context.Background()))
	_, err = p.cli.ContainerInspect(context.Background(), l.id)
	assert.True(t, cerrdefs.IsNotFound(err), "container still there: %v", err)
	code, killed := dieEvent(t, p, l.id, since)
	assert.False(t, killed, "the container was killed")
	assert.Equal(t, "0", code, "the keeper's exit")
}

// dieEvent returns the exit code of the container's "die" event since t
// and whether the engine recorded a "kill" of it.
func dieEvent(t *testing.T, p *Provider, id string, since time.Time) (code string, killed bool) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	msgs, errs := p.cli.Events(ctx, events.ListOptions{
		Since: timestamp(since.Add(-time.Second)),
		Until: timestamp(time.Now().Add(time.Second)),
		Filters: filters.NewArgs(
			filters.Arg("type", string(events.ContainerEventType)),
			filters.Arg("container", id),
		),
	})
	code = "none"
	for {
		select {
		case m := <-msgs:
			switch m.Action {
			case events.ActionKill:
				killed = true
			case events.ActionDie:
				code = m.Actor.Attributes["exitCode"]
			}
		case err := <-errs:
			if err != nil && !errors.Is(err, io.EOF) {
				require.NoError(t, err)
			}
			return code, killed
		}
	}
}
