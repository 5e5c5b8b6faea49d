package docker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/client"
	"github.com/google/uuid"

	"github.com/outpost-dev/outpost/internal/procowner"
	"github.com/outpost-dev/outpost/internal/safefs"
	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/sandbox"
	"github.com/outpost-dev/outpost/sandbox/internal/leasekit"
)

// Defaults of [Options].
const (
	// DefaultImage is [sandbox.DefaultImage], the image built from
	// .outpost/Dockerfile.
	DefaultImage = sandbox.DefaultImage
	// DefaultUser is the sandbox user when the host process runs as root:
	// [sandbox.DefaultUser], the base image's "agent" account.
	DefaultUser = sandbox.DefaultUser
	// DefaultNetwork is the network mode when neither Spec nor Options name one.
	DefaultNetwork = "bridge"
	// DefaultPingTimeout bounds the engine probe in [New],
	// DefaultOpTimeout each short engine call (create, start, inspect,
	// exec-create, the signalling exec), DefaultReleaseTimeout container
	// removal in Release.
	DefaultPingTimeout    = leasekit.DefaultPingTimeout
	DefaultOpTimeout      = leasekit.DefaultOpTimeout
	DefaultReleaseTimeout = leasekit.DefaultReleaseTimeout
)

// Default limits of every lease whose Spec and Options set none
// ([sandbox.DefaultCPUs] and friends, the same on every isolated kind). They
// bound what one agent can take from the machine (a runaway build, a fork
// bomb, a memory leak) while leaving room for real work: a CLI with its
// tools, a compiler, a test suite.
const (
	// DefaultCPUs is the CPU quota (cores' worth of time; --cpus).
	DefaultCPUs = sandbox.DefaultCPUs
	// DefaultMemoryBytes is the memory limit, swap disabled (--memory):
	// the tmpfs home and /tmp count against it too.
	DefaultMemoryBytes = sandbox.DefaultMemoryBytes
	// DefaultPids bounds the lease's processes and threads (--pids-limit).
	DefaultPids = sandbox.DefaultPids
	// DefaultHomeBytes sizes the private tmpfs home ([Home]).
	DefaultHomeBytes int64 = 2 << 30
	// DefaultTmpBytes sizes the tmpfs /tmp ([Tmp]).
	DefaultTmpBytes int64 = 1 << 30
)

// Fixed paths inside every lease.
const (
	// Home is the private tmpfs home directory of the sandbox user.
	Home = "/home/agent"
	// Root is the workspace mount point and default working directory.
	Root = "/workspace"
	// Tmp is a writable tmpfs (the root filesystem is read-only).
	Tmp = "/tmp"
)

// engineHint is appended to errors that mean the engine cannot be used.
const engineHint = "is dockerd running? start it or use --sandbox host"

// Options configure a [Provider]. Every field is optional; the zero value of
// each is described on the field. The library reads no environment
// variables: the CLI resolves DOCKER_HOST and friends and passes them here.
type Options struct {
	// Host is the engine address ("unix:///var/run/docker.sock",
	// "unix:///run/podman/podman.sock", "tcp://host:2376",
	// "ssh://user@host"). Empty: the platform's default socket. See
	// [Endpoint] for what each form means.
	Host string
	// TLS, SSHFlags and Remote complete Host as the fields of [Endpoint] do.
	TLS      *TLS
	SSHFlags []string
	Remote   bool
	// Client is an engine client to use instead of dialling Host. The
	// provider does not close it.
	Client *client.Client
	// Image is the default container image. Empty: [DefaultImage].
	Image string
	// Network is the default network mode ("none", "bridge", "host" or a
	// named network). Empty: [DefaultNetwork].
	Network string
	// User is the default "uid:gid". Empty: the host process's uid:gid, or
	// [DefaultUser] when that is root or the engine is not local (this
	// machine's ids mean nothing there).
	User string
	// Version is the value of [LabelVersion]. Empty: "dev".
	Version string
	// RunID is the value of [LabelRun] on every resource. Empty: a random id.
	RunID string
	// Logger receives debug records about engine calls. Nil: discarded.
	Logger *slog.Logger
	// TempDir is where temporary workspaces are created. Empty: os.TempDir().
	TempDir string
	// PingTimeout bounds the probe in [New]. Zero: [DefaultPingTimeout].
	PingTimeout time.Duration
	// OpTimeout bounds each short engine call; streams are bounded by the
	// caller's context instead. Zero: [DefaultOpTimeout].
	OpTimeout time.Duration
	// ReleaseTimeout bounds cleanup in Release. Zero: [DefaultReleaseTimeout].
	ReleaseTimeout time.Duration

	// CPUs, MemoryBytes and Pids are the limits of a lease whose Spec sets
	// none (a Spec value wins). Zero: [DefaultCPUs], [DefaultMemoryBytes],
	// [DefaultPids]; negative: no limit.
	CPUs        float64
	MemoryBytes int64
	Pids        int64
	// HomeBytes and TmpBytes size the tmpfs home and /tmp. Zero:
	// [DefaultHomeBytes], [DefaultTmpBytes]; negative: the engine's
	// default (half the host's memory), still bounded by the memory limit.
	HomeBytes, TmpBytes int64
}

// Provider hands out Docker container leases. It is safe for concurrent use.
type Provider struct {
	cli       *client.Client
	ownClient bool
	opts      Options
	log       *slog.Logger
	owner     map[string]string // owner labels of this process

	flavor flavor
	local  bool   // the engine sees this machine's files
	host   string // the address, for messages

	leases   leasekit.Tracker[*lease]
	removals removals // released leases' containers the engine is removing

	// execsOnly: every command is an exec, none is run by the keeper
	// (set by tests of the exec path).
	execsOnly bool
}

var _ sandbox.Provider = (*Provider)(nil)

// NewClient returns an engine client for host (empty: the default socket)
// that negotiates the API version with the engine; see [NewEndpointClient]
// for TLS and ssh options.
func NewClient(host string) (*client.Client, error) {
	return NewEndpointClient(Endpoint{Host: host})
}

// New connects to the engine and checks that it answers within
// Options.PingTimeout. An unreachable engine is a [outposterr.Sandbox] error
// whose message says how to fix it.
func New(ctx context.Context, opts Options) (*Provider, error) {
	if opts.Image == "" {
		opts.Image = DefaultImage
	}
	if opts.Network == "" {
		opts.Network = DefaultNetwork
	}
	if opts.Version == "" {
		opts.Version = "dev"
	}
	if opts.RunID == "" {
		opts.RunID = uuid.NewString()
	}
	if opts.PingTimeout <= 0 {
		opts.PingTimeout = DefaultPingTimeout
	}
	if opts.OpTimeout <= 0 {
		opts.OpTimeout = DefaultOpTimeout
	}
	if opts.ReleaseTimeout <= 0 {
		opts.ReleaseTimeout = DefaultReleaseTimeout
	}
	ep := Endpoint{Host: opts.Host, TLS: opts.TLS, SSHFlags: opts.SSHFlags, Remote: opts.Remote}
	local, host := ep.Local(), cmp.Or(opts.Host, client.DefaultDockerHost)
	if opts.Client != nil {
		host = opts.Client.DaemonHost()
		local = !opts.Remote && hostIsLocal(host)
	}
	opts.HomeBytes = orDefault(opts.HomeBytes, DefaultHomeBytes)
	opts.TmpBytes = orDefault(opts.TmpBytes, DefaultTmpBytes)
	if opts.User == "" {
		opts.User = DefaultUser
		if local {
			opts.User = hostUser()
		}
	}
	if _, _, err := parseUser(opts.User); err != nil {
		return nil, err
	}
	if err := sandbox.CheckCPUs(opts.CPUs); err != nil {
		return nil, err
	}
	if err := checkNetwork(opts.Network); err != nil {
		return nil, err
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p := &Provider{cli: opts.Client, opts: opts, log: log, local: local, host: host}
	if p.cli == nil {
		cli, err := NewEndpointClient(ep)
		if err != nil {
			return nil, err
		}
		p.cli, p.ownClient = cli, true
	}
	var err error
	pctx, cancel := context.WithTimeout(ctx, opts.PingTimeout)
	defer cancel()
	if _, err = p.cli.Ping(pctx); err != nil {
		p.Close()
		return nil, outposterr.Wrap(outposterr.Sandbox, err, "docker engine unreachable at %s (%s)", host, engineHint)
	}
	if p.flavor, err = p.detectFlavor(pctx); err != nil {
		p.Close()
		return nil, outposterr.Wrap(outposterr.Sandbox, err, "docker engine at %s: probe", host)
	}
	p.owner = ownerLabels()
	return p, nil
}

// orDefault is v, or def when v is zero.
func orDefault[T int64 | float64](v, def T) T {
	if v == 0 {
		return def
	}
	return v
}

// tmpfsSize is the size= option for n bytes ("" for the engine default).
func tmpfsSize(n int64) string {
	if n <= 0 {
		return ""
	}
	return ",size=" + strconv.FormatInt(n, 10)
}

// ownerLabels identifies this process for the reaper.
func ownerLabels() map[string]string {
	o := procowner.Self()
	l := map[string]string{
		LabelOwnerPID:  strconv.Itoa(o.PID),
		LabelOwnerHost: o.Host,
	}
	if o.Start != "" {
		l[LabelOwnerStart] = o.Start
	}
	if ns := leasekit.PIDNamespace(); ns != "" {
		l[LabelOwnerPIDNS] = ns
	}
	return l
}

// hostUser is the host process's uid:gid, or DefaultUser for root.
func hostUser() string {
	uid, gid := os.Getuid(), os.Getgid()
	if uid <= 0 {
		return DefaultUser
	}
	return fmt.Sprintf("%d:%d", uid, gid)
}

var userRE = regexp.MustCompile(`^([0-9]{1,10}):([0-9]{1,10})$`)

// parseUser validates "uid:gid".
func parseUser(s string) (uid, gid int, err error) {
	m := userRE.FindStringSubmatch(s)
	if m == nil {
		return 0, 0, outposterr.New(outposterr.Configuration, "sandbox user %q is not uid:gid", s)
	}
	uid, err1 := strconv.Atoi(m[1])
	gid, err2 := strconv.Atoi(m[2])
	if err := errors.Join(err1, err2); err != nil {
		return 0, 0, outposterr.Wrap(outposterr.Configuration, err, "sandbox user %q", s)
	}
	return uid, gid, nil
}

// checkNetwork refuses modes that would join another container's namespaces.
func checkNetwork(n string) error {
	if strings.HasPrefix(n, "container:") || strings.ContainsAny(n, " \t\n/") {
		return outposterr.New(outposterr.Configuration, "network mode %q is not allowed (none, bridge, host or a network name)", n)
	}
	return nil
}

// Name implements [sandbox.Provider].
func (p *Provider) Name() string { return "docker" }

// Local reports whether the engine sees this machine's files (see
// [Endpoint.Local]). Leases of an engine that does not get no bind mounts:
// Spec.Workspace, Spec.Mounts and Spec.Forwards are refused, and a CLI
// reaches them by copy (bootstrap's CopyInProvider).
func (p *Provider) Local() bool { return p.local }

// Engine names the engine behind the API: "docker" or "podman".
func (p *Provider) Engine() string { return p.flavor.String() }

// Client returns the engine client, for [Reap] and [BuildImage].
func (p *Provider) Client() *client.Client { return p.cli }

// Close waits, bounded by Options.ReleaseTimeout, for the removals of
// released leases' containers still under way ([Provider.AwaitRemovals])
// and closes the engine client if the provider created it. Leases not
// released are not; see [Provider.ReleaseAll].
func (p *Provider) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), p.opts.ReleaseTimeout)
	defer cancel()
	err := p.removals.wait(ctx)
	if p.ownClient && p.cli != nil {
		err = errors.Join(err, p.cli.Close())
	}
	return err
}

// Removing returns how many released leases' containers the engine is
// still removing: Release returns once nothing runs in a container, and
// its removal ends in the background.
func (p *Provider) Removing() int { return p.removals.count() }

// AwaitRemovals returns once the containers of the leases released so far
// are removed, or with ctx's error, and reports the removals that failed
// since the last call (each is bounded by Options.ReleaseTimeout and falls
// back to a forced removal).
func (p *Provider) AwaitRemovals(ctx context.Context) error { return p.removals.wait(ctx) }

// opCtx derives the short deadline used for control calls.
func (p *Provider) opCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, p.opts.OpTimeout)
}

// Acquire creates and starts a container for spec. See the package
// documentation for what the container looks like.
func (p *Provider) Acquire(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("acquire docker sandbox: %w", err)
	}
	pl, err := p.plan(spec)
	if err != nil {
		return nil, err
	}
	leaseID := strings.ReplaceAll(uuid.NewString(), "-", "")
	l := &lease{
		p:       p,
		leaseID: leaseID,
		name:    "outpost-" + leaseID[:16],
		user:    pl.user,
		env:     copyEnv(spec.Env),
	}
	l.Start = l.startTar
	if err := l.prepareWorkspace(spec, &pl); err != nil {
		return nil, err
	}
	cfg, hc := p.containerConfig(spec, pl, l)
	if err := l.createContainer(ctx, cfg, hc, pl); err != nil {
		return nil, err
	}
	if err := l.startContainer(ctx, len(pl.fwdArgs) > 0); err != nil {
		return nil, errors.Join(err, l.Release(ctx))
	}
	return l, nil
}

// acquirePlan is what Acquire decides from a Spec and the Options before
// it touches the engine or the disk.
type acquirePlan struct {
	image, network, user string
	uid, gid             int
	mounts               []mount.Mount
	// fwdArgs are the forward entrypoint's arguments (none: no forwards).
	fwdArgs []string
}

// plan validates spec against the Options and resolves what the lease
// will be: image, network, user, the spec's mounts and the forwards'.
func (p *Provider) plan(spec sandbox.Spec) (acquirePlan, error) {
	pl := acquirePlan{
		image:   cmp.Or(spec.Image, p.opts.Image),
		network: cmp.Or(spec.Network, p.opts.Network),
		user:    cmp.Or(spec.User, p.opts.User),
	}
	if err := checkNetwork(pl.network); err != nil {
		return pl, err
	}
	var err error
	if pl.uid, pl.gid, err = parseUser(pl.user); err != nil {
		return pl, err
	}
	for k := range spec.Env {
		if !sandbox.ValidEnvName(k) {
			return pl, outposterr.New(outposterr.Configuration, "invalid environment variable name %q", k)
		}
	}
	if spec.CPUs < 0 || spec.MemoryBytes < 0 || spec.Pids < 0 {
		return pl, outposterr.New(outposterr.Configuration, "negative resource limit")
	}
	if err := sandbox.CheckCPUs(spec.CPUs); err != nil {
		return pl, err
	}
	if err := p.checkRemote(spec); err != nil {
		return pl, err
	}
	if pl.mounts, err = bindMounts(spec.Mounts); err != nil {
		return pl, err
	}
	fwdMounts, fwdArgs, err := forwardPlan(spec.Forwards, pl.network)
	if err != nil {
		return pl, err
	}
	pl.mounts, pl.fwdArgs = append(pl.mounts, fwdMounts...), fwdArgs
	return pl, nil
}

// prepareWorkspace sets l.workspace: none on a remote engine (a fresh
// tmpfs, see checkRemote), a new temporary directory owned by the lease
// user when spec names none, else spec's, checked and with its hidden
// directories added to pl.mounts.
func (l *lease) prepareWorkspace(spec sandbox.Spec, pl *acquirePlan) error {
	p := l.p
	switch {
	case !p.local:
	case spec.Workspace == "":
		dir, err := os.MkdirTemp(p.opts.TempDir, "outpost-workspace-")
		if err != nil {
			return outposterr.Wrap(outposterr.Sandbox, err, "create temporary workspace")
		}
		l.workspace, l.ownsWorkspace = dir, true
		if os.Geteuid() == 0 {
			// As root, hand the directory to the sandbox user. Otherwise it
			// is already ours, which is the sandbox user by default.
			if err := os.Lchown(dir, pl.uid, pl.gid); err != nil {
				rmErr := l.removeWorkspace()
				return errors.Join(outposterr.Wrap(outposterr.Sandbox, err, "chown temporary workspace"), rmErr)
			}
		}
	default:
		dir, fi, err := leasekit.StatWorkspace(spec.Workspace)
		if err != nil {
			return err
		}
		if real, err := filepath.EvalSymlinks(dir); err != nil || real == "/" {
			return outposterr.New(outposterr.Configuration, "workspace %s: the root directory is never mounted into a lease", dir)
		}
		l.workspace = dir
		if !usableBy(fi, pl.uid, pl.gid) {
			p.log.Warn("workspace is not writable by the sandbox user; run the lease as its owner (--user UID:GID) or change its owner",
				"workspace", dir, "user", pl.user)
		}
		if pl.mounts, err = hideMounts(dir, fi, spec.Hide, pl.mounts); err != nil {
			return err
		}
	}
	return nil
}

// labels are the lease container's labels: spec's, the runner's owner
// record, and Outpost's own.
func (p *Provider) labels(spec sandbox.Spec, leaseID string) map[string]string {
	labels := map[string]string{}
	for k, v := range spec.Labels {
		labels[labelKey(k)] = v
	}
	for k, v := range p.owner {
		labels[k] = v
	}
	if labels[LabelRun] == "" {
		labels[LabelRun] = p.opts.RunID
	}
	labels[LabelManaged] = "true"
	labels[LabelVersion] = p.opts.Version
	labels[LabelLease] = leaseID
	return labels
}

// containerConfig is the lease container's configuration: a keeper (or
// the forwards' entrypoint) as its process, a read-only image, no
// capabilities, the workspace at Root and the limits.
func (p *Provider) containerConfig(spec sandbox.Spec, pl acquirePlan, l *lease) (*container.Config, *container.HostConfig) {
	cfg := &container.Config{
		Image:      pl.image,
		User:       pl.user,
		Env:        []string{"HOME=" + Home, "TZ=UTC", "XDG_CACHE_HOME=/tmp/.cache"},
		Entrypoint: []string{"sh", "-c", keeperScript, "outpost-keeper"},
		WorkingDir: Root,
		Labels:     p.labels(spec, l.leaseID),
		// The keeper's stdin is the lifeline (see lifeline.go): open, and
		// closed by the engine when the one attached client goes away.
		OpenStdin: true,
		StdinOnce: true,
	}
	if len(pl.fwdArgs) > 0 {
		cfg.Entrypoint = append([]string{"sh", "-c", forwardScript, "outpost-forward"}, pl.fwdArgs...)
	}
	useInit := true
	hc := &container.HostConfig{
		// A container whose keeper ended (its runner died) removes itself.
		AutoRemove:  true,
		Init:        &useInit,
		CapDrop:     []string{"ALL"},
		SecurityOpt: []string{"no-new-privileges"},
		NetworkMode: container.NetworkMode(pl.network),
		LogConfig:   container.LogConfig{Type: "none"},
		// The image is read-only: the agent writes to the workspace, its
		// home and /tmp, nowhere else.
		ReadonlyRootfs: true,
		Tmpfs: map[string]string{
			Home: p.tmpfsOptions(pl.uid, pl.gid, 0o700) + tmpfsSize(p.opts.HomeBytes),
			Tmp:  "rw,exec,nosuid,nodev,mode=1777" + tmpfsSize(p.opts.TmpBytes),
		},
	}
	if p.local {
		hc.Mounts = append([]mount.Mount{{Type: mount.TypeBind, Source: l.workspace, Target: Root}}, pl.mounts...)
	} else {
		hc.Tmpfs[Root] = p.tmpfsOptions(pl.uid, pl.gid, 0o755)
	}
	res := sandbox.LeaseResources(spec, p.opts.CPUs, p.opts.MemoryBytes, p.opts.Pids)
	if res.CPUs > 0 {
		hc.NanoCPUs = int64(res.CPUs * 1e9)
	}
	if res.MemoryBytes > 0 {
		hc.Memory = res.MemoryBytes
		hc.MemorySwap = res.MemoryBytes // no swap: an over-limit turn is OOM-killed, not slowed
	}
	if res.Pids > 0 {
		hc.PidsLimit = &res.Pids
	}
	return cfg, hc
}

// createContainer creates the lease's container and tracks it. Create is a short,
// bounded call that is never abandoned half-way: a create request cut off
// by cancellation can still complete in the engine after a remove-by-name
// ran, leaking a container. It runs to completion; cancellation is checked
// right after, with the id in hand. On error nothing is left.
func (l *lease) createContainer(ctx context.Context, cfg *container.Config, hc *container.HostConfig, pl acquirePlan) error {
	p := l.p
	cctx, cancel := p.opCtx(context.WithoutCancel(ctx))
	created, err := p.cli.ContainerCreate(cctx, cfg, hc, nil, nil, l.name)
	cancel()
	if err != nil {
		rmErr := l.removeWorkspace()
		if cerrdefs.IsNotFound(err) {
			return errors.Join(outposterr.Wrap(outposterr.Sandbox, err,
				"create container: image %s not found (%s)", pl.image, p.imageHint(pl.image)), rmErr)
		}
		return errors.Join(p.engineError(err, "create container"), rmErr)
	}
	l.id = created.ID
	p.leases.Track(l)
	p.log.Debug("container created", "id", shortID(l.id), "image", pl.image, "network", pl.network, "user", pl.user)
	if w := droppedLimits(created.Warnings); w != "" {
		// The engine made the container without a limit it was asked
		// for (no pids or memory cgroup: rootless engines, cgroup v1):
		// a lease never runs with less isolation than asked.
		return errors.Join(outposterr.New(outposterr.Configuration,
			"the %s engine at %s cannot apply the lease's resource limits (%s): give it the cgroup controllers (cgroup v2 with delegation for a rootless engine), or run without the limit", p.flavor, p.host, w),
			l.Release(ctx))
	}
	if ctx.Err() != nil {
		return errors.Join(fmt.Errorf("create container: %w", ctx.Err()), l.Release(ctx))
	}
	return nil
}

// droppedLimits returns the engine's create warnings that say it dropped
// a resource limit ("PIDs limit discarded", "Resource limits are not
// supported and ignored on cgroups V1 rootless systems"), joined; "" for
// none.
func droppedLimits(warnings []string) string {
	var out []string
	for _, w := range warnings {
		lw := strings.ToLower(w)
		dropped := strings.Contains(lw, "discarded") || strings.Contains(lw, "ignored")
		if dropped && (strings.Contains(lw, "limit") || strings.Contains(lw, "memory") || strings.Contains(lw, "cpu")) {
			out = append(out, strings.TrimSpace(w))
		}
	}
	return strings.Join(out, "; ")
}

// startContainer starts the created container with its lifeline attached and, with
// forwards, waits until they listen. Start, like create, runs to
// completion. The caller releases the lease on error.
func (l *lease) startContainer(ctx context.Context, withFwd bool) error {
	p := l.p
	// The lifeline is attached before the start. On Docker it carries the
	// container's output, so nothing written is missed: the forwarders'
	// report, the keeper's, and the output of a command the keeper runs
	// (see keeperrun.go). On Podman, where the keeper runs nothing, only
	// with forwards; and it must come first there: Podman's attach
	// initializes a created container itself, and fails with 409 when a
	// concurrent start initialized it between its check of the state and
	// its own initialization.
	podman := p.flavor == flavorPodman
	if err := <-l.attachLifeline(ctx, withFwd || !podman); err != nil {
		return err
	}
	sctx, cancel := p.opCtx(context.WithoutCancel(ctx))
	err := p.cli.ContainerStart(sctx, l.id, container.StartOptions{})
	cancel()
	if err == nil && ctx.Err() != nil {
		err = fmt.Errorf("start container: %w", ctx.Err())
	} else if err != nil {
		err = p.engineError(err, "start container")
	}
	if err == nil && withFwd {
		err = l.awaitForwards(ctx, l.life)
	}
	if err == nil && !podman && !p.execsOnly {
		l.keeper.ready = make(chan struct{})
		go l.serveLifeline(l.life)
	}
	return err
}

// hideMounts adds an empty read-only tmpfs over each Spec.Hide directory of
// the workspace dir (whose info is ws), creating a missing one (owned like
// the workspace) so the lease cannot create it either. No component may be
// a link: a link would steer the mount, and what it points at is not what
// the lease would see.
func hideMounts(dir string, ws os.FileInfo, hide []string, mounts []mount.Mount) ([]mount.Mount, error) {
	for _, h := range hide {
		rel := filepath.FromSlash(h)
		if !filepath.IsLocal(rel) || filepath.Clean(rel) != rel {
			return nil, outposterr.New(outposterr.Configuration, "hidden path %q is not a clean workspace-relative path", h)
		}
		_, statErr := os.Lstat(filepath.Join(dir, rel))
		r, err := safefs.OpenDir(dir, rel, true)
		if err != nil {
			return nil, outposterr.Wrap(outposterr.Configuration, err, "hide %s from the sandbox", h)
		}
		if errors.Is(statErr, fs.ErrNotExist) && os.Geteuid() == 0 {
			if uid, gid, ok := safefs.Owner(ws); ok {
				_ = r.Chown(".", uid, gid)
			}
		}
		r.Close()
		mounts = append(mounts, mount.Mount{Type: mount.TypeTmpfs, Target: path.Join(Root, filepath.ToSlash(rel)), ReadOnly: true,
			TmpfsOptions: &mount.TmpfsOptions{SizeBytes: 4096, Mode: 0o555}})
	}
	return mounts, nil
}

// bindMounts validates Spec.Mounts and turns them into read-only binds.
func bindMounts(ms []sandbox.Mount) ([]mount.Mount, error) {
	var out []mount.Mount
	for _, m := range ms {
		if !filepath.IsAbs(m.Source) {
			return nil, outposterr.New(outposterr.Configuration, "mount source %q is not absolute", m.Source)
		}
		if err := leasekit.CheckSandboxPath(m.Target); err != nil {
			return nil, err
		}
		if m.Target == Root || m.Target == Home || m.Target == Tmp {
			return nil, outposterr.New(outposterr.Configuration, "mount target %s is reserved", m.Target)
		}
		if _, err := os.Stat(m.Source); err != nil {
			return nil, outposterr.Wrap(outposterr.Configuration, err, "mount source")
		}
		out = append(out, mount.Mount{Type: mount.TypeBind, Source: m.Source, Target: m.Target, ReadOnly: true})
	}
	return out, nil
}

// Live returns the ids of the leases acquired and not yet released.
func (p *Provider) Live() []string { return p.leases.Live() }

// ReleaseAll releases every live lease of p concurrently, waits for the
// removals of released leases' containers ([Provider.AwaitRemovals]) and
// joins the errors. It is what a signal handler calls before the process
// exits; each Release and each removal is bounded by
// Options.ReleaseTimeout even if ctx is cancelled.
func (p *Provider) ReleaseAll(ctx context.Context) error {
	err := p.leases.ReleaseAll(ctx)
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.opts.ReleaseTimeout)
	defer cancel()
	return errors.Join(err, p.removals.wait(wctx))
}

// imageHint says how to get a missing image into the engine.
func (p *Provider) imageHint(image string) string {
	if p.flavor == flavorPodman {
		return "load it with docker save " + image + " | podman load, as scripts/engines-setup.sh does, or build it with podman build"
	}
	return "build it with scripts/docker-setup.sh or outpost image build"
}

// engineError is [engineError] with hints for the ways a Podman service
// fails to start containers on restricted machines.
func (p *Provider) engineError(err error, format string, args ...any) error {
	if p.flavor == flavorPodman {
		msg := err.Error()
		switch {
		case strings.Contains(msg, "catatonit") || strings.Contains(msg, "container-init binary"):
			return outposterr.Wrap(outposterr.Sandbox, err, "%s (Podman needs catatonit for the init process: install it)", fmt.Sprintf(format, args...))
		case strings.Contains(msg, "setting rlimit"):
			return outposterr.Wrap(outposterr.Sandbox, err,
				"%s (rootful Podman raises nofile/nproc beyond what this machine allows: set default_ulimits in containers.conf to the service's own hard limits, as scripts/engines-setup.sh does)",
				fmt.Sprintf(format, args...))
		}
	}
	return engineError(err, format, args...)
}

// engineError classifies an engine failure as a sandbox error.
func engineError(err error, format string, args ...any) error {
	if client.IsErrConnectionFailed(err) {
		return outposterr.Wrap(outposterr.Sandbox, err, "%s (%s)", fmt.Sprintf(format, args...), engineHint)
	}
	return outposterr.Wrap(outposterr.Sandbox, err, format, args...)
}

func copyEnv(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// tmpfsOptions is the option string of a tmpfs owned by the lease user
// (the private home; a remote lease's workspace). Docker takes the ids;
// Podman refuses uid=/gid= and offers "U" (chown to the container's user)
// instead.
func (p *Provider) tmpfsOptions(uid, gid int, mode os.FileMode) string {
	if p.flavor == flavorPodman {
		return fmt.Sprintf("rw,exec,nosuid,nodev,mode=%04o,U", mode)
	}
	return fmt.Sprintf("rw,exec,nosuid,nodev,mode=%04o,uid=%d,gid=%d", mode, uid, gid)
}

// checkRemote refuses what an engine that cannot see this machine's files
// cannot do: bind a workspace, extra mounts or host sockets.
func (p *Provider) checkRemote(spec sandbox.Spec) error {
	if p.local {
		return nil
	}
	switch {
	case spec.Workspace != "":
		return outposterr.New(outposterr.Configuration,
			"the docker engine at %s is not on this machine and cannot mount the workspace %s: use an engine on this machine (a unix socket), or leave Spec.Workspace empty and copy the files in (Sandbox.CopyIn to %s)",
			p.host, spec.Workspace, Root)
	case len(spec.Mounts) > 0:
		return outposterr.New(outposterr.Configuration,
			"the docker engine at %s is not on this machine and cannot bind-mount %s: copy it in instead (bootstrap's CopyInProvider for a CLI)", p.host, spec.Mounts[0].Source)
	case len(spec.Forwards) > 0:
		return outposterr.New(outposterr.Configuration,
			"the docker engine at %s is not on this machine and cannot reach the socket %s", p.host, spec.Forwards[0].Socket)
	}
	return nil
}
