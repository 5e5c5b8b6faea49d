package docker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/docker/docker/client"

	"github.com/outpost-dev/outpost/internal/safefs"
	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/sandbox"
	"github.com/outpost-dev/outpost/sandbox/internal/leasekit"
)

// Kind is the docker sandbox kind: isolated containers on the Docker
// engine that DOCKER_HOST names (Config.Getenv; with DOCKER_CERT_PATH and
// DOCKER_TLS_VERIFY for a tcp:// address), else the local default.
func Kind() sandbox.Kind {
	return sandbox.Kind{Name: "docker", Summary: "isolated containers on a Docker engine (default)",
		Open: openDocker, Doctor: engineDoctor("docker engine", DockerEndpoint), Reap: reapDocker, ReapDefault: true,
		ReapHelp: "containers, volumes and networks labelled " + LabelManaged + " on the Docker engine (DOCKER_HOST), " +
			"and the workspace copies (" + CopyPrefix + "* in the temporary directory) of Docker and Podman leases on " +
			"root-owned workspaces (a copy whose write-back had begun is listed, never removed)",
		TaskImages: TaskImagesOn(DockerEndpoint)}
}

// PodmanKind is the podman sandbox kind: isolated containers on Podman's
// Docker-compatible API service, found by [PodmanEndpoint].
func PodmanKind() sandbox.Kind {
	return sandbox.Kind{Name: "podman", Summary: "isolated containers on Podman's Docker-compatible API service",
		Open: openPodman, Doctor: podmanDoctor, TaskImages: TaskImagesOn(PodmanEndpoint)}
}

// EndpointKind is a docker-compatible kind named name on the engine at ep,
// for callers that reach an engine no variable describes (SSH flags, a
// tunnel to a remote engine).
func EndpointKind(name string, ep Endpoint) sandbox.Kind {
	fixed := func(func(string) string) (Endpoint, error) { return ep, nil }
	return sandbox.Kind{Name: name, Summary: "isolated containers on the engine at " + ep.Host,
		Open: func(ctx context.Context, c sandbox.Config) (sandbox.Engine, error) {
			return openEngine(ctx, ep, c)
		}, Doctor: engineDoctor(name+" engine", fixed), TaskImages: TaskImagesOn(fixed)}
}

// DockerEndpoint is the engine the docker kind uses, from the docker
// command's variables: DOCKER_HOST, and for a tcp:// address
// DOCKER_CERT_PATH and DOCKER_TLS_VERIFY (certificates in ~/.docker when
// only the latter is set). The engine's certificate is always verified.
func DockerEndpoint(getenv func(string) string) (Endpoint, error) {
	getenv = orNoEnv(getenv)
	e := Endpoint{Host: getenv("DOCKER_HOST")}
	if !strings.HasPrefix(e.Host, "tcp://") {
		return e, nil
	}
	dir := getenv("DOCKER_CERT_PATH")
	if dir == "" && getenv("DOCKER_TLS_VERIFY") != "" {
		home := getenv("HOME")
		if home == "" {
			return e, outposterr.New(outposterr.Configuration, "DOCKER_TLS_VERIFY is set but neither DOCKER_CERT_PATH nor HOME says where the certificates are")
		}
		dir = filepath.Join(home, ".docker")
	}
	if dir != "" {
		e.TLS = TLSFromDir(dir)
	}
	return e, nil
}

// rootfulPodmanSocket is RootfulPodmanSocket (a test moves it).
var rootfulPodmanSocket = RootfulPodmanSocket

// PodmanEndpoint finds Podman's API service: CONTAINER_HOST, else the
// rootful socket /run/podman/podman.sock, else the rootless one under
// XDG_RUNTIME_DIR — the first socket this process may connect to.
func PodmanEndpoint(getenv func(string) string) (Endpoint, error) {
	getenv = orNoEnv(getenv)
	if h := getenv("CONTAINER_HOST"); h != "" {
		return Endpoint{Host: h}, nil
	}
	candidates := []string{rootfulPodmanSocket}
	if d := getenv("XDG_RUNTIME_DIR"); d != "" {
		candidates = append(candidates, filepath.Join(d, "podman", "podman.sock"))
	}
	for _, c := range candidates {
		if usableSocket(c) {
			return Endpoint{Host: "unix://" + c}, nil
		}
	}
	return Endpoint{}, outposterr.New(outposterr.Sandbox,
		"no Podman API service found at %s: start one (podman system service --time=0, or systemctl enable --now podman.socket) or set CONTAINER_HOST",
		strings.Join(candidates, " or "))
}

func orNoEnv(getenv func(string) string) func(string) string {
	if getenv == nil {
		return func(string) string { return "" }
	}
	return getenv
}

func openDocker(ctx context.Context, c sandbox.Config) (sandbox.Engine, error) {
	ep, err := DockerEndpoint(c.Getenv)
	if err != nil {
		return nil, err
	}
	e, err := openEngine(ctx, ep, c)
	if err != nil && c.Kind == "" && outposterr.ClassOf(err) == outposterr.Sandbox {
		return nil, outposterr.Wrap(outposterr.Sandbox, err,
			"the default sandbox is Docker; start the engine, or pass --sandbox host to run unisolated on this machine")
	}
	return e, err
}

func openPodman(ctx context.Context, c sandbox.Config) (sandbox.Engine, error) {
	ep, err := PodmanEndpoint(c.Getenv)
	if err != nil {
		return nil, err
	}
	e, err := openEngine(ctx, ep, c)
	if err != nil && outposterr.Is(err, outposterr.Sandbox) {
		return nil, outposterr.Wrap(outposterr.Sandbox, err,
			"the Podman service at %s does not answer: start it (podman system service --time=0 %s)", ep.Host, ep.Host)
	}
	return e, err
}

func openEngine(ctx context.Context, ep Endpoint, c sandbox.Config) (sandbox.Engine, error) {
	if err := c.CheckUser(); err != nil {
		return nil, err
	}
	if err := c.CheckLimits(); err != nil {
		return nil, err
	}
	p, err := New(ctx, Options{Host: ep.Host, TLS: ep.TLS, SSHFlags: ep.SSHFlags, Remote: ep.Remote,
		Logger: c.Logger, Version: c.Version, User: c.User,
		CPUs: c.CPUs.Float(), MemoryBytes: c.Memory.Int(), Pids: c.Pids.Int()})
	if err != nil {
		return nil, err
	}
	root := os.Geteuid() == 0
	if root {
		// The workspace copies of runs that died holding them (kill -9, a
		// crash) go now: those of dead owners of this host (outpost gc
		// also takes those of owners that cannot be judged here, by age).
		// It costs a listing of the temporary directory.
		if left, err := ReapCopies(ctx, "", ReapOptions{Grace: -1}); (err != nil || len(left) > 0) && c.Logger != nil {
			c.Logger.Debug("removed workspace copies of dead runs", "count", len(left), "err", err)
		}
	}
	return &engine{ctx: ctx, p: p, c: c, root: root}, nil
}

// engine hands out Docker leases.
type engine struct {
	ctx  context.Context
	p    *Provider
	c    sandbox.Config
	root bool // outpost runs as root
}

// Delivery is a bind mount of the host cache for an engine on this
// machine, a copy for one that cannot see this machine's files.
func (e *engine) Delivery() sandbox.Delivery {
	if e.p.Local() {
		return sandbox.Delivery{Mode: sandbox.DeliverMount}
	}
	return sandbox.Delivery{Mode: sandbox.DeliverCopy}
}

func (e *engine) Lease(cli *sandbox.CLI, workspace string) (sandbox.Provider, sandbox.Spec, error) {
	spec := sandbox.Spec{Workspace: workspace, Network: e.c.Network, Image: e.c.Image,
		Env: map[string]string{"PATH": sandbox.BasePath}, User: e.c.User}
	if !e.p.Local() {
		// The workspace would have to travel in and out of every lease.
		// A lease with none (a batch job's source, a verifier's) starts
		// empty and gets its files copied in, the CLI too (Delivery).
		if workspace != "" {
			return nil, sandbox.Spec{}, outposterr.New(outposterr.Configuration,
				"the %s engine is not on this machine and cannot mount the workspace %s: run against an engine on this machine (unset DOCKER_HOST, or --sandbox podman), or --sandbox host; a batch job's source is copied in and works anywhere",
				e.p.Engine(), workspace)
		}
		return e.p, spec, nil
	}
	if cli != nil {
		spec.Mounts = append(spec.Mounts, cli.Mount)
		spec.Env["PATH"] = cli.LeaseBinDir + ":" + sandbox.BasePath
	}
	if spec.User == "" && e.root {
		// Leases never run as root. When outpost does, the lease takes the
		// workspace owner's ids so the agent can write its files; a
		// workspace of root's (a CI runner's checkout) is copied for the
		// lease user instead, and the changes written back at release,
		// its ownership unchanged.
		if fi, err := os.Stat(workspace); err == nil {
			uid, gid, ok := safefs.Owner(fi)
			switch {
			case ok && uid != 0 && gid != 0:
				spec.User = fmt.Sprintf("%d:%d", uid, gid)
			case ok:
				return copyProvider{e.p}, spec, nil
			}
		}
	}
	return e.p, spec, nil
}

// Gateway: a container lease reaches the runner's gateway socket through a
// forwarder on its own loopback, and needs no network for it. An engine
// that is not on this machine cannot reach the socket: its leases reach no
// gateway.
func (e *engine) Gateway() sandbox.Route {
	if !e.p.Local() {
		return sandbox.Route{}
	}
	return sandbox.Route{Via: sandbox.ViaForward}
}

// Close removes what the run still holds. A signal cancels the outpost
// command's root context: the harness stops the CLI and releases its
// lease under a bounded, uncancellable context; this is the last line of
// defence.
func (e *engine) Close() {
	_ = leasekit.ReleaseAllWithin(e.ctx, e.p.ReleaseAll, DefaultReleaseTimeout)
	_ = e.p.Close()
}

// engineDoctor checks a Docker-compatible engine found by endpoint (named
// name in the report), what it is, how CLIs reach its leases, and the
// sandbox image.
func engineDoctor(name string, endpoint func(func(string) string) (Endpoint, error)) func(context.Context, sandbox.DoctorConfig) []sandbox.Check {
	return func(ctx context.Context, c sandbox.DoctorConfig) []sandbox.Check {
		ep, err := endpoint(c.Getenv)
		if err != nil {
			return []sandbox.Check{{Name: name, Detail: err.Error()}}
		}
		p, err := New(ctx, Options{Host: ep.Host, TLS: ep.TLS, SSHFlags: ep.SSHFlags, Remote: ep.Remote, Version: c.Version})
		if err != nil {
			return []sandbox.Check{{Name: name, Detail: err.Error()}}
		}
		defer p.Close()
		cli := p.Client()
		detail := fmt.Sprintf("%s, API %s, CLIs delivered by bind mount", p.Engine(), cli.ClientVersion())
		if !p.Local() {
			detail = fmt.Sprintf("%s, API %s, not on this machine: CLIs are copied into leases, workspaces cannot be mounted", p.Engine(), cli.ClientVersion())
		}
		out := []sandbox.Check{{Name: name, OK: true, Detail: detail}}
		image := c.Image
		ictx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, ierr := cli.ImageInspect(ictx, image)
		cancel()
		if ierr != nil {
			hint := "run scripts/docker-setup.sh or outpost image build"
			if p.Engine() == "podman" {
				hint = "load it with docker save " + image + " | podman load (scripts/engines-setup.sh), or podman build"
			}
			return append(out, sandbox.Check{Name: "image " + image, Detail: fmt.Sprintf("image %s missing: %s", image, hint)})
		}
		return append(out, sandbox.Check{Name: "image " + image, OK: true, Detail: "present"})
	}
}

// podmanDoctor checks the Podman service when there is one: Podman is an
// option, so a machine without it passes with a note.
func podmanDoctor(ctx context.Context, c sandbox.DoctorConfig) []sandbox.Check {
	if _, err := PodmanEndpoint(c.Getenv); err != nil {
		return []sandbox.Check{{Name: "podman service", OK: true, Detail: "none found (only --sandbox podman needs one)"}}
	}
	return engineDoctor("podman service", PodmanEndpoint)(ctx, c)
}

// reapDocker sweeps this machine's workspace copies (those of Podman
// leases too), then the engine at DOCKER_HOST; an unreachable engine is a
// sandbox error that says so.
func reapDocker(ctx context.Context, c sandbox.ReapConfig) ([]sandbox.Leftover, error) {
	copies, cerr := ReapCopies(ctx, "", ReapOptions{DryRun: c.DryRun, Grace: c.Grace})
	out := make([]sandbox.Leftover, 0, len(copies))
	for _, l := range copies {
		out = append(out, sandbox.Leftover{Removed: l.Removed, What: fmt.Sprintf("workspace copy %s (%s)", l.Path, l.Reason)})
	}
	ep, err := DockerEndpoint(c.Getenv)
	if err != nil {
		return out, errors.Join(cerr, err)
	}
	cli, err := NewEndpointClient(ep)
	if err != nil {
		return out, errors.Join(cerr, err)
	}
	defer cli.Close()
	pctx, cancel := context.WithTimeout(ctx, DefaultPingTimeout)
	defer cancel()
	if _, err := cli.Ping(pctx); err != nil {
		return out, errors.Join(cerr, outposterr.Wrap(outposterr.Sandbox, err, "docker engine unreachable at %s, nothing swept there (is dockerd running?)", cli.DaemonHost()))
	}
	left, err := Reap(ctx, cli, ReapOptions{DryRun: c.DryRun, Grace: c.Grace})
	for _, l := range left {
		out = append(out, sandbox.Leftover{Removed: l.Removed,
			What: fmt.Sprintf("%s %s (%s): %s", l.Kind, shortName(l), l.Reason, l.Labels[LabelRun])})
	}
	return out, errors.Join(cerr, err)
}

func shortName(l Leftover) string {
	if l.Name != "" {
		return l.Name
	}
	if len(l.ID) > 12 {
		return l.ID[:12]
	}
	return l.ID
}

// BuildImageAt builds the sandbox image tag from contextDir's dockerfile on
// the engine DOCKER_HOST names (getenv), printing the build's output to out.
func BuildImageAt(ctx context.Context, getenv func(string) string, contextDir, dockerfile, tag string, out io.Writer) error {
	ep, err := DockerEndpoint(getenv)
	if err != nil {
		return err
	}
	cli, err := NewEndpointClient(ep)
	if err != nil {
		return err
	}
	defer cli.Close()
	return BuildImage(ctx, cli, contextDir, dockerfile, tag, out)
}

// TaskImagesOn builds and removes task images ([EnsureTaskImage],
// [RemoveTaskImages]) on the engine endpoint finds (getenv): the
// TaskImages of the docker kind ([DockerEndpoint]), of the podman kind
// ([PodmanEndpoint]), and of kinds whose images come from such an engine.
func TaskImagesOn(endpoint func(getenv func(string) string) (Endpoint, error)) sandbox.TaskImages {
	return engineTaskImages{endpoint}
}

type engineTaskImages struct {
	endpoint func(getenv func(string) string) (Endpoint, error)
}

// client opens the engine.
func (t engineTaskImages) client(getenv func(string) string) (*client.Client, error) {
	ep, err := t.endpoint(getenv)
	if err != nil {
		return nil, err
	}
	return NewEndpointClient(ep)
}

// Ensure implements [sandbox.TaskImages].
func (t engineTaskImages) Ensure(ctx context.Context, getenv func(string) string, contextDir, dockerfile, version string, out io.Writer) (string, bool, error) {
	cli, err := t.client(getenv)
	if err != nil {
		return "", false, err
	}
	defer cli.Close()
	return EnsureTaskImage(ctx, cli, contextDir, dockerfile, version, out)
}

// Remove implements [sandbox.TaskImages]; each image is described as gc
// prints it.
func (t engineTaskImages) Remove(ctx context.Context, getenv func(string) string, dryRun bool) ([]sandbox.Leftover, error) {
	cli, err := t.client(getenv)
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	left, err := RemoveTaskImages(ctx, cli, dryRun)
	out := make([]sandbox.Leftover, 0, len(left))
	for _, l := range left {
		out = append(out, sandbox.Leftover{Removed: l.Removed, What: fmt.Sprintf("%s %s (%s)", l.Kind, l.Name, l.Reason)})
	}
	return out, err
}
