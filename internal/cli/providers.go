package cli

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/bootstrap"
	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/sandbox"
	"github.com/outpost-dev/outpost/sandbox/docker"
	"github.com/outpost-dev/outpost/sandbox/host"
)

// basePath is the PATH of a container lease after the CLI's own directory.
const basePath = "/usr/local/bin:/usr/bin:/bin"

// provider returns the sandbox provider and lease spec for a turn, and a
// cleanup to call when done. The pinned CLI is bootstrapped on demand
// (downloaded once, SHA-512 verified, cached on the host) and put first on
// the sandbox PATH: Docker leases mount the verified cache entry read-only,
// so a cold lease copies nothing; the host sandbox runs it from the cache.
func provider(ctx context.Context, f *Factory, opts *RunOptions, a adapters.Adapter, workspace, network string, log *slog.Logger) (sandbox.Provider, sandbox.Spec, func(), error) {
	spec := sandbox.Spec{Workspace: workspace, Network: network, Image: opts.Image}
	kind := opts.Sandbox
	var dp *docker.Provider
	if kind != "host" {
		var err error
		dp, err = docker.New(ctx, docker.Options{Host: f.Getenv("DOCKER_HOST"), Logger: log, Version: Version})
		if err != nil {
			if kind == "" {
				return nil, spec, nil, outposterr.Wrap(outposterr.Sandbox, err,
					"the default sandbox is Docker; start the engine, or pass --sandbox host to run unisolated on this machine")
			}
			return nil, spec, nil, err
		}
	}
	// A CLI with a catalog row always runs from its verified cache entry; one
	// without (a test double, a CLI the image provides) runs as the sandbox
	// finds it.
	var entry *bootstrap.Entry
	if _, pinned := bootstrap.DefaultCatalog().Row(a.Binary()); pinned {
		var err error
		if entry, err = ensureCLI(ctx, f, a, opts.Bootstrap); err != nil {
			if dp != nil {
				dp.Close()
			}
			return nil, spec, nil, err
		}
	}
	if kind == "host" {
		env := hostEnv(f)
		if entry != nil {
			env["PATH"] = entry.HostBinDir() + ":" + env["PATH"]
		}
		return host.New(host.Options{Env: env, Logger: log}), spec, func() {}, nil
	}
	spec.Hide = hiddenDirs(workspace)
	spec.Env = map[string]string{"PATH": basePath}
	if entry != nil {
		spec.Mounts = append(spec.Mounts, entry.Mount())
		spec.Env["PATH"] = entry.SandboxBinDir() + ":" + basePath
	}
	spec.User = opts.User
	if spec.User == "" && os.Geteuid() == 0 {
		// Leases never run as root. When outpost does, the lease takes the
		// workspace owner's ids so the agent can write its files.
		if uid, gid, ok := owner(workspace); ok && uid != 0 {
			spec.User = fmt.Sprintf("%d:%d", uid, gid)
		}
	}
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

// ensureCLI bootstraps the adapter's pinned CLI into the host cache.
func ensureCLI(ctx context.Context, f *Factory, a adapters.Adapter, o BootstrapOptions) (*bootstrap.Entry, error) {
	b, err := newBootstrapper(ctx, f, o)
	if err != nil {
		return nil, err
	}
	e, err := b.Ensure(ctx, a.Binary())
	if err != nil {
		return nil, outposterr.Wrap(outposterr.Bootstrap, err,
			"%s CLI: install the pinned version (outpost bootstrap; set %s or npm's registry, or %s for an offline mirror)",
			a.Name(), registryEnv, mirrorEnv)
	}
	return e, nil
}

// hiddenDirs lists the workspace-relative .outpost directories a Docker
// lease must not see: the workspace's own and, when the project (the
// current directory) lies inside the workspace, the project's. They hold
// .env values, drivers and, maybe, a conversation store.
func hiddenDirs(workspace string) []string {
	hide := []string{configDir}
	if wd, err := os.Getwd(); err == nil {
		if rel, err := filepath.Rel(workspace, wd); err == nil && rel != "." && filepath.IsLocal(rel) {
			hide = append(hide, filepath.ToSlash(filepath.Join(rel, configDir)))
		}
	}
	return hide
}
