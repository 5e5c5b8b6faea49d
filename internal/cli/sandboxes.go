package cli

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/outpost-dev/outpost/bootstrap"
	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/sandbox"
	"github.com/outpost-dev/outpost/sandbox/docker"
	"github.com/outpost-dev/outpost/sandbox/host"
)

// basePath is the PATH of a container lease after the CLI's own directory.
const basePath = "/usr/local/bin:/usr/bin:/bin"

// Delivery is how a verified, bootstrapped CLI reaches a sandbox's leases.
type Delivery string

// The deliveries.
const (
	// DeliverMount bind-mounts the host cache entry read-only into each
	// lease: nothing is copied (an engine on this machine).
	DeliverMount Delivery = "mount"
	// DeliverCopy copies the verified tree into each lease through the
	// sandbox contract and checks its version (any engine, local or not).
	DeliverCopy Delivery = "copy"
	// DeliverHostPath runs the CLI from the host cache (the host sandbox).
	DeliverHostPath Delivery = "host-path"
)

// SandboxKind is one way to get leases, selected with --sandbox NAME.
type SandboxKind struct {
	// Name is the --sandbox value.
	Name string
	// Summary is one line for help texts.
	Summary string
	// Open connects to the kind's engine once per command invocation.
	Open func(ctx context.Context, f *Factory, o SandboxOptions, log *slog.Logger) (SandboxEngine, error)
	// Doctor checks the kind's engine for `outpost doctor` (image: the
	// --image to look for); nil: nothing to check.
	Doctor func(ctx context.Context, f *Factory, image string) []check
}

// SandboxEngine is an opened sandbox kind: it hands out the provider and
// lease spec for each turn and says how the agent's CLI gets there.
type SandboxEngine interface {
	// Delivery says how a bootstrapped CLI reaches this engine's leases.
	Delivery() Delivery
	// Lease returns the provider and spec for a turn in workspace (a host
	// directory) with cli (nil: the CLI is not Outpost's to install)
	// delivered as Delivery says.
	Lease(cli *Installed, workspace string) (sandbox.Provider, sandbox.Spec, error)
	// Close releases everything the invocation still holds, bounded; it
	// runs also after cancellation.
	Close()
}

// Installed is a verified CLI ready for delivery.
type Installed struct {
	Entry *bootstrap.Entry
	// Bootstrapper installs the entry into a lease (copy delivery).
	Bootstrapper *bootstrap.Bootstrapper
}

// sandboxKinds are the built-in sandbox kinds; the factory holds the
// table, so a test (or a later engine) adds one row.
func sandboxKinds() map[string]SandboxKind {
	return map[string]SandboxKind{
		"docker": {Name: "docker", Summary: "isolated containers on a Docker engine (default)", Open: openDocker, Doctor: dockerDoctor},
		"host":   {Name: "host", Summary: "this machine, unisolated", Open: openHost},
	}
}

// defaultSandbox is the kind used when --sandbox is not given.
const defaultSandbox = "docker"

// sandboxNames lists the kinds for help and errors.
func (f *Factory) sandboxNames() string {
	names := make([]string, 0, len(f.Sandboxes))
	for n := range f.Sandboxes {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// sandboxKind returns the kind named name ("" is the default).
func (f *Factory) sandboxKind(name string) (SandboxKind, error) {
	if name == "" {
		name = defaultSandbox
	}
	k, ok := f.Sandboxes[name]
	if !ok {
		return SandboxKind{}, &flagError{fmt.Errorf("--sandbox must be one of %s, not %q", f.sandboxNames(), name)}
	}
	return k, nil
}

// dockerEngine hands out Docker leases.
type dockerEngine struct {
	ctx  context.Context
	p    *docker.Provider
	o    SandboxOptions
	root bool // outpost runs as root
}

func openDocker(ctx context.Context, f *Factory, o SandboxOptions, log *slog.Logger) (SandboxEngine, error) {
	p, err := docker.New(ctx, docker.Options{Host: f.Getenv("DOCKER_HOST"), Logger: log, Version: Version})
	if err != nil {
		if o.Kind == "" {
			return nil, outposterr.Wrap(outposterr.Sandbox, err,
				"the default sandbox is Docker; start the engine, or pass --sandbox host to run unisolated on this machine")
		}
		return nil, err
	}
	return &dockerEngine{ctx: ctx, p: p, o: o, root: os.Geteuid() == 0}, nil
}

func (e *dockerEngine) Delivery() Delivery { return DeliverMount }

func (e *dockerEngine) Lease(cli *Installed, workspace string) (sandbox.Provider, sandbox.Spec, error) {
	spec := sandbox.Spec{Workspace: workspace, Network: e.o.Network, Image: e.o.Image,
		Env: map[string]string{"PATH": basePath}, User: e.o.User, Hide: hiddenDirs(workspace)}
	if cli != nil {
		spec.Mounts = append(spec.Mounts, cli.Entry.Mount())
		spec.Env["PATH"] = cli.Entry.SandboxBinDir() + ":" + basePath
	}
	if spec.User == "" && e.root {
		// Leases never run as root. When outpost does, the lease takes the
		// workspace owner's ids so the agent can write its files.
		if uid, gid, ok := owner(workspace); ok && uid != 0 {
			spec.User = fmt.Sprintf("%d:%d", uid, gid)
		}
	}
	return e.p, spec, nil
}

// Close removes what the run still holds. SIGINT/SIGTERM cancel the root
// context: the harness stops the CLI and releases its lease under a
// bounded, uncancellable context; this is the last line of defence.
func (e *dockerEngine) Close() {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(e.ctx), docker.DefaultReleaseTimeout)
	defer cancel()
	_ = e.p.ReleaseAll(cctx)
	e.p.Close()
}

// hostEngine runs CLIs on this machine.
type hostEngine struct {
	env map[string]string
	log *slog.Logger
}

func openHost(_ context.Context, f *Factory, o SandboxOptions, log *slog.Logger) (SandboxEngine, error) {
	if o.User != "" {
		return nil, &flagError{fmt.Errorf("--user applies to isolated sandboxes; the host sandbox runs as you")}
	}
	return &hostEngine{env: hostEnv(f), log: log}, nil
}

func (e *hostEngine) Delivery() Delivery { return DeliverHostPath }

func (e *hostEngine) Lease(cli *Installed, workspace string) (sandbox.Provider, sandbox.Spec, error) {
	env := map[string]string{}
	for k, v := range e.env {
		env[k] = v
	}
	if cli != nil {
		env["PATH"] = cli.Entry.HostBinDir() + ":" + env["PATH"]
	}
	return host.New(host.Options{Env: env, Logger: e.log}), sandbox.Spec{Workspace: workspace}, nil
}

func (e *hostEngine) Close() {}

// hostEnv is the environment the host sandbox passes to CLIs: the few
// variables a program needs to run, never the whole environment (which holds
// secrets the caller did not choose to forward).
func hostEnv(f *Factory) map[string]string {
	env := map[string]string{}
	for _, k := range []string{"PATH", "LANG", "LC_ALL", "TMPDIR", "TERM"} {
		if v := f.Getenv(k); v != "" {
			env[k] = v
		}
	}
	env["TZ"] = "UTC"
	return env
}

// hiddenDirs lists the workspace-relative .outpost directories a container
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
