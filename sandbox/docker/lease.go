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
	lifeline net.Conn    // the attach to the keeper's stdin (see lifeline.go)
	life     *lifeStream // its output, when attached with it
	// keeper is the keeper's side of running a command itself (see
	// keeperrun.go).
	keeper keeperState

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

// Release implements [sandbox.Sandbox]: it ends the container (on Docker
// by cutting the lifeline; see removeContainer) and removes the temporary
// workspace the lease created, and returns once nothing runs in the
// container any more and the workspace is gone. On Docker the engine then
// removes the stopped container by itself, which the provider follows in
// the background ([Provider.Removing]; [Provider.AwaitRemovals],
// [Provider.ReleaseAll] and [Provider.Close] wait for it); otherwise the
// container is gone when Release returns. It runs under
// context.WithoutCancel with Options.ReleaseTimeout, treats "not found" as
// success and joins errors. A failed Release can be retried; a successful
// one makes later calls no-ops.
func (l *lease) Release(ctx context.Context) error {
	return l.rel.Release(func() error { return l.release(ctx) })
}

// release ends the container and removes the workspace the lease made; see
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
	// Only now: no process of the lease can write into it any more.
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
// cut to end, and the background for a stopped one to be removed, before
// either removes it by force.
const removeGrace = 2 * time.Second

// removeContainer ends the lease's container. On Docker, with the lifeline
// held, it cuts the lifeline and returns once the container has stopped
// (condition "not-running"): the keeper ends at its input's end, the init
// with it, and the kernel ends every other process of the container's pid
// namespace before the engine sees the init's exit. The cut spares the
// turn the kill a forced removal starts with (14–35 ms more per lease,
// BENCHMARKS.md); returning at the stop spares it the engine's cleanup and
// removal of a container in which nothing runs (awaitRemoval follows that
// in the background, as the engine's AutoRemove does it without us). A
// container that has not stopped after removeGrace, a wait that fails, and
// Podman (this path was measured on Docker only) get the forced removal
// here, and are gone when it returns; one the engine is already removing
// is waited for, not reported.
func (l *lease) removeContainer(ctx context.Context) error {
	if l.p.flavor == flavorPodman || !l.holdsLifeline() {
		return l.forceRemove(ctx)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// The wait is sent before the cut; if it reaches the engine only after
	// the stop, it answers at once, after the removal "not found": both
	// mean the same.
	stopped, failed := l.p.cli.ContainerWait(wctx, l.id, container.WaitConditionNotRunning)
	l.cutLifeline()
	reached, err := l.p.waitOrRemove(ctx, l.id, stopped, failed)
	if reached {
		l.p.log.Debug("container ended", "id", shortID(l.id))
		l.p.awaitRemoval(ctx, l.id)
	}
	return err
}

// waitOrRemove waits for the answer of a ContainerWait on container id
// (reached, failed) and removes the container by force instead when the
// engine reports an error, the wait fails, or the answer has not come
// after removeGrace. reached is true when the condition was met and the
// container may still be there; false when it is gone (or err says why
// it could not be removed). A container the engine is already removing
// is waited for, not reported.
func (p *Provider) waitOrRemove(ctx context.Context, id string, reached <-chan container.WaitResponse, failed <-chan error) (bool, error) {
	grace := time.NewTimer(removeGrace)
	defer grace.Stop()
	for {
		select {
		case resp := <-reached:
			if resp.Error != nil && resp.Error.Message != "" {
				p.log.Debug("container wait reported an error", "id", shortID(id), "err", resp.Error.Message)
				return false, p.forceRemove(ctx, id)
			}
			return true, nil
		case err := <-failed:
			if cerrdefs.IsNotFound(err) {
				p.log.Debug("container removed itself", "id", shortID(id))
				return false, nil
			}
			if ctx.Err() != nil {
				return false, engineError(err, "remove container %s", shortID(id))
			}
			return false, p.forceRemove(ctx, id)
		case <-grace.C:
			err := p.cli.ContainerRemove(ctx, id, container.RemoveOptions{Force: true, RemoveVolumes: true})
			switch {
			case err == nil || cerrdefs.IsNotFound(err):
				p.log.Debug("container removed", "id", shortID(id))
				return false, nil
			case !goingAway(err):
				return false, engineError(err, "remove container %s", shortID(id))
			}
			// The engine is removing it: the wait reports the end.
		}
	}
}

// awaitRemoval follows, in the background, the engine's removal of the
// stopped container id: it waits for condition "removed" (as docker run
// --rm does) and removes the container by force when the engine reports
// its own removal failed, when the wait fails, or when it is still there
// after removeGrace. It is bounded by Options.ReleaseTimeout from now,
// whatever happens to ctx; [Provider.AwaitRemovals] waits for it and
// returns its error.
func (p *Provider) awaitRemoval(ctx context.Context, id string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.opts.ReleaseTimeout)
	p.removals.add()
	go func() {
		defer cancel()
		p.removals.done(p.finishRemoval(ctx, id))
	}()
}

// finishRemoval is awaitRemoval's work.
func (p *Provider) finishRemoval(ctx context.Context, id string) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Sent after the stop: "not found" means the removal is done; an
	// answer with an error, that the engine's own removal failed.
	removed, failed := p.cli.ContainerWait(wctx, id, container.WaitConditionRemoved)
	reached, err := p.waitOrRemove(ctx, id, removed, failed)
	if reached {
		p.log.Debug("container removed itself", "id", shortID(id))
	}
	return err
}

// forceRemove removes the lease's container by force (kill, then remove).
func (l *lease) forceRemove(ctx context.Context) error { return l.p.forceRemove(ctx, l.id) }

// forceRemove removes container id by force (kill, then remove).
func (p *Provider) forceRemove(ctx context.Context, id string) error {
	err := p.cli.ContainerRemove(ctx, id, container.RemoveOptions{Force: true, RemoveVolumes: true})
	switch {
	case err == nil:
		p.log.Debug("container removed", "id", shortID(id))
	case goingAway(err):
		p.log.Debug("container already gone", "id", shortID(id))
	default:
		return engineError(err, "remove container %s", shortID(id))
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
