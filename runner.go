package outpost

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/agents"
	"github.com/outpost-dev/outpost/batch"
	"github.com/outpost-dev/outpost/bootstrap"
	"github.com/outpost-dev/outpost/conversation"
	"github.com/outpost-dev/outpost/credentials"
	"github.com/outpost-dev/outpost/gateway"
	"github.com/outpost-dev/outpost/harness"
	"github.com/outpost-dev/outpost/internal/gatewayroute"
	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/outposttest"
	"github.com/outpost-dev/outpost/sandbox"
	"github.com/outpost-dev/outpost/sandbox/pool"
	"github.com/outpost-dev/outpost/source"
	"github.com/outpost-dev/outpost/typed"
	"github.com/outpost-dev/outpost/usage"
)

// Options configure a [Runner]. Zero values are documented per field; the
// zero Options run agents in Docker leases with no credentials (auth none)
// and the project's default conversation store.
type Options struct {
	// Project is the project directory: its .outpost/.env declares the
	// variables turns may use and .outpost/drivers its spec-defined
	// drivers (empty: the current directory).
	Project string
	// Sandbox says where turns run (kind, image, network, user, limits,
	// the kind's own settings).
	Sandbox SandboxOptions
	// Sandboxes is the registry of sandbox kinds (nil: [SandboxKinds]).
	Sandboxes sandbox.Kinds
	// Agents is the agent registry (nil: [agents.Builtin]); the project's
	// drivers are added to it.
	Agents *agents.Registry

	// Auth is how CLIs authenticate (zero: none). It is never guessed.
	Auth credentials.Auth
	// Forward names variables whose values Getenv gives, forwarded into
	// sandboxes beside the project's declared ones.
	Forward []string
	// Secrets names variables whose values are secrets whatever their
	// names: the CLI's output has them replaced by [REDACTED], as it has
	// the values of variables named like secrets (KEY, TOKEN, SECRET,
	// PASSWORD, …; see harness.Credentials.Secret). Each must be declared,
	// forwarded (Forward) or, for a batch, named by a job's env: see
	// [Runner.CheckSecrets].
	Secrets []string
	// MCP servers are given to every turn, projected into each CLI's form.
	MCP []credentials.MCPServer

	// Store keeps conversations (nil: the project's store in the state
	// directory, see [OpenStore]; set NoStore to keep none).
	Store   conversation.Store
	NoStore bool

	// Offline starts the scripted model server (package outposttest) on
	// loopback and points every CLI at it: real CLIs, no account, no
	// network, no tokens. OfflineServer options configure it.
	Offline       bool
	OfflineServer []outposttest.Option

	// Bootstrap installs the pinned CLIs (nil: [NewBootstrapper] with the
	// default cache, downloading what is missing from npm's configured
	// registry, verified against the pinned SHA-512).
	Bootstrap *bootstrap.Bootstrapper

	// Credentials says where a credential that can stay outside the
	// sandbox goes: CredentialsGateway (the default) keeps it in a model
	// gateway and gives the lease a placeholder. The runner runs that
	// gateway itself for Docker, Podman and host leases (a Docker lease then
	// needs no network at all: the gateway is reached over a unix socket
	// relayed on the lease's own loopback); a Kubernetes pod runs it in a
	// sidecar container when Sandbox.GatewayBinary is set, else reaches the
	// runner's when it shares this machine's network. CredentialsInside
	// installs it in the lease. Forms a CLI must refresh itself (login
	// files) always go inside; so do credentials of leases that cannot
	// reach a gateway, unless CredentialsGateway is asked for: then it is an
	// error.
	Credentials CredentialMode

	// Effort and Schema are the defaults of turns that set none.
	Effort string
	Schema *typed.Schema

	// Limits bound each turn; Reseed retries a lost conversation once in a
	// new one seeded with its transcript.
	Limits harness.Limits
	Reseed bool
	// CLIRetries caps the CLI's own retries of a failed model request,
	// where the CLI has a setting for it (Claude Code's
	// CLAUDE_CODE_MAX_RETRIES; Codex's request and stream retries of an
	// endpoint — its built-in OpenAI provider takes no override; Copilot
	// CLI has none and gives up on a 401 after two). Nil:
	// [DefaultCLIRetries] (1 with Offline). A CLI's own default (Claude
	// Code: 10, with backoff up to 32 s) spends minutes retrying a rejected
	// key; the caller's retry policy (batch) decides what deserves waiting.
	CLIRetries *int

	// Getenv is where forwarded and declared variables, the state
	// directory, the engine address and npm's settings come from. Nil:
	// nowhere (the library never reads the process environment itself;
	// pass os.Getenv for the outpost command's behaviour).
	Getenv Getenv
	// Logger receives debug logs (nil: none). Secrets are never logged.
	Logger *slog.Logger
	// Version labels sandbox resources (the outpost command's version).
	Version string
	// TempDir is where task workspaces' sources are prepared (empty:
	// os.TempDir()).
	TempDir string
	// SourceSSHIdentity lets git fetch a job's source over ssh with this
	// user's SSH keys and configuration (source.Options.SSHIdentity); off,
	// an ssh source is fetched without them.
	SourceSSHIdentity bool
	// Pool keeps leases created and started ahead of demand (package
	// sandbox/pool); zero: none, every turn makes its own lease.
	Pool PoolOptions
}

// PoolOptions configure the runner's warm lease pools: one pool per agent
// (the CLI its leases get, and whether a gateway sidecar runs beside
// them) keeps up to Size leases created and started, the agent's CLI
// delivered, before a turn asks. Size bounds the agent's pool across
// lease specs (workspace, image, limits, network, user): leases are kept
// per spec, and a turn whose spec finds the pool full of other specs'
// leases makes its own. A turn takes one — never a lease another turn
// used — and the pool makes the next in the background. Credentials, the
// turn's environment and its gateway grant are applied after the turn
// took its lease, as for any lease. Pooled leases are released when their
// spec was not asked for in IdleTimeout, and all of them when the runner
// closes.
type PoolOptions struct {
	// Size is how many leases each agent's pool keeps ready, across specs
	// (0: no pool; a batch passes its concurrency).
	Size int
	// IdleTimeout releases the ready leases of a spec no turn asked for
	// in that long (0: pool.DefaultIdleTimeout, 5 minutes).
	IdleTimeout time.Duration
}

// CredentialMode says where a bridgeable credential goes.
type CredentialMode string

// The credential modes.
const (
	CredentialsDefault CredentialMode = ""
	CredentialsGateway CredentialMode = "gateway"
	CredentialsInside  CredentialMode = "inside"
)

// DefaultCLIRetries is the CLIs' own retry budget for one model request
// when Options.CLIRetries is nil: a rejected key (401) is reported as an
// authentication failure within seconds (Claude Code: about 6 s, start-up
// included, instead of 3 minutes), while a brief overload still gets a few
// seconds of backoff. Figures: BENCHMARKS.md.
const DefaultCLIRetries = 2

// Turn is one turn a [Runner] runs. Agent and Prompt are required.
type Turn struct {
	// Agent names a registered agent or a driver of the project.
	Agent  string
	Prompt string
	// Model and Effort select the model and reasoning effort.
	Model, Effort string
	// Continue is a stored conversation to resume; Fork continues it as
	// a new conversation.
	Continue string
	Fork     bool
	// Workspace is the host directory the agent works in, in place
	// (empty: the project directory, unless Source is set).
	Workspace string
	// Source, when set, gives the turn a task workspace instead: a fresh
	// copy of a git checkout or a directory (package source), prepared on
	// the host once per source for the runner's life and copied into the
	// lease (Sandbox.CopyIn). With a git source the result carries the
	// patch of everything the agent changed (Result.Patch). Workspace must
	// be empty.
	Source *source.Spec
	// EarlierPatch is re-applied on Source's fresh copy before the CLI
	// runs: the changes of the job's earlier turns, for a conversation
	// continued in a new lease.
	EarlierPatch []byte
	// Limits override the runner's limits for this turn, field by field
	// (zero fields keep the runner's): timeouts, cost, token and turn caps.
	Limits harness.Limits
	// Budget, when set, is a budget this turn shares with others (a
	// batch's cap): a turn whose credential goes through the model gateway
	// draws on it there, beside its own caps.
	Budget *gateway.Budget
	// Image, CPUs, MemoryBytes and Pids override the lease's container
	// image and limits (0: the sandbox's defaults). The host sandbox, which
	// applies none of them, refuses them.
	Image       string
	CPUs        float64
	MemoryBytes int64
	Pids        int64
	// Env names more variables to forward into the sandbox, beside
	// Options.Forward (values from Options.Getenv).
	Env []string
	// Schema asks for a typed response (see harness.Turn.Schema).
	Schema *typed.Schema
	// Live steers the running turn (see harness.Turn.Live).
	Live <-chan string
	// StopOnQuotaRetry stops a turn as soon as the CLI's retries prove a
	// quota failure (batch does).
	StopOnQuotaRetry bool
	// OnEvent receives every event as it is decoded.
	OnEvent func(adapters.Event)
}

// Runner runs turns the way the outpost command does: it finds the agent
// (built-in or a project driver), plans credentials from the project's
// declared variables, bootstraps the pinned CLI once (SHA-512 verified,
// cached on the host) and delivers it into each lease the sandbox engine's
// way, chooses the lease user, restores and captures conversations, and
// classifies the result. It is safe for concurrent turns. Close it.
type Runner struct {
	opts    Options
	table   *AgentTable
	kind    sandbox.Kind
	creds   *harness.Credentials
	store   conversation.Store
	srv     *outposttest.Server
	logger  *slog.Logger
	project string
	// reloc are the registered CLIs' relocation variables, reserved.
	reloc []string

	mu       sync.Mutex
	engine   sandbox.Engine
	router   *gatewayroute.Router
	adapters map[string]adapters.Adapter
	// clis are the agents' CLI installations, each made once (see
	// ensureCLI); a failed one is forgotten, so a later turn tries again.
	clis    map[string]*cliInstall
	sources *source.Preparer
	pools   map[string]*pool.Pool
	closed  bool
	// fpKey keys account fingerprints (HMAC): they identify a credential
	// within this runner and reveal nothing of it.
	fpKey [32]byte
	// life bounds what the runner does for all its turns (installing a
	// CLI); Close ends it.
	life    context.Context
	endLife context.CancelFunc
}

// New checks opts and returns a runner. Nothing is started or bootstrapped
// until the first turn, except the scripted server of Offline.
func New(ctx context.Context, opts Options) (*Runner, error) {
	r := &Runner{opts: opts, logger: opts.Logger, adapters: map[string]adapters.Adapter{}, clis: map[string]*cliInstall{}}
	_, _ = rand.Read(r.fpKey[:])
	r.life, r.endLife = context.WithCancel(context.WithoutCancel(ctx))
	if r.logger == nil {
		r.logger = slog.New(slog.DiscardHandler)
	}
	project := opts.Project
	if project == "" {
		wd, err := os.Getwd()
		if err != nil {
			return nil, outposterr.Wrap(outposterr.Configuration, err, "find the current directory")
		}
		project = wd
	}
	abs, err := filepath.Abs(project)
	if err != nil {
		return nil, outposterr.Wrap(outposterr.Configuration, err, "project directory")
	}
	r.project = abs
	if r.opts.Sandboxes == nil {
		r.opts.Sandboxes = SandboxKinds()
	}
	if r.kind, err = r.opts.Sandboxes.Lookup(opts.Sandbox.Kind); err != nil {
		return nil, err
	}
	reg := opts.Agents
	if reg == nil {
		reg = agents.Builtin()
	}
	if r.table, err = LoadAgents(reg, abs); err != nil {
		return nil, err
	}
	auth := opts.Auth
	if auth.Form == "" {
		auth.Form = credentials.None
	}
	r.reloc = reg.RelocationVars()
	if r.creds, err = LoadCredentials(abs, auth, opts.Forward, opts.Getenv, r.reloc); err != nil {
		return nil, err
	}
	for _, name := range opts.Secrets {
		if !sandbox.ValidEnvName(name) {
			return nil, outposterr.New(outposterr.Configuration, "secret takes a variable name, not %q", name)
		}
	}
	r.creds.Secret = opts.Secrets
	switch opts.Credentials {
	case CredentialsDefault, CredentialsGateway, CredentialsInside:
	default:
		return nil, outposterr.New(outposterr.Configuration, "credentials must be gateway or inside, not %q", opts.Credentials)
	}
	for _, s := range opts.MCP {
		if err := s.Validate(r.reloc...); err != nil {
			return nil, err
		}
	}
	switch {
	case opts.NoStore:
	case opts.Store != nil:
		r.store = opts.Store
	default:
		fs, err := OpenStore(StoreOptions{Project: abs, Getenv: opts.Getenv})
		if err != nil {
			return nil, err
		}
		r.store = fs
	}
	if opts.Pool.Size < 0 || opts.Pool.IdleTimeout < 0 {
		return nil, outposterr.New(outposterr.Configuration, "the lease pool's size and idle timeout must not be negative")
	}
	if opts.Offline {
		if r.srv, err = outposttest.NewServer(opts.OfflineServer...); err != nil {
			return nil, outposterr.Wrap(outposterr.Configuration, err, "start the scripted model server")
		}
	}
	mode := gatewayroute.Auto
	switch opts.Credentials {
	case CredentialsGateway:
		mode = gatewayroute.Gateway
	case CredentialsInside:
		mode = gatewayroute.Inside
	}
	r.router = &gatewayroute.Router{Mode: mode, Upstreams: r.upstreams, Offline: r.srv != nil,
		Network: opts.Sandbox.Network, Kind: r.kind.Name, Logger: r.logger}
	return r, nil
}

// upstreams is the gateway's allowlist: the model APIs the registered
// agents' CLIs use given the project's variables (each adapter declares its
// own, [adapters.Upstreamer]), and the scripted server.
func (r *Runner) upstreams() []string {
	ups := r.table.Registry.Upstreams(r.creds.Vars)
	if r.srv != nil {
		ups = append(ups, r.srv.URL())
	}
	return ups
}

// Close releases what the runner still holds: the sandbox engine (every
// lease left is removed, bounded, also after cancellation) and the
// scripted server. Idempotent.
func (r *Runner) Close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	r.closed = true
	r.endLife()
	// The pools first: the leases they hold are released (bounded) before
	// the engine sweeps what is left.
	var wg sync.WaitGroup
	for _, p := range r.pools {
		wg.Go(p.Close)
	}
	wg.Wait()
	if r.engine != nil {
		r.engine.Close()
	}
	r.router.Close()
	if r.sources != nil {
		if err := r.sources.Close(); err != nil {
			r.logger.Warn("remove prepared sources", "err", err)
		}
	}
	if r.srv != nil {
		_ = r.srv.Close()
	}
}

// Agents is the runner's agent table (built-ins and the project's drivers).
func (r *Runner) Agents() *AgentTable { return r.table }

// Store is the conversation store (nil with NoStore).
func (r *Runner) Store() conversation.Store { return r.store }

// Credentials are the credential choice every turn uses.
func (r *Runner) Credentials() *harness.Credentials { return r.creds }

// OfflineServer is the scripted model server of Options.Offline (nil
// without): its request log shows what every turn asked.
func (r *Runner) OfflineServer() *outposttest.Server { return r.srv }

// AccountFingerprint identifies the account agent's turns use: the agent,
// the credential form and the values of the declared variables, keyed
// with a secret of this runner (HMAC-SHA-256). Two turns with the same
// fingerprint share a quota; the fingerprint reveals nothing of the
// credential, never leaves the process, and differs between runners.
func (r *Runner) AccountFingerprint(agent string) string {
	m := hmac.New(sha256.New, r.fpKey[:])
	fmt.Fprintf(m, "%q %q %q %q\x00", agent, r.creds.Auth.Form, r.creds.Auth.Source, r.creds.HostHome)
	names := make([]string, 0, len(r.creds.Vars))
	for k := range r.creds.Vars {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		fmt.Fprintf(m, "%q=%q\x00", k, r.creds.Vars[k])
	}
	return hex.EncodeToString(m.Sum(nil)[:8])
}

// prepareSource returns the snapshot of s, preparing the runner's
// sources on first use.
func (r *Runner) prepareSource(ctx context.Context, s source.Spec) (*source.Snapshot, error) {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil, outposterr.New(outposterr.Configuration, "the runner is closed")
	}
	if r.sources == nil {
		p, err := source.NewPreparer(source.Options{TempDir: r.opts.TempDir, Logger: r.logger, SSHIdentity: r.opts.SourceSSHIdentity})
		if err != nil {
			r.mu.Unlock()
			return nil, err
		}
		r.sources = p
	}
	p := r.sources
	r.mu.Unlock()
	return p.Prepare(ctx, s)
}

// adapter returns the runner's adapter for the agent named name, built
// once.
func (r *Runner) adapter(name string) (agents.Agent, adapters.Adapter, error) {
	row, err := r.table.Lookup(name)
	if err != nil {
		return agents.Agent{}, nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	a, ok := r.adapters[name]
	if !ok {
		a = row.New()
		r.adapters[name] = a
	}
	return row, a, nil
}

// lease returns the provider and lease spec for a turn of row in
// workspace: the engine is opened once, the agent's pinned CLI bootstrapped
// once and delivered the engine's way (a copy is made by [Runner.deliver]).
func (r *Runner) lease(ctx context.Context, row agents.Agent, workspace string) (sandbox.Provider, sandbox.Spec, *Installed, error) {
	if err := r.openEngine(ctx); err != nil {
		return nil, sandbox.Spec{}, nil, err
	}
	// Installing a CLI (a download of hundreds of megabytes, the first
	// time) holds no lock: other agents' turns go on meanwhile.
	cli, err := r.ensureCLI(ctx, row)
	if err != nil {
		return nil, sandbox.Spec{}, nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, sandbox.Spec{}, nil, outposterr.New(outposterr.Configuration, "the runner is closed")
	}
	prov, spec, err := r.engine.Lease(cli.forEngine(), workspace)
	if err != nil {
		return nil, spec, nil, err
	}
	spec.Hide = append(spec.Hide, hiddenDirs(r.project, workspace)...)
	return prov, spec, cli, nil
}

// openEngine opens the sandbox engine once.
func (r *Runner) openEngine(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return outposterr.New(outposterr.Configuration, "the runner is closed")
	}
	if r.engine == nil {
		o := r.opts.Sandbox
		c := sandbox.Config{Kind: o.Kind, Common: o.Common, Settings: o.Settings, Getenv: r.opts.Getenv,
			GatewayBinary: o.GatewayBinary, Version: r.opts.Version, Logger: r.logger}
		if r.srv != nil && c.Network == "" {
			c.Network = "host" // the scripted server listens on loopback
		}
		e, err := r.kind.Open(ctx, c)
		if err != nil {
			return err
		}
		r.engine = e
	}
	return nil
}

// deliver wraps p so each lease gets cli copied in, when the engine
// delivers CLIs by copy.
func (r *Runner) deliver(p sandbox.Provider, cli *Installed) sandbox.Provider {
	d := r.engine.Delivery()
	if cli == nil || d.Mode != sandbox.DeliverCopy {
		return p
	}
	return cli.Bootstrapper.CopyInProvider(p, cli.Entry, sandbox.BasePath, d.Dir)
}

// pooled returns the warm pool of agent's leases (sidecar: with a
// gateway sidecar) wrapping p, made on first use, or p itself without
// Options.Pool. The providers a runner builds for one agent and sidecar
// choice are interchangeable (the engine's, the agent's CLI delivered
// the engine's way, the runner's sidecar arguments), so the first one
// serves the pool; the pool keys leases by their spec.
func (r *Runner) pooled(agent string, sidecar bool, p sandbox.Provider) (sandbox.Provider, error) {
	if r.opts.Pool.Size <= 0 {
		return p, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, outposterr.New(outposterr.Configuration, "the runner is closed")
	}
	key := fmt.Sprintf("%s sidecar=%t", agent, sidecar)
	if pl, ok := r.pools[key]; ok {
		return pl, nil
	}
	pl, err := pool.New(p, pool.Options{Size: r.opts.Pool.Size, IdleTimeout: r.opts.Pool.IdleTimeout, Logger: r.logger})
	if err != nil {
		return nil, err
	}
	if r.pools == nil {
		r.pools = map[string]*pool.Pool{}
	}
	r.pools[key] = pl
	return pl, nil
}

// PoolStats sums what the runner's lease pools did (zero without
// Options.Pool).
func (r *Runner) PoolStats() pool.Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	var s pool.Stats
	for _, p := range r.pools {
		ps := p.Stats()
		s.Warm += ps.Warm
		s.Waited += ps.Waited
		s.Cold += ps.Cold
		s.Created += ps.Created
		s.Released += ps.Released
	}
	return s
}

// cliInstall is one agent's CLI installation: done is closed once cli or
// err is set.
type cliInstall struct {
	done chan struct{}
	cli  *Installed
	err  error
}

// ensureCLI bootstraps row's pinned CLI once; an agent without a catalog
// row (a driver, a test double) runs as the sandbox finds it. The
// installation runs for the runner, not for the turn that asked first
// (Close stops it): every turn of the agent waits for it or for its own
// context, and a failed one is not kept, so a later turn tries again.
func (r *Runner) ensureCLI(ctx context.Context, row agents.Agent) (*Installed, error) {
	if row.CLI == nil {
		return nil, nil
	}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil, outposterr.New(outposterr.Configuration, "the runner is closed")
	}
	in, ok := r.clis[row.Name]
	if !ok {
		b, err := r.bootstrapper(ctx)
		if err != nil {
			r.mu.Unlock()
			return nil, err
		}
		in = &cliInstall{done: make(chan struct{})}
		r.clis[row.Name] = in
		go func() {
			cli, err := r.install(r.life, b, row)
			r.mu.Lock()
			in.cli, in.err = cli, err
			if err != nil {
				delete(r.clis, row.Name)
			}
			r.mu.Unlock()
			close(in.done)
		}()
	}
	r.mu.Unlock()
	select {
	case <-in.done:
		return in.cli, in.err
	case <-ctx.Done():
		return nil, outposterr.Wrap(outposterr.Bootstrap, ctx.Err(), "%s CLI: waiting for its installation", row.Name)
	}
}

// bootstrapper is Options.Bootstrap, made on first use. r.mu is held.
func (r *Runner) bootstrapper(ctx context.Context) (*bootstrap.Bootstrapper, error) {
	if r.opts.Bootstrap == nil {
		b, err := NewBootstrapper(ctx, BootstrapOptions{Project: r.project, Getenv: r.opts.Getenv, Agents: r.table.Registry})
		if err != nil {
			return nil, err
		}
		r.opts.Bootstrap = b
	}
	return r.opts.Bootstrap, nil
}

// install bootstraps row's pinned CLI with b.
func (r *Runner) install(ctx context.Context, b *bootstrap.Bootstrapper, row agents.Agent) (*Installed, error) {
	e, err := b.Ensure(ctx, row.CLI.Name)
	if err != nil {
		return nil, outposterr.Wrap(outposterr.Bootstrap, err,
			"%s CLI: install the pinned version (outpost bootstrap; set %s or npm's registry, or %s for an offline mirror)",
			row.Name, RegistryEnv, MirrorEnv)
	}
	return &Installed{Entry: e, Bootstrapper: b}, nil
}

// resolveWorkspace returns the absolute workspace directory ("": the
// project).
func (r *Runner) resolveWorkspace(dir string) (string, error) {
	if dir == "" {
		dir = r.project
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", outposterr.Wrap(outposterr.Configuration, err, "workspace")
	}
	if st, err := os.Stat(abs); err != nil || !st.IsDir() {
		return "", outposterr.New(outposterr.Configuration, "workspace %s is not a directory", abs)
	}
	if err := checkWorkspace(abs, r.homes()); err != nil {
		return "", err
	}
	return abs, nil
}

// homes are the user's home directories: the account's and $HOME.
func (r *Runner) homes() []string {
	var out []string
	if u, err := user.Current(); err == nil && u.HomeDir != "" {
		out = append(out, u.HomeDir)
	}
	if h := r.opts.Getenv.get("HOME"); h != "" {
		out = append(out, h)
	}
	return out
}

// systemDirs are refused as workspaces: the agent would write into the
// machine's shared or system files (a project below /tmp is fine; /tmp
// itself holds every user's files). pseudoFS are refused with everything
// below them.
var (
	systemDirs = []string{"/tmp", "/var/tmp", "/etc", "/usr", "/var", "/bin", "/sbin", "/lib", "/lib64", "/boot", "/opt", "/srv", "/home", "/run", "/mnt", "/media"}
	pseudoFS   = []string{"/proc", "/sys", "/dev"}
)

// checkWorkspace refuses a workspace (links resolved) that is the root
// directory, a system directory, inside /proc, /sys or /dev, or holds one
// of homes: the agent would get every file of the machine or of the user —
// SSH keys, cloud credentials, other projects — read-write.
func checkWorkspace(abs string, homes []string) error {
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return outposterr.Wrap(outposterr.Configuration, err, "workspace %s", abs)
	}
	if real == string(filepath.Separator) {
		return outposterr.New(outposterr.Configuration, "workspace %s is the root directory: give the agent a project directory", abs)
	}
	for _, d := range systemDirs {
		if real == d {
			return outposterr.New(outposterr.Configuration, "workspace %s is the system directory %s: give the agent a project directory", abs, d)
		}
	}
	for _, d := range pseudoFS {
		if real == d || strings.HasPrefix(real, d+"/") {
			return outposterr.New(outposterr.Configuration, "workspace %s is inside %s, the kernel's view of the machine: give the agent a project directory", abs, d)
		}
	}
	for _, h := range homes {
		hr, err := filepath.EvalSymlinks(h)
		if err != nil {
			continue
		}
		if rel, err := filepath.Rel(real, hr); err == nil && (rel == "." || filepath.IsLocal(rel)) {
			return outposterr.New(outposterr.Configuration,
				"workspace %s holds your home directory (%s): give the agent a project directory (--workspace), not your files", abs, h)
		}
	}
	return nil
}

// Prepared is a turn ready to run: the harness turn, the agent's registry
// row, and the host directory it works in ("" when the turn works on a
// copy of its Source, made by Run).
type Prepared struct {
	Turn      harness.Turn
	Agent     agents.Agent
	Workspace string
}

// Prepare builds the harness turn of t without running it: the agent is
// looked up, the input and credentials are resolved and the turn is
// validated (harness.Turn.Validate) — but no sandbox is opened and no CLI
// bootstrapped. Run calls it first.
func (r *Runner) Prepare(t Turn) (*Prepared, error) {
	row, a, err := r.adapter(t.Agent)
	if err != nil {
		return nil, err
	}
	var workspace string
	if t.Source != nil {
		// A fresh lease of its own; the copy is made by Run.
		if t.Workspace != "" {
			return nil, outposterr.New(outposterr.Configuration, "a turn has a workspace or a source, not both")
		}
		if err := t.Source.Validate(); err != nil {
			return nil, err
		}
	} else if workspace, err = r.resolveWorkspace(t.Workspace); err != nil {
		return nil, err
	}
	if row.Driver != nil && workspace != "" {
		// The driver's workdir must stay inside this turn's workspace too.
		if err := row.Driver.CheckWorkdir(workspace); err != nil {
			return nil, err
		}
	}
	if t.Effort == "" {
		t.Effort = r.opts.Effort
	}
	if t.Schema == nil {
		t.Schema = r.opts.Schema
	}
	in := adapters.Input{Prompt: t.Prompt, Model: t.Model, Effort: t.Effort,
		Continue: t.Continue, Fork: t.Fork, MCP: r.opts.MCP}
	retries := DefaultCLIRetries
	if r.srv != nil {
		// A subscription-style placeholder token makes the CLI read the
		// server's rate-limit headers, as a logged-in account would.
		in.Endpoint = &adapters.Endpoint{BaseURL: r.srv.URL(), OAuthToken: outposttest.PlaceholderOAuthToken}
		// The scripted server answers at once; a CLI retrying would only
		// hide the scenario.
		retries = 1
	}
	if r.opts.CLIRetries != nil {
		retries = *r.opts.CLIRetries
	}
	in.MaxRetries = &retries
	creds, err := r.turnCredentials(t.Env)
	if err != nil {
		return nil, err
	}
	ht := harness.Turn{
		Adapter: a, Input: in, Store: r.store, Credentials: creds, OnEvent: t.OnEvent, Logger: r.logger,
		StopOnQuotaRetry: t.StopOnQuotaRetry, Reseed: r.opts.Reseed, Live: t.Live, Schema: t.Schema,
		Limits: r.opts.Limits.With(t.Limits),
	}
	if err := ht.Validate(); err != nil {
		return nil, err
	}
	return &Prepared{Turn: ht, Agent: row, Workspace: workspace}, nil
}

// turnCredentials are the runner's credentials plus the variables names
// forwards; each must be set.
func (r *Runner) turnCredentials(names []string) (*harness.Credentials, error) {
	if len(names) == 0 {
		return r.creds, nil
	}
	c := *r.creds
	c.Vars = make(map[string]string, len(r.creds.Vars)+len(names))
	for k, v := range r.creds.Vars {
		c.Vars[k] = v
	}
	for _, name := range names {
		if !sandbox.ValidEnvName(name) {
			return nil, outposterr.New(outposterr.Configuration, "env takes variable names, not %q", credentials.ShownName(name))
		}
		if credentials.Reserved(name, r.reloc...) {
			return nil, outposterr.New(outposterr.Configuration,
				"env %s is reserved: Outpost or the sandbox sets it, it would move a CLI's files, or it loads other code", name)
		}
		if _, ok := c.Vars[name]; ok {
			continue
		}
		v := r.opts.Getenv.get(name)
		if v == "" {
			return nil, outposterr.New(outposterr.Configuration, "env %s: the variable is not set", name)
		}
		c.Vars[name] = v
	}
	return &c, nil
}

// Run runs one turn. The returned error is the result's classified error;
// the result is nil only when the turn was refused before anything ran.
func (r *Runner) Run(ctx context.Context, t Turn) (*harness.Result, error) {
	p, err := r.Prepare(t)
	if err != nil {
		return nil, err
	}
	ht, row, workspace := p.Turn, p.Agent, p.Workspace
	if t.Source != nil {
		// The turn's lifetime starts here: copying its source counts
		// against its deadline, and Run gets what is left. Opening the
		// engine and installing the CLI do not: they are the runner's,
		// made once for every turn.
		sctx, cancel := context.WithDeadline(ctx, ht.Begin())
		snap, err := r.prepareSource(sctx, *t.Source)
		expired := ctx.Err() == nil && errors.Is(sctx.Err(), context.DeadlineExceeded)
		cancel()
		if err != nil && expired {
			return nil, outposterr.Wrap(outposterr.Timeout, err, "%s: copy the source: over the turn's deadline", row.Name)
		}
		if err != nil {
			return nil, err
		}
		if row.Driver != nil {
			// The driver's workdir must stay inside the copy too.
			if err := row.Driver.CheckWorkdir(snap.Dir); err != nil {
				return nil, err
			}
		}
		ht.Seed = &harness.Seed{Tar: func(ctx context.Context) (io.ReadCloser, error) { return snap.Tar(ctx), nil },
			Patch: t.EarlierPatch}
		if snap.Commit != "" {
			ht.Patch = &harness.PatchOptions{Base: snap.Commit}
		}
	}
	var cli *Installed
	if ht.Provider, ht.Spec, cli, err = r.lease(ctx, row, workspace); err != nil {
		return nil, err
	}
	over := sandbox.Override{Image: t.Image, CPUs: t.CPUs, MemoryBytes: t.MemoryBytes, Pids: t.Pids}
	isolated := r.engine.Delivery().Mode != sandbox.DeliverHostPath
	if ht.Spec, err = over.Apply(ht.Spec, r.kind.Name, isolated); err != nil {
		return nil, err
	}
	path, err := r.router.Route(ht, r.engine.Gateway(), t.Budget)
	if err != nil {
		return nil, err
	}
	path.Apply(&ht)
	ht.Provider = r.deliver(ht.Provider, cli)
	sidecar := ht.Gateway != nil && ht.Gateway.Remote != nil
	if ht.Provider, err = r.pooled(row.Name, sidecar, ht.Provider); err != nil {
		return nil, err
	}
	res, err := harness.Run(ctx, ht)
	if res != nil && res.CLIVersion == "" && cli != nil {
		// The CLI printed no version (Codex, Copilot): it is the pinned,
		// verified one that was delivered.
		res.CLIVersion = cli.Entry.Version
	}
	return res, err
}

// BatchOptions are batch.Options plus what a runner adds to each turn.
type BatchOptions struct {
	batch.Options
	// Attempt, when set, is called as each turn of a job starts: the turn's
	// events go to the returned onEvent (nil: none), and done (nil: none)
	// receives its result. A run directory records attempts this way.
	Attempt func(t batch.TurnRequest) (onEvent func(adapters.Event), done func(*harness.Result))
}

// Batch runs jobs (package batch) through the runner: each job's turns run
// in its workspace (default: the project) or a fresh copy of its source,
// with its schema, model, effort, limits, resources and forwarded
// variables. Every job's agent, fallbacks and variables are checked before
// anything runs. A nil opts.Account is [Runner.AccountFingerprint], a nil
// opts.Verify [Runner.Verify].
func (r *Runner) Batch(ctx context.Context, jobs []batch.Job, bopts BatchOptions) ([]batch.Record, error) {
	if err := r.CheckJobs(jobs); err != nil {
		return nil, err
	}
	opts := bopts.Options
	if err := r.CheckPrices(jobs, opts); err != nil {
		return nil, err
	}
	if opts.Account == nil {
		opts.Account = r.AccountFingerprint
	}
	if opts.Verify == nil {
		opts.Verify = r.Verify
	}
	// The batch's caps, enforced at the gateway across its concurrent
	// turns (each turn also gets what was left when it started).
	var shared *gateway.Budget
	if opts.MaxCostUSD > 0 || opts.MaxTokens > 0 {
		b, err := gateway.NewCapped(gateway.Caps{USD: opts.MaxCostUSD, Tokens: opts.MaxTokens})
		if err != nil {
			return nil, err
		}
		shared = b
	}
	return batch.Run(ctx, jobs, func(ctx context.Context, t batch.TurnRequest) (*harness.Result, error) {
		j := t.Job
		var onEvent func(adapters.Event)
		var done func(*harness.Result)
		if bopts.Attempt != nil {
			onEvent, done = bopts.Attempt(t)
		}
		res, err := r.Run(ctx, Turn{OnEvent: onEvent, Agent: t.Agent, Prompt: t.Prompt, Model: j.Model, Effort: j.Effort,
			Continue: t.Continue, Workspace: j.Workspace, Source: j.Source, EarlierPatch: t.Patch,
			StopOnQuotaRetry: true, Schema: j.Compiled, Env: j.Env,
			Limits: harness.Limits{Deadline: t.Timeout, IdleTimeout: time.Duration(j.IdleTimeout),
				MaxCostUSD: t.MaxCostUSD, MaxTokens: t.MaxTokens, MaxTurns: t.MaxTurns},
			Budget: shared,
			Image:  j.Image, CPUs: j.CPUs, MemoryBytes: int64(j.Memory), Pids: j.Pids})
		if res == nil {
			res = &harness.Result{Agent: t.Agent, Err: err, Started: time.Now()}
		}
		if done != nil {
			done(res)
		}
		return res, err
	}, opts)
}

// CheckJobs checks jobs as [Runner.Batch] does before anything runs: each
// compiles, its agent and fallbacks exist, and the variables it forwards
// are set. Callers check before creating what the batch writes.
func (r *Runner) CheckJobs(jobs []batch.Job) error {
	for i := range jobs {
		j := &jobs[i]
		if err := j.Compile(); err != nil {
			return err
		}
		if j.Environment != nil {
			// The runner builds no image: a job's environment would
			// silently run on the default image.
			return outposterr.New(outposterr.Configuration,
				"job %s: its environment is not built: build it first (sandbox/kinds.EnsureTaskImage, as outpost batch does) and give the job its tag as image", j.ID)
		}
		for _, name := range append([]string{j.Agent}, j.Fallback...) {
			if _, err := r.table.Lookup(name); err != nil {
				return outposterr.Wrap(outposterr.Configuration, err, "job %s", j.ID)
			}
		}
		if _, err := r.turnCredentials(j.Env); err != nil {
			return outposterr.Wrap(outposterr.Configuration, err, "job %s", j.ID)
		}
	}
	envs := make([][]string, len(jobs))
	for i, j := range jobs {
		envs[i] = j.Env
	}
	return r.CheckSecrets(envs...)
}

// CheckSecrets refuses a name of Options.Secrets that no turn can hold: a
// variable neither declared (.outpost/.env) nor forwarded (Options.Forward)
// nor named by one of envs (the env lists of the turns or jobs to run). A
// misspelt name would otherwise leave the secret it meant shown.
func (r *Runner) CheckSecrets(envs ...[]string) error {
	for _, name := range r.opts.Secrets {
		if _, ok := r.creds.Vars[name]; ok {
			continue
		}
		if !slices.ContainsFunc(envs, func(env []string) bool { return slices.Contains(env, name) }) {
			return outposterr.New(outposterr.Configuration,
				"secret %s: no variable of that name is declared in .outpost/.env or forwarded (--env, a job's env)", name)
		}
	}
	return nil
}

// CheckPrices refuses, before anything runs, a cost cap that cannot be
// enforced: a job capped in dollars (its max_cost_usd, or opts'
// MaxJobCostUSD or MaxCostUSD) whose model — the job's, else its agent's
// pinned default — has no price in the price table (package usage). A
// token cap needs no price and is the way out.
func (r *Runner) CheckPrices(jobs []batch.Job, opts batch.Options) error {
	for i := range jobs {
		j := &jobs[i]
		if j.MaxCostUSD <= 0 && opts.MaxJobCostUSD <= 0 && opts.MaxCostUSD <= 0 {
			continue
		}
		for _, name := range append([]string{j.Agent}, j.Fallback...) {
			if err := r.checkPrice(name, j.Model); err != nil {
				return outposterr.Wrap(outposterr.Configuration, err, "job %s", j.ID)
			}
		}
	}
	return nil
}

// checkPrice refuses a cost cap on agent's turns with model (empty: the
// agent's default) when the model has no price.
func (r *Runner) checkPrice(agent, model string) error {
	if model == "" {
		if _, a, err := r.adapter(agent); err == nil {
			if d, ok := a.(adapters.DefaultModeler); ok {
				model = d.DefaultModel()
			}
		}
	}
	if model == "" {
		// The CLI picks its account's default, a model of the price table
		// (agents' TestModelsArePriced); should it not be, the gateway's
		// cap fails closed.
		return nil
	}
	if _, ok := usage.Lookup(model); !ok {
		return outposterr.New(outposterr.Configuration,
			"a cost cap cannot be enforced for %s: model %q has no price in the price table; cap tokens instead (--max-tokens, max_tokens) or pick a model listed in the price table (usage/prices.go)", agent, model)
	}
	return nil
}

// String names the runner for logs.
func (r *Runner) String() string {
	return fmt.Sprintf("outpost runner (%s, project %s)", r.kind.Name, r.project)
}
