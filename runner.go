package outpost

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/user"
	"path/filepath"
	"sync"
	"time"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/agents"
	"github.com/outpost-dev/outpost/batch"
	"github.com/outpost-dev/outpost/bootstrap"
	"github.com/outpost-dev/outpost/conversation"
	"github.com/outpost-dev/outpost/credentials"
	"github.com/outpost-dev/outpost/harness"
	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/outposttest"
	"github.com/outpost-dev/outpost/sandbox"
	"github.com/outpost-dev/outpost/typed"
)

// Options configure a [Runner]. Zero values are documented per field; the
// zero Options run agents in Docker leases with no credentials (auth none)
// and the project's default conversation store.
type Options struct {
	// Project is the project directory: its .outpost/.env declares the
	// variables turns may use and .outpost/drivers its spec-defined
	// drivers (empty: the current directory).
	Project string
	// Sandbox says where turns run (kind, image, network, user).
	Sandbox SandboxOptions
	// Sandboxes is the table of sandbox kinds (nil: [SandboxKinds]).
	Sandboxes map[string]SandboxKind
	// Agents is the agent registry (nil: [agents.Builtin]); the project's
	// drivers are added to it.
	Agents *agents.Registry

	// Auth is how CLIs authenticate (zero: none). It is never guessed.
	Auth credentials.Auth
	// Forward names variables whose values Getenv gives, forwarded into
	// sandboxes beside the project's declared ones.
	Forward []string
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
}

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
	// Workspace is the host directory the agent works in (empty: the
	// project directory).
	Workspace string
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
	kind    SandboxKind
	creds   *harness.Credentials
	store   conversation.Store
	srv     *outposttest.Server
	logger  *slog.Logger
	project string

	mu       sync.Mutex
	engine   SandboxEngine
	adapters map[string]adapters.Adapter
	clis     map[string]*Installed
	closed   bool
}

// New checks opts and returns a runner. Nothing is started or bootstrapped
// until the first turn, except the scripted server of Offline.
func New(ctx context.Context, opts Options) (*Runner, error) {
	r := &Runner{opts: opts, logger: opts.Logger, adapters: map[string]adapters.Adapter{}, clis: map[string]*Installed{}}
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
	if r.kind, err = lookupSandbox(r.opts.Sandboxes, opts.Sandbox.Kind); err != nil {
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
	if r.creds, err = LoadCredentials(abs, auth, opts.Forward, opts.Getenv); err != nil {
		return nil, err
	}
	for _, s := range opts.MCP {
		if err := s.Validate(); err != nil {
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
	if opts.Offline {
		if r.srv, err = outposttest.NewServer(opts.OfflineServer...); err != nil {
			return nil, outposterr.Wrap(outposterr.Configuration, err, "start the scripted model server")
		}
	}
	return r, nil
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
	if r.engine != nil {
		r.engine.Close()
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
// once and delivered the engine's way.
func (r *Runner) lease(ctx context.Context, row agents.Agent, workspace string) (sandbox.Provider, sandbox.Spec, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, sandbox.Spec{}, outposterr.New(outposterr.Configuration, "the runner is closed")
	}
	if r.engine == nil {
		o := r.opts.Sandbox
		if r.srv != nil && o.Network == "" {
			o.Network = "host" // the scripted server listens on loopback
		}
		if o.Project == "" {
			o.Project = r.project
		}
		if o.Version == "" {
			o.Version = r.opts.Version
		}
		e, err := r.kind.Open(ctx, o, r.logger)
		if err != nil {
			return nil, sandbox.Spec{}, err
		}
		r.engine = e
	}
	cli, err := r.ensureCLI(ctx, row)
	if err != nil {
		return nil, sandbox.Spec{}, err
	}
	prov, spec, err := r.engine.Lease(cli, workspace)
	if err != nil {
		return nil, spec, err
	}
	if cli != nil && r.engine.Delivery() == DeliverCopy {
		prov = cli.Bootstrapper.CopyInProvider(prov, cli.Entry, basePath)
	}
	return prov, spec, nil
}

// ensureCLI bootstraps row's pinned CLI once; an agent without a catalog
// row (a driver, a test double) runs as the sandbox finds it.
func (r *Runner) ensureCLI(ctx context.Context, row agents.Agent) (*Installed, error) {
	if row.CLI == nil {
		return nil, nil
	}
	if cli, ok := r.clis[row.Name]; ok {
		return cli, nil
	}
	b := r.opts.Bootstrap
	if b == nil {
		var err error
		if b, err = NewBootstrapper(ctx, BootstrapOptions{Project: r.project, Getenv: r.opts.Getenv}); err != nil {
			return nil, err
		}
		r.opts.Bootstrap = b
	}
	e, err := b.Ensure(ctx, row.CLI.Name)
	if err != nil {
		return nil, outposterr.Wrap(outposterr.Bootstrap, err,
			"%s CLI: install the pinned version (outpost bootstrap; set %s or npm's registry, or %s for an offline mirror)",
			row.Name, RegistryEnv, MirrorEnv)
	}
	cli := &Installed{Entry: e, Bootstrapper: b}
	r.clis[row.Name] = cli
	return cli, nil
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

// checkWorkspace refuses a workspace (links resolved) that is the root
// directory or holds one of homes: the agent would get every file of the
// machine or of the user — SSH keys, cloud credentials, other projects —
// read-write.
func checkWorkspace(abs string, homes []string) error {
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return outposterr.Wrap(outposterr.Configuration, err, "workspace %s", abs)
	}
	if real == string(filepath.Separator) {
		return outposterr.New(outposterr.Configuration, "workspace %s is the root directory: give the agent a project directory", abs)
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

// Prepare builds the harness turn of t without running it: the agent is
// looked up, the input and credentials are resolved and the turn is
// validated (harness.Turn.Validate) — but no sandbox is opened and no CLI
// bootstrapped. Run calls it first.
func (r *Runner) Prepare(t Turn) (harness.Turn, agents.Agent, string, error) {
	row, a, err := r.adapter(t.Agent)
	if err != nil {
		return harness.Turn{}, row, "", err
	}
	workspace, err := r.resolveWorkspace(t.Workspace)
	if err != nil {
		return harness.Turn{}, row, "", err
	}
	if row.Driver != nil {
		// The driver's workdir must stay inside this turn's workspace too.
		if err := row.Driver.CheckWorkdir(workspace); err != nil {
			return harness.Turn{}, row, "", err
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
	ht := harness.Turn{
		Adapter: a, Input: in, Store: r.store, Credentials: r.creds, OnEvent: t.OnEvent, Logger: r.logger,
		StopOnQuotaRetry: t.StopOnQuotaRetry, Reseed: r.opts.Reseed, Live: t.Live, Schema: t.Schema,
		Limits: r.opts.Limits,
	}
	if err := ht.Validate(); err != nil {
		return ht, row, workspace, err
	}
	return ht, row, workspace, nil
}

// Run runs one turn. The returned error is the result's classified error;
// the result is nil only when the turn was refused before anything ran.
func (r *Runner) Run(ctx context.Context, t Turn) (*harness.Result, error) {
	ht, row, workspace, err := r.Prepare(t)
	if err != nil {
		return nil, err
	}
	if ht.Provider, ht.Spec, err = r.lease(ctx, row, workspace); err != nil {
		return nil, err
	}
	return harness.Run(ctx, ht)
}

// Batch runs jobs (package batch) through the runner: each job's turns run
// in its workspace (default: the project) with its schema. Every job's
// agent and fallbacks are checked before anything runs.
func (r *Runner) Batch(ctx context.Context, jobs []batch.Job, opts batch.Options) ([]batch.Record, error) {
	for i := range jobs {
		j := &jobs[i]
		if err := j.Compile(); err != nil {
			return nil, err
		}
		for _, name := range append([]string{j.Agent}, j.Fallback...) {
			if _, err := r.table.Lookup(name); err != nil {
				return nil, outposterr.Wrap(outposterr.Configuration, err, "job %s", j.ID)
			}
		}
	}
	return batch.Run(ctx, jobs, func(ctx context.Context, t batch.Turn) (*harness.Result, error) {
		res, err := r.Run(ctx, Turn{Agent: t.Agent, Prompt: t.Prompt, Model: t.Job.Model,
			Continue: t.Continue, Workspace: t.Job.Workspace, StopOnQuotaRetry: true, Schema: t.Job.Compiled})
		if res == nil {
			res = &harness.Result{Agent: t.Agent, Err: err, Started: time.Now()}
		}
		return res, err
	}, opts)
}

// String names the runner for logs.
func (r *Runner) String() string {
	return fmt.Sprintf("outpost runner (%s, project %s)", r.kind.Name, r.project)
}
