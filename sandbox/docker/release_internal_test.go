package docker

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
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

// With the lifeline held, Release ends the container through it and
// returns once nothing runs in it: every process of the lease (the init,
// the keeper, one an exec left running in the background) is gone from
// the host when Release returns; the engine's own removal then finishes in
// the background, and AwaitRemovals waits for it. It was never removed by
// force (no kill: the engine's "die" event has the keeper's own exit, 0,
// not SIGKILL's 137).
func TestReleaseEndsTheContainerThroughItsLifeline(t *testing.T) {
	testenv.Short(t)
	p := localProvider(t)
	if p.flavor == flavorPodman {
		t.Skip("Podman leases are always removed by force")
	}
	sb, err := p.Acquire(context.Background(), sandbox.Spec{})
	require.NoError(t, err)
	l := sb.(*lease)
	pr, err := sb.Exec(context.Background(), sandbox.Command{Args: []string{"sh", "-c", "sleep 300 >/dev/null 2>&1 & echo started"}})
	require.NoError(t, err)
	out, _ := io.ReadAll(pr.Stdout())
	_, err = pr.Wait()
	require.NoError(t, err)
	require.Equal(t, "started\n", string(out))
	_ = pr.Close()
	procs := hostProcesses(t, p, l.id)
	require.GreaterOrEqual(t, len(procs), 3, "init, keeper and the background sleep: %v", procs)

	since := time.Now()
	require.NoError(t, sb.Release(context.Background()))
	for pid, start := range procs {
		assert.False(t, processAlive(pid, start), "process %d of the lease runs after Release", pid)
	}
	ins, err := p.cli.ContainerInspect(context.Background(), l.id)
	if err == nil {
		assert.False(t, ins.State.Running, "the container runs after Release")
	} else {
		assert.True(t, cerrdefs.IsNotFound(err), "%v", err)
	}
	require.NoError(t, p.AwaitRemovals(context.Background()))
	assert.Zero(t, p.Removing())
	_, err = p.cli.ContainerInspect(context.Background(), l.id)
	assert.True(t, cerrdefs.IsNotFound(err), "container still there: %v", err)
	code, killed := dieEvent(t, p, l.id, since)
	assert.False(t, killed, "the container was killed")
	assert.Equal(t, "0", code, "the keeper's exit")
}

// hostProcesses returns the host pids of the container's processes (the
// engine's top) that still run, with their start times (field 22 of
// /proc/PID/stat).
func hostProcesses(t *testing.T, p *Provider, id string) map[int]string {
	t.Helper()
	top, err := p.cli.ContainerTop(context.Background(), id, nil)
	require.NoError(t, err)
	col := slices.Index(top.Titles, "PID")
	require.GreaterOrEqual(t, col, 0, "%v", top.Titles)
	out := map[int]string{}
	for _, row := range top.Processes {
		pid, err := strconv.Atoi(row[col])
		require.NoError(t, err)
		// A process can end between the engine's listing and this read
		// (the keeper kills its watcher of a command as it reports the
		// command's exit): one that ended is not left for Release to end.
		if start, ok := processStart(pid); ok {
			out[pid] = start
		}
	}
	return out
}

// processStart is pid's start time, ok false when no such process runs
// (a zombie counts as gone: nothing of it runs).
func processStart(pid int) (string, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", false
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 20 || f[0] == "Z" || f[0] == "X" {
		return "", false
	}
	return f[19], true
}

// processAlive reports whether pid still runs and is the process that
// started at start.
func processAlive(pid int, start string) bool {
	now, ok := processStart(pid)
	return ok && now == start
}

// A stopped container the engine does not remove by itself (here: created
// without AutoRemove, so its removal can never come) is removed by force
// in the background after removeGrace; Removing counts it meanwhile,
// AwaitRemovals waits for it, and Close too.
func TestBackgroundRemovalFallsBackToForce(t *testing.T) {
	testenv.Short(t)
	p := localProvider(t)
	ctx := context.Background()
	created, err := p.cli.ContainerCreate(ctx, &container.Config{Image: DefaultImage, Cmd: []string{"true"},
		Labels: map[string]string{LabelManaged: "true", LabelRun: p.opts.RunID}}, &container.HostConfig{}, nil, nil, "")
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.cli.ContainerRemove(ctx, created.ID, container.RemoveOptions{Force: true}) })
	p.awaitRemoval(ctx, created.ID)
	assert.Equal(t, 1, p.Removing())
	_, err = p.cli.ContainerInspect(ctx, created.ID)
	require.NoError(t, err, "removed before the grace")
	require.NoError(t, p.Close())
	assert.Zero(t, p.Removing())
	_, err = p.cli.ContainerInspect(ctx, created.ID)
	assert.True(t, cerrdefs.IsNotFound(err), "container still there: %v", err)
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
