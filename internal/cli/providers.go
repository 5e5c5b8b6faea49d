package cli

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/sandbox"
	"github.com/outpost-dev/outpost/sandbox/docker"
	"github.com/outpost-dev/outpost/sandbox/host"
)

// cliDir is where the host's CLI binary is mounted inside a container until
// bootstrap installs verified copies.
const cliDir = "/opt/outpost/bin"

// provider returns the sandbox provider and lease spec for a turn, and a
// cleanup to call when done.
func provider(ctx context.Context, f *Factory, opts *RunOptions, a adapters.Adapter, workspace, network string, log *slog.Logger) (sandbox.Provider, sandbox.Spec, func(), error) {
	spec := sandbox.Spec{Workspace: workspace, Network: network, Image: opts.Image}
	kind := opts.Sandbox
	if kind == "host" {
		return host.New(host.Options{Env: hostEnv(f), Logger: log}), spec, func() {}, nil
	}
	dp, err := docker.New(ctx, docker.Options{Host: f.Getenv("DOCKER_HOST"), Logger: log, Version: Version})
	if err != nil {
		if kind == "" {
			return nil, spec, nil, outposterr.Wrap(outposterr.Sandbox, err,
				"the default sandbox is Docker; start the engine, or pass --sandbox host to run unisolated on this machine")
		}
		return nil, spec, nil, err
	}
	// Until bootstrap installs verified binaries, the host's CLI is mounted
	// read-only into the container.
	bin, err := f.LookPath(a.Binary())
	if err != nil {
		dp.Close()
		return nil, spec, nil, outposterr.Wrap(outposterr.Configuration, err,
			"%s CLI not found on this machine's PATH (install it, e.g. scripts/install-clis.sh)", a.Name())
	}
	if real, err := filepath.EvalSymlinks(bin); err == nil {
		bin = real
	}
	if _, err := os.Stat(bin); err != nil {
		dp.Close()
		return nil, spec, nil, outposterr.Wrap(outposterr.Configuration, err, "%s CLI", a.Name())
	}
	spec.User = opts.User
	if spec.User == "" && os.Geteuid() == 0 {
		// Leases never run as root. When outpost does, the lease takes the
		// workspace owner's ids so the agent can write its files.
		if uid, gid, ok := owner(workspace); ok && uid != 0 {
			spec.User = fmt.Sprintf("%d:%d", uid, gid)
		}
	}
	spec.Mounts = append(spec.Mounts, sandbox.Mount{Source: bin, Target: cliDir + "/" + a.Binary(), ReadOnly: true})
	spec.Env = map[string]string{"PATH": cliDir + ":/usr/local/bin:/usr/bin:/bin"}
	// SIGINT/SIGTERM cancel the root context: the harness stops the CLI and
	// releases the lease under a bounded, uncancellable context. ReleaseAll
	// is the last line of defence when the run is wound down.
	return dp, spec, func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), docker.DefaultReleaseTimeout)
		defer cancel()
		_ = dp.ReleaseAll(cctx)
		dp.Close()
	}, nil
}
