package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

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
	if tree, ok := nativeTrees[a.Name()]; ok {
		// The CLI needs helpers beside its binary: its whole platform tree
		// is mounted and its bin directory goes first on PATH.
		root, err := tree(bin)
		if err != nil {
			dp.Close()
			return nil, spec, nil, outposterr.Wrap(outposterr.Configuration, err, "%s CLI", a.Name())
		}
		target := treeDir + "/" + a.Name()
		spec.Mounts = append(spec.Mounts, sandbox.Mount{Source: root, Target: target, ReadOnly: true})
		spec.Env = map[string]string{"PATH": target + "/bin:/usr/local/bin:/usr/bin:/bin"}
	} else {
		spec.Mounts = append(spec.Mounts, sandbox.Mount{Source: bin, Target: cliDir + "/" + a.Binary(), ReadOnly: true})
		spec.Env = map[string]string{"PATH": cliDir + ":/usr/local/bin:/usr/bin:/bin"}
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

// treeDir is where a CLI's platform tree is mounted (see nativeTrees).
const treeDir = "/opt/outpost"

// nativeTrees finds, for CLIs whose binary needs sibling helpers, the host
// directory to mount into a container (holding bin/<binary>), from the
// binary found on PATH (symlinks resolved).
var nativeTrees = map[string]func(bin string) (string, error){
	"codex": codexTree,
}

// codexTree finds Codex's platform tree vendor/<triple> (bin/codex,
// bin/codex-code-mode-host, codex-resources/bwrap, codex-path/rg). PATH may
// hold the native binary itself (<tree>/bin/codex) or the npm launcher
// (…/@openai/codex/bin/codex.js), whose platform package is a sibling
// (…/@openai/codex-<os>-<arch>/vendor/<triple>) or nested under its own
// node_modules.
func codexTree(bin string) (string, error) {
	dir := filepath.Dir(bin)
	if filepath.Base(dir) == "bin" && !strings.HasSuffix(bin, ".js") {
		if _, err := os.Stat(filepath.Join(filepath.Dir(dir), "codex-resources")); err == nil {
			return filepath.Dir(dir), nil
		}
	}
	pkg := filepath.Dir(dir)
	for _, pattern := range []string{
		filepath.Join(filepath.Dir(pkg), "codex-linux-*", "vendor", "*", "bin", "codex"),
		filepath.Join(pkg, "node_modules", "@openai", "codex-linux-*", "vendor", "*", "bin", "codex"),
	} {
		if m, _ := filepath.Glob(pattern); len(m) > 0 {
			return filepath.Dir(filepath.Dir(m[0])), nil
		}
	}
	if filepath.Base(dir) == "bin" && !strings.HasSuffix(bin, ".js") {
		return filepath.Dir(dir), nil // a bare native binary: mount what there is
	}
	return "", errors.New("no Linux platform tree (vendor/<triple>/bin/codex) found next to " + bin)
}
