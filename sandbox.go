package outpost

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/outpost-dev/outpost/bootstrap"
	"github.com/outpost-dev/outpost/internal/safefs"
	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/sandbox"
	"github.com/outpost-dev/outpost/sandbox/docker"
	"github.com/outpost-dev/outpost/sandbox/host"
	"github.com/outpost-dev/outpost/sandbox/kubernetes"
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

// SandboxKind is one way to get leases, selected by name (the outpost
// command's --sandbox NAME).
type SandboxKind struct {
	// Name is the kind's name.
	Name string
	// Summary is one line for help texts.
	Summary string
	// Open connects to the kind's engine once per runner.
	Open func(ctx context.Context, o SandboxOptions, log *slog.Logger) (SandboxEngine, error)
}

// SandboxOptions say where a turn runs. Zero values are the kind's defaults.
type SandboxOptions struct {
	// Kind is the sandbox kind's name ("": DefaultSandbox).
	Kind string
	// Image, Network and User configure container leases (User "uid:gid";
	// empty: the workspace owner's when outpost runs as root). Root (uid 0)
	// is refused: leases never run as root.
	Image, Network, User string
	// Engine is the Docker-compatible engine of the docker and podman
	// kinds: its address (DOCKER_HOST's form: unix://, tcp:// with TLS,
	// ssh://) and credentials. Empty Host: the local default (docker), or
	// the first Podman socket found (podman).
	Engine docker.Endpoint
	// CPUs, MemoryBytes and Pids limit every container lease and pod (a
	// CPU quota in cores, memory without swap, processes and threads).
	// Zero: the documented defaults (docker.DefaultCPUs,
	// docker.DefaultMemoryBytes, docker.DefaultPids; the kubernetes kind's
	// are the same); negative: no limit. A job's own limits (sandbox.Spec)
	// override them. On Kubernetes the pids limit is the node's pod pids
	// limit, which must equal Pids (see kubernetes.Options.Pids). The host
	// sandbox limits nothing and refuses a limit (a negative value, no
	// limit, is what it does anyway).
	CPUs        float64
	MemoryBytes int64
	Pids        int64
	// HostEnv is the environment the host sandbox gives CLIs (PATH, LANG,
	// ...; never the whole environment, which holds secrets nobody chose to
	// forward).
	HostEnv map[string]string
	// Project is the project directory: its .outpost is hidden from
	// container leases too when it lies inside the workspace.
	Project string
	// Version labels the resources the kind creates.
	Version string
	// Kubeconfig, KubeContext and Namespace reach a Kubernetes cluster
	// (the kubernetes kind): the kubeconfig file (required), its context
	// (empty: the current one) and the namespace of the pods (empty: the
	// context's, else "default").
	Kubeconfig, KubeContext, Namespace string
	// GatewayBinary is a Linux build of the outpost command (the nodes'
	// architecture; static, or linked against the lease image's C library)
	// that runs the model gateway in a sidecar container of each pod
	// (kubernetes kind): the credential then stays out of the lease on any
	// cluster. The outpost command passes itself. Empty: pods on this
	// machine's network use the runner's own gateway, others get the
	// credential inside.
	GatewayBinary string
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

// SandboxKinds returns the built-in sandbox kinds, by name; a runner takes
// the table, so a test (or another engine) adds one row.
func SandboxKinds() map[string]SandboxKind {
	return map[string]SandboxKind{
		"docker": {Name: "docker", Summary: "isolated containers on a Docker engine (default)", Open: openDocker},
		"host":   {Name: "host", Summary: "this machine, unisolated", Open: openHost},
		"podman": {Name: "podman", Summary: "isolated containers on Podman's Docker-compatible API service", Open: openPodman},
		"kubernetes": {Name: "kubernetes", Summary: "a hardened pod per lease on a Kubernetes cluster (--kubeconfig)",
			Open: openKubernetes},
	}
}

// DefaultSandbox is the kind used when none is named.
const DefaultSandbox = "docker"

// SandboxNames lists the kinds of table, sorted.
func SandboxNames(table map[string]SandboxKind) []string {
	names := make([]string, 0, len(table))
	for n := range table {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// lookupSandbox returns the kind named name ("" is the default).
func lookupSandbox(table map[string]SandboxKind, name string) (SandboxKind, error) {
	if name == "" {
		name = DefaultSandbox
	}
	k, ok := table[name]
	if !ok {
		return SandboxKind{}, outposterr.New(outposterr.Configuration, "sandbox must be one of %s, not %q",
			strings.Join(SandboxNames(table), ", "), name)
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

// checkLeaseUser refuses a lease user that is root or in the root group.
func checkLeaseUser(user string) error {
	if user == "" {
		return nil
	}
	uid, gid, ok := strings.Cut(user, ":")
	if n, err := strconv.ParseUint(uid, 10, 32); ok && err == nil && n == 0 {
		return outposterr.New(outposterr.Configuration,
			"lease user %q is root: leases never run as root (give a non-zero uid, or make the workspace accessible to the default user)", user)
	}
	if n, err := strconv.ParseUint(gid, 10, 32); ok && err == nil && n == 0 {
		return outposterr.New(outposterr.Configuration,
			"lease user %q is in the root group (gid 0), which reaches root's group-readable files: give a non-zero gid", user)
	}
	return nil
}

func openDocker(ctx context.Context, o SandboxOptions, log *slog.Logger) (SandboxEngine, error) {
	e, err := openEngine(ctx, o.Engine, o, log)
	if err != nil && o.Kind == "" && outposterr.ClassOf(err) == outposterr.Sandbox {
		return nil, outposterr.Wrap(outposterr.Sandbox, err,
			"the default sandbox is Docker; start the engine, or pass --sandbox host to run unisolated on this machine")
	}
	return e, err
}

func openPodman(ctx context.Context, o SandboxOptions, log *slog.Logger) (SandboxEngine, error) {
	ep := o.Engine
	if ep.Host == "" {
		ep.Host = "unix://" + docker.RootfulPodmanSocket
	}
	e, err := openEngine(ctx, ep, o, log)
	if err != nil && outposterr.Is(err, outposterr.Sandbox) {
		return nil, outposterr.Wrap(outposterr.Sandbox, err,
			"the Podman service at %s does not answer: start it (podman system service --time=0 %s)", ep.Host, ep.Host)
	}
	return e, err
}

func openEngine(ctx context.Context, ep docker.Endpoint, o SandboxOptions, log *slog.Logger) (SandboxEngine, error) {
	if err := checkLeaseUser(o.User); err != nil {
		return nil, err
	}
	p, err := docker.New(ctx, docker.Options{Host: ep.Host, TLS: ep.TLS, SSHFlags: ep.SSHFlags, Remote: ep.Remote,
		Logger: log, Version: o.Version, User: o.User, CPUs: o.CPUs, MemoryBytes: o.MemoryBytes, Pids: o.Pids})
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
		// a task workspace (a job's source) is copied in instead.
		return nil, sandbox.Spec{}, outposterr.New(outposterr.Configuration,
			"the %s engine is not on this machine and cannot mount the workspace %s: run against an engine on this machine (unset DOCKER_HOST, or --sandbox podman), or --sandbox host; a batch job's source is copied in and works anywhere",
			e.p.Engine(), workspace)
	}
	spec := sandbox.Spec{Workspace: workspace, Network: e.o.Network, Image: e.o.Image,
		Env: map[string]string{"PATH": basePath}, User: e.o.User, Hide: hiddenDirs(e.o.Project, workspace)}
	if cli != nil {
		spec.Mounts = append(spec.Mounts, cli.Entry.Mount())
		spec.Env["PATH"] = cli.Entry.SandboxBinDir() + ":" + basePath
	}
	if spec.User == "" && e.root {
		// Leases never run as root. When outpost does, the lease takes the
		// workspace owner's ids so the agent can write its files.
		if fi, err := os.Stat(workspace); err == nil {
			if uid, gid, ok := safefs.Owner(fi); ok && uid != 0 && gid != 0 {
				spec.User = fmt.Sprintf("%d:%d", uid, gid)
			}
		}
	}
	return e.p, spec, nil
}

// Close removes what the run still holds. A signal (SIGINT, SIGTERM, SIGHUP,
// SIGQUIT) cancels the outpost command's root context: the harness stops
// the CLI and releases its lease under a bounded, uncancellable context;
// this is the last line of defence.
func (e *dockerEngine) Close() {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(e.ctx), docker.DefaultReleaseTimeout)
	defer cancel()
	_ = e.p.ReleaseAll(cctx)
	e.p.Close()
}

// hostEngine runs CLIs on this machine.
type hostEngine struct {
	ctx context.Context
	p   *host.Provider
	env map[string]string
}

func openHost(ctx context.Context, o SandboxOptions, log *slog.Logger) (SandboxEngine, error) {
	if o.User != "" {
		return nil, outposterr.New(outposterr.Configuration, "a lease user applies to isolated sandboxes; the host sandbox runs as you")
	}
	if err := hostLimits(o); err != nil {
		return nil, err
	}
	env := map[string]string{}
	for k, v := range o.HostEnv {
		env[k] = v
	}
	if env["TZ"] == "" {
		env["TZ"] = "UTC"
	}
	return &hostEngine{ctx: ctx, p: host.New(host.Options{Env: env, Logger: log}), env: env}, nil
}

// hostLimits refuses the resource limits the host sandbox cannot apply,
// naming each flag: it runs the CLI as an ordinary process of yours, and
// the limits a process can set on itself (rlimits) are no fit — the
// process limit counts every process of your user, the address-space
// limit is not a memory limit (a Node.js CLI reserves far more than it
// uses). A negative limit (the flag's 0: no limit) is what it does anyway.
func hostLimits(o SandboxOptions) error {
	var flags []string
	if o.CPUs > 0 {
		flags = append(flags, "--cpus")
	}
	if o.MemoryBytes > 0 {
		flags = append(flags, "--memory")
	}
	if o.Pids > 0 {
		flags = append(flags, "--pids-limit")
	}
	if len(flags) == 0 {
		return nil
	}
	return outposterr.New(outposterr.Configuration,
		"the host sandbox cannot apply %s: it runs CLIs unisolated as your own processes and limits nothing; use an isolated sandbox (--sandbox docker, podman or kubernetes), or run without the limit",
		strings.Join(flags, ", "))
}

func (e *hostEngine) Delivery() Delivery { return DeliverHostPath }

func (e *hostEngine) Lease(cli *Installed, workspace string) (sandbox.Provider, sandbox.Spec, error) {
	spec := sandbox.Spec{Workspace: workspace}
	if cli != nil {
		spec.Env = map[string]string{"PATH": cli.Entry.HostBinDir() + ":" + e.env["PATH"]}
	}
	return e.p, spec, nil
}

// Close removes the private homes of leases still held: the harness
// releases each lease itself, also after a signal cancelled the run; this
// is the last line of defence. A home left by a process that died anyway
// (kill -9) is removed by `outpost gc` (host.Reap).
func (e *hostEngine) Close() {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(e.ctx), host.DefaultReleaseTimeout)
	defer cancel()
	_ = e.p.ReleaseAll(cctx)
}

// hiddenDirs lists the workspace-relative .outpost directories a container
// lease must not see: the workspace's own and, when the project (the
// current directory) lies inside the workspace, the project's. They hold
// .env values, drivers and, maybe, a conversation store.
func hiddenDirs(project, workspace string) []string {
	hide := []string{ConfigDir}
	if project != "" {
		if rel, err := filepath.Rel(workspace, project); err == nil && rel != "." && filepath.IsLocal(rel) {
			hide = append(hide, filepath.ToSlash(filepath.Join(rel, ConfigDir)))
		}
	}
	return hide
}

// kubeCLIDir is where a copied CLI goes in a pod: on the container's disk,
// not in the memory-backed home (which counts against the pod's memory).
const kubeCLIDir = "/tmp/outpost-cli"

// kubeEngine hands out Kubernetes pods.
type kubeEngine struct {
	ctx context.Context
	p   *kubernetes.Provider
	o   SandboxOptions
}

func openKubernetes(ctx context.Context, o SandboxOptions, log *slog.Logger) (SandboxEngine, error) {
	if o.Kubeconfig == "" {
		return nil, outposterr.New(outposterr.Configuration,
			"the kubernetes sandbox needs a kubeconfig (--kubeconfig, or KUBECONFIG for the outpost command)")
	}
	if err := checkLeaseUser(o.User); err != nil {
		return nil, err
	}
	p, err := kubernetes.New(ctx, kubernetes.Options{Kubeconfig: o.Kubeconfig, Context: o.KubeContext,
		Namespace: o.Namespace, Image: o.Image, User: o.User, Logger: log, Version: o.Version,
		CPUs: o.CPUs, MemoryBytes: o.MemoryBytes, Pids: o.Pids})
	if err != nil {
		return nil, err
	}
	return &kubeEngine{ctx: ctx, p: p, o: o}, nil
}

// Delivery: a pod cannot mount this machine's cache; the CLI is copied in.
func (e *kubeEngine) Delivery() Delivery { return DeliverCopy }

// CLIDir is where the copied CLI goes.
func (e *kubeEngine) CLIDir() string { return kubeCLIDir }

func (e *kubeEngine) Lease(_ *Installed, workspace string) (sandbox.Provider, sandbox.Spec, error) {
	return &kubeTurnProvider{p: e.p}, sandbox.Spec{Workspace: workspace, Network: e.o.Network, Image: e.o.Image,
		Env: map[string]string{"PATH": basePath}, Hide: hiddenDirs(e.o.Project, workspace)}, nil
}

func (e *kubeEngine) Close() {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(e.ctx), kubernetes.DefaultReleaseTimeout)
	defer cancel()
	_ = e.p.ReleaseAll(cctx)
	_ = e.p.Close()
}
