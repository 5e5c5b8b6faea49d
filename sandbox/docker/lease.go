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

// Release implements [sandbox.Sandbox]: it force-removes the container and
// the temporary workspace the lease created. It runs under
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
		err := l.p.cli.ContainerRemove(ctx, l.id, container.RemoveOptions{Force: true, RemoveVolumes: true})
		switch {
		case err == nil:
			l.p.log.Debug("container removed", "id", shortID(l.id))
		case goingAway(err):
			l.p.log.Debug("container already gone", "id", shortID(l.id))
		default:
			errs = append(errs, engineError(err, "remove container %s", shortID(l.id)))
		}
	}
	// Cut after the removal (a keeper ending first would race it with
	// the engine's own removal), and also when the removal failed: the
	// container then ends by itself.
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
