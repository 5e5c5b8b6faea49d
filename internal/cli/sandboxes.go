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
		"docker": {Name: "docker", Summary: "isolated containers on a Docker engine (default; DOCKER_HOST may name a remote one)", Open: openDocker, Doctor: engineDoctor("docker engine", dockerEndpoint)},
		"podman": {Name: "podman", Summary: "isolated containers on Podman's Docker-compatible API service", Open: openPodman, Doctor: podmanDoctor},
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

// dockerEngine hands out leases of a Docker-compatible engine (Docker,
// Podman's API service, a remote engine).
type dockerEngine struct {
	ctx  context.Context
	p    *docker.Provider
	o    SandboxOptions
	root bool // outpost runs as root
}

// dockerEndpoint is the engine the docker kind uses, from the docker
// command's variables: DOCKER_HOST, and for a tcp:// address
// DOCKER_CERT_PATH and DOCKER_TLS_VERIFY (certificates in ~/.docker when
// only the latter is set). The engine's certificate is always verified.
func dockerEndpoint(f *Factory) (docker.Endpoint, error) {
	e := docker.Endpoint{Host: f.Getenv("DOCKER_HOST")}
	if !strings.HasPrefix(e.Host, "tcp://") {
		return e, nil
	}
	dir := f.Getenv("DOCKER_CERT_PATH")
	if dir == "" && f.Getenv("DOCKER_TLS_VERIFY") != "" {
		home := f.Getenv("HOME")
		if home == "" {
			return e, outposterr.New(outposterr.Configuration, "DOCKER_TLS_VERIFY is set but neither DOCKER_CERT_PATH nor HOME says where the certificates are")
		}
		dir = filepath.Join(home, ".docker")
	}
	if dir != "" {
		e.TLS = docker.TLSFromDir(dir)
	}
	return e, nil
}

// rootfulPodmanSocket is where a rootful Podman API service listens.
var rootfulPodmanSocket = "/run/podman/podman.sock"

// podmanEndpoint finds Podman's API service: CONTAINER_HOST, else the
// rootful socket /run/podman/podman.sock, else the rootless one under
// XDG_RUNTIME_DIR — the first socket this process may connect to.
func podmanEndpoint(f *Factory) (docker.Endpoint, error) {
	if h := f.Getenv("CONTAINER_HOST"); h != "" {
		return docker.Endpoint{Host: h}, nil
	}
	candidates := []string{rootfulPodmanSocket}
	if d := f.Getenv("XDG_RUNTIME_DIR"); d != "" {
		candidates = append(candidates, filepath.Join(d, "podman", "podman.sock"))
	}
	for _, c := range candidates {
		if usableSocket(c) {
			return docker.Endpoint{Host: "unix://" + c}, nil
		}
	}
	return docker.Endpoint{}, outposterr.New(outposterr.Sandbox,
		"no Podman API service found at %s: start one (podman system service --time=0, or systemctl enable --now podman.socket) or set CONTAINER_HOST",
		strings.Join(candidates, " or "))
}

func openDocker(ctx context.Context, f *Factory, o SandboxOptions, log *slog.Logger) (SandboxEngine, error) {
	ep, err := dockerEndpoint(f)
	if err != nil {
		return nil, err
	}
	e, err := openEngine(ctx, ep, o, log)
	if err != nil && o.Kind == "" {
		return nil, outposterr.Wrap(outposterr.Sandbox, err,
			"the default sandbox is Docker; start the engine, or pass --sandbox host to run unisolated on this machine")
	}
	return e, err
}

func openPodman(ctx context.Context, f *Factory, o SandboxOptions, log *slog.Logger) (SandboxEngine, error) {
	ep, err := podmanEndpoint(f)
	if err != nil {
		return nil, err
	}
	e, err := openEngine(ctx, ep, o, log)
	if err != nil && outposterr.Is(err, outposterr.Sandbox) {
		return nil, outposterr.Wrap(outposterr.Sandbox, err,
			"the Podman service at %s does not answer: start it (podman system service --time=0 %s)", ep.Host, ep.Host)
	}
	return e, err
}

func openEngine(ctx context.Context, ep docker.Endpoint, o SandboxOptions, log *slog.Logger) (SandboxEngine, error) {
	p, err := docker.New(ctx, docker.Options{Host: ep.Host, TLS: ep.TLS, SSHFlags: ep.SSHFlags, Remote: ep.Remote, Logger: log, Version: Version})
	if err != nil {
		return nil, err
	}
	return &dockerEngine{ctx: ctx, p: p, o: o, root: os.Geteuid() == 0}, nil
}

// Delivery is a bind mount of the host cache for an engine on this
// machine, a copy for one that cannot see this machine's files.
func (e *dockerEngine) Delivery() Delivery {
	if e.p.Local() {
		return DeliverMount
	}
	return DeliverCopy
}

func (e *dockerEngine) Lease(cli *Installed, workspace string) (sandbox.Provider, sandbox.Spec, error) {
	if !e.p.Local() {
		// The workspace would have to travel in and out of every lease;
		// that is a task workspace's job (copied in by the caller), not
		// the in-place workspace of outpost run.
		return nil, sandbox.Spec{}, outposterr.New(outposterr.Configuration,
			"the %s engine is not on this machine and cannot mount the workspace %s: run against an engine on this machine (unset DOCKER_HOST, or --sandbox podman), or --sandbox host; library callers can lease with no workspace and copy files in",
			e.p.Engine(), workspace)
	}
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
