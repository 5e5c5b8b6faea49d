package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/agents"
	"github.com/outpost-dev/outpost/conversation"
	"github.com/outpost-dev/outpost/credentials"
	"github.com/outpost-dev/outpost/harness"
	"github.com/outpost-dev/outpost/internal/lines"
	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/outposttest"
	"github.com/outpost-dev/outpost/sandbox"
	"github.com/outpost-dev/outpost/typed"
)

// NewCmdRun builds `outpost run`. runF replaces the action in tests.
func NewCmdRun(f *Factory, runF func(context.Context, *RunOptions) error) *cobra.Command {
	opts := &RunOptions{IO: f.IO}
	cmd := &cobra.Command{
		Use:   "run --agent NAME [flags] PROMPT|-",
		Short: "Run one turn of an agent CLI in a sandbox",
		Long: `run executes one turn of an agent CLI in a sandbox and streams its normalized
events: human-readable on a terminal, JSON lines with --json (the last line is the
outcome object, as printed by "outpost replay"). The prompt is the argument, or
standard input when it is "-".

--offline starts the scripted model server (outpost stub-model) in-process on
127.0.0.1 and points the CLI at it: a real turn of the real CLI, no account, no
network, no tokens spent. --scenario picks what the server answers (ok, tool,
rate_limit, quota, overloaded, unauthorized, hang, slow).

Credentials are never guessed. --auth chooses the form: account (the host login
file, e.g. ~/.claude/.credentials.json, installed into the sandbox's private home;
a refreshed login is written back), account:variable (CLAUDE_CODE_OAUTH_TOKEN), usage
(ANTHROPIC_API_KEY) or none. Variables come from .outpost/.env (declared names only;
an empty declaration inherits the process value) and from --env NAME, which forwards
one variable from outpost's environment. Values never appear in argv or output.

--live keeps the turn open to steering: each line read from standard input while
the turn runs is delivered into it as a further user message (agents with live
input: codex, claude, copilot). Lines read before the CLI can take them wait;
lines it never took are reported as warnings.

` + exitHelp,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Turn.Prompt = args[0]
			if opts.Turn.Agent == "" {
				return &flagError{fmt.Errorf("--agent is required (%s, or a driver in .outpost/drivers)", builtinNames(f))}
			}
			if opts.Turn.Fork && opts.Turn.Resume == "" {
				return &flagError{fmt.Errorf("--fork needs --resume ID")}
			}
			if opts.Turn.Live && opts.Turn.Prompt == "-" {
				return &flagError{fmt.Errorf("--live reads live messages from standard input: give the prompt as the argument")}
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return runRun(cmd.Context(), f, opts)
		},
	}
	addRunFlags(f, cmd, opts)
	cmd.Flags().StringVar(&opts.Turn.Resume, "resume", "", "conversation id to continue")
	cmd.Flags().BoolVar(&opts.Turn.Fork, "fork", false, "fork the --resume conversation instead of continuing it")
	cmd.Flags().BoolVar(&opts.Turn.Live, "live", false, "deliver each line of standard input into the running turn")
	return cmd
}

func runRun(ctx context.Context, f *Factory, opts *RunOptions) error {
	prompt := opts.Turn.Prompt
	if prompt == "-" {
		b, err := io.ReadAll(io.LimitReader(f.IO.In, lines.MaxBytes))
		if err != nil {
			return outposterr.Wrap(outposterr.Configuration, err, "read prompt from stdin")
		}
		prompt = string(b)
	}
	table, err := loadAgents(f)
	if err != nil {
		return err
	}
	row, err := table.lookup(opts.Turn.Agent)
	if err != nil {
		return err
	}
	if row.Driver != nil && opts.Credentials.Auth == "" {
		// A driver declares its secrets itself; there is no login to choose.
		opts.Credentials.Auth = "none"
	}
	s, err := newSession(ctx, f, opts, table)
	if err != nil {
		return err
	}
	defer s.close()
	r := newRenderer(f.IO.Out, opts.Output.JSON)
	defer r.close()
	req := turnRequest{Agent: opts.Turn.Agent, Prompt: prompt, Model: opts.Turn.Model,
		Continue: opts.Turn.Resume, Fork: opts.Turn.Fork, Workspace: opts.Sandbox.Workspace}
	if opts.Turn.Live {
		done := make(chan struct{})
		defer close(done)
		req.Live = liveLines(f.IO.In, f.IO.ErrOut, done)
	}
	res, err := s.turn(ctx, req, r.event)
	if res == nil {
		return err
	}
	r.outcome(res)
	if err != nil {
		return &silentError{err}
	}
	return nil
}

// liveLines sends each non-blank line of r until r ends or done closes. A
// line over lines.MaxBytes is dropped and said on errOut; reading goes on.
func liveLines(r io.Reader, errOut io.Writer, done <-chan struct{}) <-chan string {
	ch := make(chan string)
	go func() {
		defer close(ch)
		lr := lines.NewReader(r, lines.MaxBytes)
		for {
			l, over, err := lr.Next()
			if err != nil {
				return
			}
			if over {
				fmt.Fprintf(errOut, "outpost: --live: dropped a line over %d MiB\n", lines.MaxBytes>>20)
				continue
			}
			line := strings.TrimRight(string(l), "\r")
			if strings.TrimSpace(line) == "" {
				continue
			}
			select {
			case ch <- line:
			case <-done:
				return
			}
		}
	}()
	return ch
}

// session holds what every turn of a run or a batch shares: the agent
// table, credentials, MCP servers, the conversation store, the scripted
// server (--offline), the sandbox engine (opened once) and each agent's
// verified CLI (bootstrapped once).
type session struct {
	f      *Factory
	opts   *RunOptions
	agents *agentTable
	creds  *harness.Credentials
	mcp    []credentials.MCPServer
	schema *typed.Schema
	store  conversation.Store
	srv    *outposttest.Server
	logger *slog.Logger
	kind   SandboxKind

	mu       sync.Mutex
	engine   SandboxEngine
	adapters map[string]adapters.Adapter
	clis     map[string]*Installed
}

// turnRequest is one turn of a session.
type turnRequest struct {
	Agent, Prompt, Model, Continue, Workspace string
	Fork                                      bool
	StopOnQuotaRetry                          bool
	// Live carries messages into the running turn (run --live).
	Live <-chan string
	// Schema overrides the session's --schema for this turn (a batch job's).
	Schema *typed.Schema
}

// readSchema reads and compiles a --schema file.
func readSchema(name string) (*typed.Schema, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, outposterr.Wrap(outposterr.Configuration, err, "--schema")
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, typed.MaxSchemaBytes+1))
	if err != nil {
		return nil, outposterr.Wrap(outposterr.Configuration, err, "--schema")
	}
	s, err := typed.Compile(b)
	if err != nil {
		return nil, outposterr.Wrap(outposterr.Configuration, err, "--schema %s", name)
	}
	return s, nil
}

func newSession(ctx context.Context, f *Factory, opts *RunOptions, table *agentTable) (*session, error) {
	for _, name := range opts.Credentials.Env {
		if strings.Contains(name, "=") || !sandbox.ValidEnvName(name) {
			return nil, &flagError{fmt.Errorf("--env takes a variable name, not %q (values never go on the command line)", redactArg(name))}
		}
	}
	kind, err := f.sandboxKind(opts.Sandbox.Kind)
	if err != nil {
		return nil, err
	}
	authText := opts.Credentials.Auth
	if authText == "" {
		if !opts.Offline.Enabled {
			return nil, &flagError{fmt.Errorf("--auth is required: account, account:file, account:variable, usage or none (Outpost never guesses credentials)")}
		}
		authText = "none"
	}
	auth, err := credentials.ParseAuth(authText)
	if err != nil {
		return nil, &flagError{err}
	}
	s := &session{f: f, opts: opts, agents: table, kind: kind, logger: slog.New(slog.DiscardHandler),
		adapters: map[string]adapters.Adapter{}, clis: map[string]*Installed{}}
	if opts.Output.Verbose {
		s.logger = slog.New(slog.NewTextHandler(f.IO.ErrOut, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	if s.creds, err = loadCredentials(f, auth, opts.Credentials.Env); err != nil {
		return nil, err
	}
	if opts.Credentials.MCP != "" {
		if s.mcp, err = readMCP(opts.Credentials.MCP); err != nil {
			return nil, err
		}
	}
	if opts.Turn.Schema != "" {
		if s.schema, err = readSchema(opts.Turn.Schema); err != nil {
			return nil, err
		}
	}
	if len(opts.Offline.Answers) > 0 && !opts.Offline.Enabled {
		return nil, &flagError{fmt.Errorf("--stub-answer needs --offline")}
	}
	if !opts.Store.NoStore {
		fs, err := openStore(f, opts.Store.Dir, opts.Sandbox.Workspace)
		if err != nil {
			return nil, err
		}
		s.store = fs
	}
	if opts.Offline.Enabled {
		sc, err := outposttest.ParseScenario(opts.Offline.Scenario)
		if err != nil {
			return nil, &flagError{err}
		}
		stubOpts := []outposttest.Option{outposttest.WithScenario(sc), outposttest.WithAnswers(opts.Offline.Answers...)}
		if opts.Offline.QuotaIn > 0 {
			stubOpts = append(stubOpts, outposttest.WithQuotaReset(time.Now().Add(opts.Offline.QuotaIn).Truncate(time.Second)))
		}
		if s.srv, err = outposttest.NewServer(stubOpts...); err != nil {
			return nil, outposterr.Wrap(outposterr.Configuration, err, "start the scripted model server")
		}
	}
	return s, nil
}

func (s *session) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.engine != nil {
		s.engine.Close()
	}
	if s.srv != nil {
		_ = s.srv.Close()
	}
}

// adapter returns the session's adapter for the agent named name, built
// once.
func (s *session) adapter(name string) (agents.Agent, adapters.Adapter, error) {
	row, err := s.agents.lookup(name)
	if err != nil {
		return agents.Agent{}, nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.adapters[name]
	if !ok {
		a = row.New()
		s.adapters[name] = a
	}
	return row, a, nil
}

// lease returns the provider and lease spec for a turn of row in
// workspace: the sandbox engine is opened once, the agent's pinned CLI is
// bootstrapped once (downloaded, SHA-512 verified, cached on the host) and
// delivered the engine's way.
func (s *session) lease(ctx context.Context, row agents.Agent, workspace string) (sandbox.Provider, sandbox.Spec, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.engine == nil {
		o := s.opts.Sandbox
		if s.srv != nil && o.Network == "" {
			o.Network = "host" // the scripted server listens on loopback
		}
		e, err := s.kind.Open(ctx, s.f, o, s.logger)
		if err != nil {
			return nil, sandbox.Spec{}, err
		}
		s.engine = e
	}
	cli, err := s.ensureCLI(ctx, row)
	if err != nil {
		return nil, sandbox.Spec{}, err
	}
	prov, spec, err := s.engine.Lease(cli, workspace)
	if err != nil {
		return nil, spec, err
	}
	if cli != nil && s.engine.Delivery() == DeliverCopy {
		prov = cli.Bootstrapper.CopyInProvider(prov, cli.Entry, basePath)
	}
	return prov, spec, nil
}

// ensureCLI bootstraps row's pinned CLI once; an agent without a catalog
// row (a driver, a test double) runs as the sandbox finds it.
func (s *session) ensureCLI(ctx context.Context, row agents.Agent) (*Installed, error) {
	if row.CLI == nil {
		return nil, nil
	}
	if cli, ok := s.clis[row.Name]; ok {
		return cli, nil
	}
	b, err := newBootstrapper(ctx, s.f, s.opts.Bootstrap)
	if err != nil {
		return nil, err
	}
	e, err := b.Ensure(ctx, row.CLI.Name)
	if err != nil {
		return nil, outposterr.Wrap(outposterr.Bootstrap, err,
			"%s CLI: install the pinned version (outpost bootstrap; set %s or npm's registry, or %s for an offline mirror)",
			row.Name, registryEnv, mirrorEnv)
	}
	cli := &Installed{Entry: e, Bootstrapper: b}
	s.clis[row.Name] = cli
	return cli, nil
}

// resolveWorkspace returns the absolute workspace directory ("": the
// current directory).
func resolveWorkspace(dir string) (string, error) {
	if dir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return "", outposterr.Wrap(outposterr.Configuration, err, "find the current directory")
		}
		dir = wd
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", outposterr.Wrap(outposterr.Configuration, err, "workspace")
	}
	if st, err := os.Stat(abs); err != nil || !st.IsDir() {
		return "", outposterr.New(outposterr.Configuration, "workspace %s is not a directory", abs)
	}
	return abs, nil
}

// turn runs one turn. The turn is validated (harness.Turn.Validate) before
// any sandbox is opened or CLI bootstrapped.
func (s *session) turn(ctx context.Context, req turnRequest, onEvent func(adapters.Event)) (*harness.Result, error) {
	row, a, err := s.adapter(req.Agent)
	if err != nil {
		return nil, err
	}
	workspace, err := resolveWorkspace(req.Workspace)
	if err != nil {
		return nil, err
	}
	if row.Driver != nil {
		// The driver's workdir must stay inside this turn's workspace too.
		if err := row.Driver.CheckWorkdir(workspace); err != nil {
			return nil, err
		}
	}
	in := adapters.Input{Prompt: req.Prompt, Model: req.Model, Effort: s.opts.Turn.Effort,
		Continue: req.Continue, Fork: req.Fork, MCP: s.mcp}
	if s.srv != nil {
		// A subscription-style placeholder token makes the CLI read the
		// server's rate-limit headers, as a logged-in account would.
		in.Endpoint = &adapters.Endpoint{BaseURL: s.srv.URL(), OAuthToken: outposttest.PlaceholderOAuthToken}
		// The scripted server answers at once; a CLI retrying for minutes
		// would only hide the scenario.
		retries := 1
		in.MaxRetries = &retries
	}
	schema := s.schema
	if req.Schema != nil {
		schema = req.Schema
	}
	t := harness.Turn{
		Adapter: a, Input: in, Store: s.store, Credentials: s.creds,
		OnEvent: onEvent, Logger: s.logger, StopOnQuotaRetry: req.StopOnQuotaRetry, Reseed: s.opts.Turn.Reseed,
		Live: req.Live, Schema: schema,
		Limits: harness.Limits{Deadline: s.opts.Turn.Timeout, IdleTimeout: s.opts.Turn.IdleTimeout},
	}
	if err := t.Validate(); err != nil {
		return nil, err
	}
	if t.Provider, t.Spec, err = s.lease(ctx, row, workspace); err != nil {
		return nil, err
	}
	return harness.Run(ctx, t)
}

// redactArg hides the value part of NAME=VALUE.
func redactArg(s string) string {
	if name, _, ok := strings.Cut(s, "="); ok {
		return name + "=…"
	}
	return s
}
