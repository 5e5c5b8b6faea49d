package host

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/outpost-dev/outpost/internal/procowner"
	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/sandbox"
	"github.com/outpost-dev/outpost/sandbox/internal/leasekit"
)

// DefaultReleaseTimeout bounds the cleanup done by Release.
const DefaultReleaseTimeout = 30 * time.Second

// Options configures a [Provider]. Every zero value has a documented default.
type Options struct {
	// Env is the base environment of every command: PATH, LANG, TZ and
	// whatever else the caller wants the CLI to see. The provider never reads
	// its own process environment, so nil means commands start with HOME and
	// PWD only (and a program name without a slash cannot be found).
	Env map[string]string
	// TempDir is where lease directories (private home, temporary workspace)
	// are created. Empty: os.TempDir().
	TempDir string
	// RealHome is the user's real home directory, used as the lease's home
	// when [sandbox.Spec.RealHome] is set. Empty: such specs are refused.
	RealHome string
	// ReleaseTimeout bounds Release's cleanup. Zero: [DefaultReleaseTimeout].
	ReleaseTimeout time.Duration
	// Logger receives debug logs (never environment values). Nil: discarded.
	Logger *slog.Logger
}

// Provider hands out host leases. It is safe for concurrent use.
type Provider struct {
	opts  Options
	log   *slog.Logger
	owner procowner.Owner

	leases leasekit.Tracker[*lease]
}

var _ sandbox.Provider = (*Provider)(nil)

// New returns a host provider.
func New(opts Options) *Provider {
	if opts.TempDir == "" {
		opts.TempDir = os.TempDir()
	}
	if opts.ReleaseTimeout <= 0 {
		opts.ReleaseTimeout = DefaultReleaseTimeout
	}
	env := make(map[string]string, len(opts.Env))
	for k, v := range opts.Env {
		env[k] = v
	}
	opts.Env = env
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Provider{opts: opts, log: log, owner: procowner.Self()}
}

// ReleaseAll releases every lease of p not released yet, concurrently,
// and joins the errors: the last line of defence before the process exits
// (each Release is bounded by Options.ReleaseTimeout, also after ctx is
// cancelled).
func (p *Provider) ReleaseAll(ctx context.Context) error { return p.leases.ReleaseAll(ctx) }

// Live returns the ids of the leases acquired and not yet released.
func (p *Provider) Live() []string { return p.leases.Live() }

// Name returns "host".
func (p *Provider) Name() string { return "host" }

// Acquire creates a lease: a directory under Options.TempDir holding the
// private home and, when spec.Workspace is empty, the workspace.
func (p *Provider) Acquire(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("acquire host sandbox: %w", err)
	}
	if err := supported(); err != nil {
		return nil, outposterr.Wrap(outposterr.Sandbox, err, "acquire host sandbox")
	}
	if err := p.checkSpec(spec); err != nil {
		return nil, err
	}
	workspace, err := leasekit.WorkspaceDir(spec.Workspace)
	if err != nil {
		return nil, err
	}

	dir, err := os.MkdirTemp(p.opts.TempDir, LeasePrefix)
	if err != nil {
		return nil, outposterr.Wrap(outposterr.Sandbox, err, "create lease directory")
	}
	// The owner record lets `outpost gc` (see [Reap]) remove the directory
	// if this process dies without releasing it (kill -9, a crash).
	if err := writeOwner(dir, p.owner); err != nil {
		return nil, errors.Join(outposterr.Wrap(outposterr.Sandbox, err, "record lease owner"), removeAll(dir))
	}
	l := &lease{
		p:       p,
		id:      filepath.Base(dir),
		dir:     dir,
		home:    filepath.Join(dir, "home"),
		root:    workspace,
		specEnv: mergeEnv(spec.Env),
		opts:    p.opts,
		log:     p.log.With("sandbox", "host", "lease", filepath.Base(dir)),
		running: make(map[*process]struct{}),
	}
	// The lease directory is created 0700 by MkdirTemp; home is 0700 too,
	// explicitly, whatever the umask.
	if spec.RealHome {
		l.home = p.opts.RealHome
	} else if err := mkdirMode(l.home, 0o700); err != nil {
		return nil, errors.Join(outposterr.Wrap(outposterr.Sandbox, err, "create private home"), removeAll(dir))
	}
	if l.root == "" {
		l.root = filepath.Join(dir, "workspace")
		if err := mkdirMode(l.root, 0o755); err != nil {
			return nil, errors.Join(outposterr.Wrap(outposterr.Sandbox, err, "create workspace"), removeAll(dir))
		}
	}
	if spec.Image != "" || len(spec.Labels) > 0 || spec.CPUs != 0 || spec.MemoryBytes != 0 || spec.Pids != 0 {
		l.log.Debug("ignoring container-only spec fields", "image", spec.Image,
			"labels", len(spec.Labels), "cpus", spec.CPUs, "memory", spec.MemoryBytes, "pids", spec.Pids)
	}
	p.leases.Track(l)
	l.log.Debug("acquired", "home", l.home, "root", l.root, "real_home", spec.RealHome)
	return l, nil
}

// checkSpec refuses spec fields the host cannot honour without weakening
// what the caller asked for.
func (p *Provider) checkSpec(spec sandbox.Spec) error {
	switch {
	case spec.Network != "" && spec.Network != "host":
		return outposterr.New(outposterr.Configuration,
			"host sandbox cannot restrict the network (spec asks for %q); use an isolated provider", spec.Network)
	case spec.User != "":
		return outposterr.New(outposterr.Configuration, "host sandbox cannot run as another user (spec asks for %q)", spec.User)
	case len(spec.Mounts) > 0:
		return outposterr.New(outposterr.Configuration, "host sandbox does not support mounts")
	case len(spec.Forwards) > 0:
		return outposterr.New(outposterr.Configuration,
			"host sandbox cannot forward sockets: its loopback is the host's (reach a gateway on its loopback TCP listener instead)")
	}
	for k := range spec.Env {
		if !sandbox.ValidEnvName(k) {
			return outposterr.New(outposterr.Configuration, "invalid environment variable name %q", k)
		}
	}
	if spec.RealHome {
		if p.opts.RealHome == "" || !filepath.IsAbs(p.opts.RealHome) {
			return outposterr.New(outposterr.Configuration, "spec asks for the real home but the host provider has no absolute Options.RealHome")
		}
		fi, err := os.Stat(p.opts.RealHome)
		if err != nil {
			return outposterr.Wrap(outposterr.Configuration, err, "real home")
		}
		if !fi.IsDir() {
			return outposterr.New(outposterr.Configuration, "real home %q is not a directory", p.opts.RealHome)
		}
	}
	return nil
}

// lease is one host sandbox.
type lease struct {
	p          *Provider
	id, dir    string
	home, root string
	specEnv    map[string]string // a copy of Spec.Env
	opts       Options
	log        *slog.Logger

	mu       sync.Mutex
	released bool
	running  map[*process]struct{} // processes not yet Closed
	relErr   error
	relDone  chan struct{} // closed when the first Release finished
}

var _ sandbox.Sandbox = (*lease)(nil)

func (l *lease) ID() string   { return l.id }
func (l *lease) Home() string { return l.home }

// Unisolated implements [sandbox.Unisolated]: a host lease is the host.
func (l *lease) Unisolated() bool { return true }
func (l *lease) Root() string     { return l.root }

var errReleased = errors.New("sandbox released")

// checkLive returns a sandbox error once the lease is released. Caller holds l.mu.
func (l *lease) checkLiveLocked(op string) error {
	if l.released {
		return outposterr.Wrap(outposterr.Sandbox, errReleased, "%s in host sandbox %s", op, l.id)
	}
	return nil
}

func (l *lease) checkLive(op string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.checkLiveLocked(op)
}

// Release kills every process still running from this lease and removes the
// private home and the temporary workspace. A caller-provided workspace and
// the real home are never removed. Release is idempotent; later calls return
// the first call's result after it finished.
func (l *lease) Release(ctx context.Context) error {
	l.mu.Lock()
	if l.released {
		done := l.relDone
		l.mu.Unlock()
		<-done
		return l.relErr
	}
	l.released = true
	l.relDone = make(chan struct{})
	procs := make([]*process, 0, len(l.running))
	for p := range l.running {
		procs = append(procs, p)
	}
	l.mu.Unlock()
	defer close(l.relDone)

	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.opts.ReleaseTimeout)
	defer cancel()
	var errs []error
	for _, p := range procs {
		if err := p.closeCtx(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if err := removeAll(l.dir); err != nil {
		errs = append(errs, outposterr.Wrap(outposterr.Sandbox, err, "remove lease directory"))
	}
	l.relErr = errors.Join(errs...)
	l.p.leases.Untrack(l)
	l.log.Debug("released", "killed", len(procs), "err", l.relErr)
	return l.relErr
}

func (l *lease) forget(p *process) {
	l.mu.Lock()
	delete(l.running, p)
	l.mu.Unlock()
}

// mergeEnv returns a new map with the maps applied in order, later winning.
func mergeEnv(maps ...map[string]string) map[string]string {
	out := make(map[string]string)
	for _, m := range maps {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

// mkdirMode creates dir with exactly mode, whatever the umask.
func mkdirMode(dir string, mode fs.FileMode) error {
	if err := os.Mkdir(dir, mode); err != nil {
		return err
	}
	return os.Chmod(dir, mode)
}

// removeAll removes path, making directories writable first when the tree
// holds read-only ones (Go's module cache, for one, is read-only). A missing
// path is not an error.
func removeAll(path string) error {
	err := os.RemoveAll(path)
	if err == nil {
		return nil
	}
	_ = filepath.WalkDir(path, func(p string, d fs.DirEntry, werr error) error {
		if werr == nil && d.IsDir() {
			_ = os.Chmod(p, 0o700)
		}
		return nil
	})
	return os.RemoveAll(path)
}
