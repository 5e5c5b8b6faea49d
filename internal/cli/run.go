package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/outpost-dev/outpost/conversation"
	"github.com/outpost-dev/outpost/credentials"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/adapters/driver"
	"github.com/outpost-dev/outpost/harness"
	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/outposttest"
	"github.com/outpost-dev/outpost/sandbox"
	"github.com/outpost-dev/outpost/typed"
)

// RunOptions are the flags of `outpost run`.
type RunOptions struct {
	IO          IOStreams
	Agent       string
	Sandbox     string
	Workspace   string
	Model       string
	Effort      string
	Resume      string
	Fork        bool
	JSON        bool
	Offline     bool
	Scenario    string
	Timeout     time.Duration
	IdleTimeout time.Duration
	Env         []string
	Auth        string
	MCP         string
	Store       string
	Reseed      bool
	Bootstrap   BootstrapOptions
	StubReset   time.Duration
	NoStore     bool
	Image       string
	Network     string
	User        string
	Verbose     bool
	Live        bool
	Schema      string
	StubAnswers []string
	Prompt      string
}

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
input: codex). Lines read before the CLI can take them wait; lines it never took
are reported as warnings.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Prompt = args[0]
			if opts.Agent == "" {
				return &flagError{fmt.Errorf("--agent is required (%s)", agentNames())}
			}
			switch opts.Sandbox {
			case "", "docker", "host":
			default:
				return &flagError{fmt.Errorf("--sandbox must be docker or host, not %q", opts.Sandbox)}
			}
			if opts.Fork && opts.Resume == "" {
				return &flagError{fmt.Errorf("--fork needs --resume ID")}
			}
			if opts.Live && opts.Prompt == "-" {
				return &flagError{fmt.Errorf("--live reads live messages from standard input: give the prompt as the argument")}
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return runRun(cmd.Context(), f, opts)
		},
	}
	addRunFlags(cmd, opts)
	cmd.Flags().StringVar(&opts.Resume, "resume", "", "conversation id to continue")
	cmd.Flags().BoolVar(&opts.Fork, "fork", false, "fork the --resume conversation instead of continuing it")
	cmd.Flags().BoolVar(&opts.Live, "live", false, "deliver each line of standard input into the running turn")
	return cmd
}

// addRunFlags registers the flags shared by run, resume, fork and batch.
func addRunFlags(cmd *cobra.Command, opts *RunOptions) {
	fl := cmd.Flags()
	fl.StringVar(&opts.Agent, "agent", "", "agent CLI to run ("+agentNames()+")")
	fl.StringVar(&opts.Sandbox, "sandbox", "", "sandbox: docker (default when the engine is reachable) or host (unisolated)")
	fl.StringVar(&opts.Workspace, "workspace", "", "workspace directory (default: the current directory)")
	fl.StringVar(&opts.Model, "model", "", "model name")
	fl.StringVar(&opts.Effort, "effort", "", "reasoning effort")
	fl.BoolVar(&opts.JSON, "json", false, "print JSON lines: every event, then the outcome")
	fl.BoolVar(&opts.Offline, "offline", false, "run against the in-process scripted model server")
	fl.StringVar(&opts.Scenario, "scenario", "ok", "scripted server scenario for --offline")
	fl.StringArrayVar(&opts.StubAnswers, "stub-answer", nil, "with --offline: the scripted server's next answers, in order (repeatable)")
	fl.StringVar(&opts.Schema, "schema", "", "JSON Schema file: the answer must be one JSON value matching it (validated; one repair turn; printed as the outcome's value)")
	fl.DurationVar(&opts.StubReset, "stub-quota-reset", 0, "with --offline: quota failures reset this long from now (default: next midnight UTC)")
	fl.DurationVar(&opts.Timeout, "timeout", harness.DefaultDeadline, "turn deadline")
	fl.DurationVar(&opts.IdleTimeout, "idle-timeout", harness.DefaultIdleTimeout, "fail when the CLI prints nothing for this long")
	fl.StringVar(&opts.Auth, "auth", "", "authentication: account (host login file), account:variable, usage (API key) or none; default none with --offline, else required")
	fl.StringVar(&opts.Store, "store", "", "conversation store directory (default: the project's store in the state directory)")
	fl.BoolVar(&opts.NoStore, "no-store", false, "do not capture or restore the conversation")
	fl.BoolVar(&opts.Reseed, "reseed", false, "when the CLI cannot find the conversation to continue, retry once in a new one seeded with the stored transcript")
	fl.StringVar(&opts.Bootstrap.Registry, "registry", "", "npm registry for bootstrapping the CLI (default: "+registryEnv+", then npm's configuration)")
	fl.StringVar(&opts.Bootstrap.Mirror, "cli-mirror", "", "directory of CLI archives to bootstrap from instead of the network ("+mirrorEnv+")")
	fl.StringVar(&opts.MCP, "mcp", "", "JSON file declaring MCP servers ({\"servers\":[{\"name\",\"command\"|\"url\",…}]}); secrets as ${NAME} references")
	fl.StringArrayVar(&opts.Env, "env", nil, "forward this environment variable into the sandbox (repeatable; names only)")
	fl.StringVar(&opts.Image, "image", "", "Docker image (default: the Outpost base image)")
	fl.StringVar(&opts.Network, "network", "", "Docker network mode: none, bridge, host or a network name")
	fl.StringVar(&opts.User, "user", "", "Docker lease user uid:gid (default: yours; as root, the workspace owner's, else 1000:1000)")
	fl.BoolVarP(&opts.Verbose, "verbose", "v", false, "debug logs on stderr")
}

func runRun(ctx context.Context, f *Factory, opts *RunOptions) error {
	a, err := adapterFor(opts.Agent)
	if err != nil {
		return err
	}
	if _, ok := a.(*driver.Adapter); ok && opts.Auth == "" {
		// A driver declares its secrets itself; there is no login to choose.
		opts.Auth = "none"
	}
	prompt := opts.Prompt
	if prompt == "-" {
		b, err := io.ReadAll(io.LimitReader(f.IO.In, 16<<20))
		if err != nil {
			return outposterr.Wrap(outposterr.Configuration, err, "read prompt from stdin")
		}
		prompt = string(b)
	}
	s, err := newSession(ctx, f, opts)
	if err != nil {
		return err
	}
	defer s.close()
	r := &renderer{out: f.IO.Out, json: opts.JSON}
	req := turnRequest{Agent: opts.Agent, Prompt: prompt, Model: opts.Model,
		Continue: opts.Resume, Fork: opts.Fork, Workspace: opts.Workspace}
	if opts.Live {
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

// session holds what every turn of a run or a batch shares: credentials,
// MCP servers, the conversation store, the scripted server (--offline),
// and one sandbox provider per agent (bootstrapped once).
type session struct {
	f      *Factory
	opts   *RunOptions
	creds  *harness.Credentials
	mcp    []credentials.MCPServer
	schema json.RawMessage
	store  conversation.Store
	srv    *outposttest.Server
	logger *slog.Logger

	mu        sync.Mutex
	providers map[string]*agentProvider
}

type agentProvider struct {
	prov    sandbox.Provider
	spec    sandbox.Spec
	cleanup func()
}

// turnRequest is one turn of a session.
type turnRequest struct {
	Agent, Prompt, Model, Continue, Workspace string
	Fork                                      bool
	StopOnQuotaRetry                          bool
	// Live carries messages into the running turn (run --live).
	Live <-chan string
	// Schema overrides the session's --schema for this turn (a batch job's).
	Schema json.RawMessage
}

// readSchema reads and compiles a --schema file.
func readSchema(name string) (json.RawMessage, error) {
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
	return s.JSON(), nil
}

// maxLiveLine bounds one live message (as --prompt - bounds a prompt).
const maxLiveLine = 16 << 20

// liveLines sends each non-blank line of r until r ends or done closes. A
// line over maxLiveLine is dropped and said on errOut; reading goes on.
func liveLines(r io.Reader, errOut io.Writer, done <-chan struct{}) <-chan string {
	ch := make(chan string)
	go func() {
		defer close(ch)
		br := bufio.NewReaderSize(r, 64<<10)
		var buf []byte
		over := false
		for {
			chunk, err := br.ReadSlice('\n')
			if !over {
				if len(buf)+len(chunk) > maxLiveLine {
					over, buf = true, nil
				} else {
					buf = append(buf, chunk...)
				}
			}
			if errors.Is(err, bufio.ErrBufferFull) {
				continue
			}
			if over {
				fmt.Fprintf(errOut, "outpost: --live: dropped a line over %d MiB\n", maxLiveLine>>20)
			} else if line := strings.TrimRight(string(buf), "\r\n"); strings.TrimSpace(line) != "" {
				select {
				case ch <- line:
				case <-done:
					return
				}
			}
			buf, over = buf[:0], false
			if err != nil {
				return
			}
		}
	}()
	return ch
}

func newSession(ctx context.Context, f *Factory, opts *RunOptions) (*session, error) {
	for _, name := range opts.Env {
		if strings.Contains(name, "=") || !sandbox.ValidEnvName(name) {
			return nil, &flagError{fmt.Errorf("--env takes a variable name, not %q (values never go on the command line)", redactArg(name))}
		}
	}
	authText := opts.Auth
	if authText == "" {
		if !opts.Offline {
			return nil, &flagError{fmt.Errorf("--auth is required: account, account:file, account:variable, usage or none (Outpost never guesses credentials)")}
		}
		authText = "none"
	}
	auth, err := credentials.ParseAuth(authText)
	if err != nil {
		return nil, &flagError{err}
	}
	s := &session{f: f, opts: opts, providers: map[string]*agentProvider{}, logger: slog.New(slog.DiscardHandler)}
	if opts.Verbose {
		s.logger = slog.New(slog.NewTextHandler(f.IO.ErrOut, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	if s.creds, err = loadCredentials(f, auth, opts.Env); err != nil {
		return nil, err
	}
	if opts.MCP != "" {
		if s.mcp, err = readMCP(opts.MCP); err != nil {
			return nil, err
		}
	}
	if opts.Schema != "" {
		if s.schema, err = readSchema(opts.Schema); err != nil {
			return nil, err
		}
	}
	if len(opts.StubAnswers) > 0 && !opts.Offline {
		return nil, &flagError{fmt.Errorf("--stub-answer needs --offline")}
	}
	if !opts.NoStore {
		fs, err := openStore(f, opts.Store, opts.Workspace)
		if err != nil {
			return nil, err
		}
		s.store = fs
	}
	if opts.Offline {
		sc, err := outposttest.ParseScenario(opts.Scenario)
		if err != nil {
			return nil, &flagError{err}
		}
		stubOpts := []outposttest.Option{outposttest.WithScenario(sc), outposttest.WithAnswers(opts.StubAnswers...)}
		if opts.StubReset > 0 {
			stubOpts = append(stubOpts, outposttest.WithQuotaReset(time.Now().Add(opts.StubReset).Truncate(time.Second)))
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
	for _, p := range s.providers {
		p.cleanup()
	}
	if s.srv != nil {
		_ = s.srv.Close()
	}
}

// provider returns the agent's provider, bootstrapping its CLI once.
func (s *session) provider(ctx context.Context, a adapters.Adapter, workspace string) (sandbox.Provider, sandbox.Spec, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := a.Name() + "\x00" + workspace
	if p, ok := s.providers[key]; ok {
		return p.prov, p.spec, nil
	}
	network := s.opts.Network
	if s.srv != nil && network == "" {
		network = "host" // the scripted server listens on loopback
	}
	prov, spec, cleanup, err := provider(ctx, s.f, s.opts, a, workspace, network, s.logger)
	if err != nil {
		return nil, spec, err
	}
	s.providers[key] = &agentProvider{prov: prov, spec: spec, cleanup: cleanup}
	return prov, spec, nil
}

// turn runs one turn.
func (s *session) turn(ctx context.Context, req turnRequest, onEvent func(adapters.Event)) (*harness.Result, error) {
	a, err := adapterFor(req.Agent)
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(req.Prompt) == "" {
		return nil, outposterr.New(outposterr.Configuration, "empty prompt")
	}
	workspace := req.Workspace
	if workspace == "" {
		if workspace, err = os.Getwd(); err != nil {
			return nil, outposterr.Wrap(outposterr.Configuration, err, "find the current directory")
		}
	}
	if workspace, err = filepath.Abs(workspace); err != nil {
		return nil, outposterr.Wrap(outposterr.Configuration, err, "workspace")
	}
	if st, err := os.Stat(workspace); err != nil || !st.IsDir() {
		return nil, outposterr.New(outposterr.Configuration, "workspace %s is not a directory", workspace)
	}
	in := adapters.Input{Prompt: req.Prompt, Model: req.Model, Effort: s.opts.Effort,
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
	if d, ok := a.(*driver.Adapter); ok {
		// The driver's workdir must stay inside this turn's workspace too.
		if err := d.Spec().CheckWorkdir(workspace); err != nil {
			return nil, err
		}
	}
	// A request the adapter refuses (an option the CLI cannot express) is
	// reported before anything is bootstrapped or started. The declared
	// variables take part: a driver's secrets come from them.
	check := in
	if s.creds != nil {
		check.Env = s.creds.Vars
	}
	if req.Live != nil {
		l, ok := a.(adapters.LiveInput)
		if !ok || !a.Capabilities().LiveInput {
			return nil, outposterr.New(outposterr.Configuration, "%s does not take live input into a running turn", a.Name())
		}
		if _, _, err := l.LiveRequest(check); err != nil {
			return nil, err
		}
	} else if _, err := a.Request(check); err != nil {
		return nil, err
	}
	prov, spec, err := s.provider(ctx, a, workspace)
	if err != nil {
		return nil, err
	}
	schema := s.schema
	if len(req.Schema) > 0 {
		schema = req.Schema
	}
	return harness.Run(ctx, harness.Turn{
		Adapter: a, Input: in, Provider: prov, Spec: spec, Store: s.store, Credentials: s.creds,
		OnEvent: onEvent, Deadline: s.opts.Timeout, IdleTimeout: s.opts.IdleTimeout, Logger: s.logger,
		StopOnQuotaRetry: req.StopOnQuotaRetry, Reseed: s.opts.Reseed, Live: req.Live, Schema: schema,
	})
}

// redactArg hides the value part of NAME=VALUE.
func redactArg(s string) string {
	if name, _, ok := strings.Cut(s, "="); ok {
		return name + "=…"
	}
	return s
}

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
