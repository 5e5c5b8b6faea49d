package docker

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"net"
	"os"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"

	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/sandbox"
	"github.com/outpost-dev/outpost/sandbox/internal/leasekit"
)

// lease is one container; it implements [sandbox.Sandbox].
type lease struct {
	// TarCopy is CopyIn and CopyOut: tar in the container.
	leasekit.TarCopy[*process]

	p             *Provider
	id            string // container id
	leaseID       string
	name          string
	user          string
	env           map[string]string // Spec.Env, added to every exec
	workspace     string            // host directory mounted at Root
	ownsWorkspace bool

	oomMu   sync.Mutex // guards oomSeen and pidsSeen
	oomSeen int64      // Podman: the memory cgroup's oom_kill count last seen
	// pidsSeen: the pids cgroup's count of refused forks last seen;
	// pidsStale: a reach of the limit was reported from the engine's stats
	// without that count, so the next count read is a new baseline.
	pidsSeen  int64
	pidsStale bool

	lifeMu   sync.Mutex
	lifeline net.Conn  // the attach to the keeper's stdin (see lifeline.go)
	lifeOut  io.Reader // its multiplexed stdout, when attached (forwards)

	rel leasekit.ReleaseState
}

var _ sandbox.Sandbox = (*lease)(nil)

// Gone implements [sandbox.Vanishing]: the container was removed or no
// longer runs (someone ran docker rm -f or docker stop on it, the engine
// restarted) while the lease was held. "" while it runs, once Release
// started, or when the engine does not answer.
func (l *lease) Gone(ctx context.Context) string {
	if l.rel.Releasing() || l.id == "" {
		return ""
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	ins, err := l.p.cli.ContainerInspect(ctx, l.id)
	switch {
	case cerrdefs.IsNotFound(err):
		return "container " + shortID(l.id) + " was removed while the lease was held"
	case err != nil || ins.State == nil:
		return ""
	case !ins.State.Running || ins.State.Dead || ins.State.Status == "removing":
		return "container " + shortID(l.id) + " stopped while the lease was held (" + ins.State.Status + ")"
	}
	return ""
}

// ID implements [sandbox.Sandbox]: the container id.
func (l *lease) ID() string { return l.id }

// Home implements [sandbox.Sandbox].
func (l *lease) Home() string { return Home }

// Root implements [sandbox.Sandbox].
func (l *lease) Root() string { return Root }

// startTar is the Start of the lease's TarCopy (CopyIn and CopyOut).
func (l *lease) startTar(ctx context.Context, argv []string, stdin io.Reader) (*process, error) {
	return l.start(ctx, execSpec{args: argv, dir: "/", stdin: stdin})
}

// Release implements [sandbox.Sandbox]: it removes the container (on
// Docker by cutting the lifeline and waiting for the engine's removal,
// with a forced removal as the fallback; see removeContainer) and the
// temporary workspace the lease created, and returns once both are gone.
// It runs under
// context.WithoutCancel with Options.ReleaseTimeout, treats "not found" as
// success and joins errors. A failed Release can be retried; a successful
// one makes later calls no-ops.
func (l *lease) Release(ctx context.Context) error {
	return l.rel.Release(func() error { return l.release(ctx) })
}

// release removes the container and the workspace the lease made; see
// Release.
func (l *lease) release(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.p.opts.ReleaseTimeout)
	defer cancel()
	var errs []error
	if l.id != "" {
		if err := l.removeContainer(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	// Cut also when the removal failed: the container then ends by itself.
	l.cutLifeline()
	if err := l.removeWorkspace(); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	l.p.leases.Untrack(l)
	return nil
}

// removeGrace is how long Release waits for a container whose lifeline it
// cut to end and remove itself before it removes it by force.
const removeGrace = 2 * time.Second

// removeContainer removes the lease's container and returns once it is
// gone. On Docker, with the lifeline held, it cuts the lifeline and waits
// for the engine's auto-removal (condition "removed", as docker run --rm
// waits): the keeper ends at its input's end and the container with it,
// without the kill a forced removal starts with, which measured 14–35 ms
// more per lease (BENCHMARKS.md). A container that has not gone after
// removeGrace, a wait that fails or reports a failed removal, and Podman
// (this path was measured on Docker only) get the forced removal; one the
// engine is already removing is waited for, not reported.
func (l *lease) removeContainer(ctx context.Context) error {
	if l.p.flavor == flavorPodman || !l.holdsLifeline() {
		return l.forceRemove(ctx)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// The wait is sent before the cut; if it reaches the engine only after
	// the removal, it answers "not found", which means the same.
	removed, failed := l.p.cli.ContainerWait(wctx, l.id, container.WaitConditionRemoved)
	l.cutLifeline()
	grace := time.NewTimer(removeGrace)
	defer grace.Stop()
	for {
		select {
		case resp := <-removed:
			if resp.Error != nil && resp.Error.Message != "" {
				// The engine's own removal failed: the container is still there.
				l.p.log.Debug("auto-removal failed", "id", shortID(l.id), "err", resp.Error.Message)
				return l.forceRemove(ctx)
			}
			l.p.log.Debug("container ended and removed itself", "id", shortID(l.id))
			return nil
		case err := <-failed:
			if cerrdefs.IsNotFound(err) {
				l.p.log.Debug("container ended and removed itself", "id", shortID(l.id))
				return nil
			}
			if ctx.Err() != nil {
				return engineError(err, "remove container %s", shortID(l.id))
			}
			return l.forceRemove(ctx)
		case <-grace.C:
			err := l.p.cli.ContainerRemove(ctx, l.id, container.RemoveOptions{Force: true, RemoveVolumes: true})
			switch {
			case err == nil || cerrdefs.IsNotFound(err):
				l.p.log.Debug("container removed", "id", shortID(l.id))
				return nil
			case !goingAway(err):
				return engineError(err, "remove container %s", shortID(l.id))
			}
			// The engine is removing it: the wait reports the end.
		}
	}
}

// forceRemove removes the container by force (kill, then remove).
func (l *lease) forceRemove(ctx context.Context) error {
	err := l.p.cli.ContainerRemove(ctx, l.id, container.RemoveOptions{Force: true, RemoveVolumes: true})
	switch {
	case err == nil:
		l.p.log.Debug("container removed", "id", shortID(l.id))
	case goingAway(err):
		l.p.log.Debug("container already gone", "id", shortID(l.id))
	default:
		return engineError(err, "remove container %s", shortID(l.id))
	}
	return nil
}

// removeWorkspace deletes the temporary workspace, if the lease made one.
func (l *lease) removeWorkspace() error {
	if !l.ownsWorkspace || l.workspace == "" {
		return nil
	}
	if err := os.RemoveAll(l.workspace); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return outposterr.Wrap(outposterr.Sandbox, err, "remove temporary workspace")
	}
	l.ownsWorkspace = false
	return nil
}
