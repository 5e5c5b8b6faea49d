package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/outpost-dev/outpost"
	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/credentials"
	"github.com/outpost-dev/outpost/harness"
	"github.com/outpost-dev/outpost/internal/lines"
	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/outposttest"
	"github.com/outpost-dev/outpost/runrec"
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
input: ` + liveNames(f) + `). Lines read before the CLI can take them wait;
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
			return runRun(cmd.Context(), cmd, f, opts)
		},
	}
	addRunFlags(f, cmd, opts)
	cmd.Flags().StringVar(&opts.Turn.Resume, "resume", "", "conversation id to continue")
	cmd.Flags().BoolVar(&opts.Turn.Fork, "fork", false, "fork the --resume conversation instead of continuing it")
	cmd.Flags().BoolVar(&opts.Turn.Live, "live", false, "deliver each line of standard input into the running turn")
	cmd.Flags().Float64Var(&opts.Turn.MaxCostUSD, "max-cost-usd", 0, "stop the turn once its cost reaches this many dollars (0: no cap; exit 12)")
	return cmd
}

func runRun(ctx context.Context, cmd *cobra.Command, f *Factory, opts *RunOptions) error {
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
	row, err := table.Lookup(opts.Turn.Agent)
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
	if err := s.r.CheckSecrets(); err != nil {
		return err
	}
	r := newRenderer(f.IO.Out, opts.Output.JSON)
	r.offline = opts.Offline.Enabled
	defer r.close()
	req := outpost.Turn{Agent: opts.Turn.Agent, Prompt: prompt, Model: opts.Turn.Model,
		Continue: opts.Turn.Resume, Fork: opts.Turn.Fork, Workspace: opts.Sandbox.Workspace}
	if opts.Turn.Live {
		done := make(chan struct{})
		defer close(done)
		req.Live = liveLines(f.IO.In, f.IO.ErrOut, done)
	}
	rec, err := openRecord(cmd, opts, f.IO.ErrOut)
	if err != nil {
		return err
	}
	onEvent := r.event
	var att *runrec.Attempt
	if rec != nil {
		defer rec.Close()
		att = rec.Job("run", 0)
		_ = rec.Input("run", prompt, nil) // an error is returned by Close, with the attempt's
		onEvent = func(ev adapters.Event) { r.event(ev); att.Event(ev) }
	}
	req.OnEvent = onEvent
	res, err := s.r.Run(ctx, req)
	if att != nil && res != nil {
		if ferr := att.Finish(res); ferr != nil {
			fmt.Fprintln(f.IO.ErrOut, "outpost: warning: --out:", ferr)
		}
	}
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

// session is the runner of one command invocation, built from its flags
// and the process environment.
type session struct {
	r    *outpost.Runner
	opts *RunOptions
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

// newSession checks the flags and builds the invocation's runner; nothing
// is started or bootstrapped before the first turn (but the scripted
// server of --offline).
func newSession(ctx context.Context, f *Factory, opts *RunOptions, table *outpost.AgentTable) (*session, error) {
	for _, name := range opts.Credentials.Env {
		if strings.Contains(name, "=") || !sandbox.ValidEnvName(name) {
			return nil, &flagError{fmt.Errorf("--env takes a variable name, not %q (values never go on the command line)", credentials.ShownName(name))}
		}
	}
	for _, name := range opts.Credentials.Secret {
		if strings.Contains(name, "=") || !sandbox.ValidEnvName(name) {
			return nil, &flagError{fmt.Errorf("--secret takes a variable name, not %q (values never go on the command line)", credentials.ShownName(name))}
		}
	}
	// Zero would silently mean the default deadline, a negative one an
	// instant failure, and no CLI starts within a few milliseconds: all
	// are mistakes.
	if opts.Turn.Timeout < minTimeout {
		return nil, &flagError{fmt.Errorf("--timeout must be at least %s, not %s", minTimeout, opts.Turn.Timeout)}
	}
	if opts.Turn.MaxCostUSD < 0 || math.IsNaN(opts.Turn.MaxCostUSD) || math.IsInf(opts.Turn.MaxCostUSD, 0) {
		return nil, &flagError{fmt.Errorf("--max-cost-usd must be a positive number of dollars, 0 for no cap, not %v", opts.Turn.MaxCostUSD)}
	}
	if opts.Turn.IdleTimeout < minTimeout {
		return nil, &flagError{fmt.Errorf("--idle-timeout must be at least %s, not %s", minTimeout, opts.Turn.IdleTimeout)}
	}
	if _, ok := f.Sandboxes[kindOrDefault(opts.Sandbox.Kind)]; !ok {
		if opts.Sandbox.Kind == "" {
			return nil, &flagError{fmt.Errorf("--sandbox is required: the default, %s, is not one of the kinds here (%s)", sandbox.DefaultKind, f.sandboxNames())}
		}
		return nil, &flagError{fmt.Errorf("--sandbox must be one of %s, not %q", f.sandboxNames(), opts.Sandbox.Kind)}
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
	if len(opts.Offline.Answers) > 0 && !opts.Offline.Enabled {
		return nil, &flagError{fmt.Errorf("--stub-answer needs --offline")}
	}
	switch opts.Credentials.Mode {
	case "", "gateway", "inside":
	default:
		return nil, &flagError{fmt.Errorf("--credentials must be gateway or inside, not %q", opts.Credentials.Mode)}
	}
	cpus, mem, pids, err := opts.Sandbox.limits()
	if err != nil {
		return nil, err
	}
	o := outpost.Options{
		Sandbox: outpost.SandboxOptions{Kind: opts.Sandbox.Kind,
			Common: sandbox.Common{Image: opts.Sandbox.Image, Network: opts.Sandbox.Network, User: opts.Sandbox.User,
				CPUs: cpus, Memory: mem, Pids: pids},
			Settings: kindSettings(opts.Sandbox.Settings)},
		Sandboxes: f.Sandboxes, Agents: table.Registry, Auth: auth, Forward: opts.Credentials.Env, Secrets: opts.Credentials.Secret,
		Credentials: outpost.CredentialMode(opts.Credentials.Mode),
		NoStore:     opts.Store.NoStore, Offline: opts.Offline.Enabled, Reseed: opts.Turn.Reseed,
		Limits: harness.Limits{Deadline: opts.Turn.Timeout, IdleTimeout: opts.Turn.IdleTimeout, MaxCostUSD: opts.Turn.MaxCostUSD},
		Getenv: f.Getenv, Logger: slog.New(slog.DiscardHandler), Version: Version,
		Pool: outpost.PoolOptions{Size: opts.Pool}, SourceSSHIdentity: opts.SSHIdentity,
	}
	// This executable can run the model gateway beside a lease (the
	// kubernetes kind's sidecar), when the lease can run it (a Linux build).
	if f.Self != nil && runtime.GOOS == "linux" {
		if self, err := f.Self(); err == nil {
			o.Sandbox.GatewayBinary = self
		}
	}
	if opts.Output.Verbose {
		o.Logger = slog.New(slog.NewTextHandler(f.IO.ErrOut, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	if opts.Credentials.MCP != "" {
		if o.MCP, err = readMCP(opts.Credentials.MCP); err != nil {
			return nil, err
		}
	}
	if opts.Turn.Schema != "" {
		if o.Schema, err = readSchema(opts.Turn.Schema); err != nil {
			return nil, err
		}
	}
	o.Effort = opts.Turn.Effort
	if !opts.Store.NoStore {
		if o.Store, err = openStore(f, opts.Store.Dir, opts.Sandbox.Workspace); err != nil {
			return nil, err
		}
	}
	if opts.Offline.Enabled {
		sc, err := outposttest.ParseScenario(opts.Offline.Scenario)
		if err != nil {
			return nil, &flagError{err}
		}
		o.OfflineServer = []outposttest.Option{outposttest.WithScenario(sc), outposttest.WithAnswers(opts.Offline.Answers...)}
		if opts.Offline.QuotaIn > 0 {
			o.OfflineServer = append(o.OfflineServer, outposttest.WithQuotaReset(time.Now().Add(opts.Offline.QuotaIn).Truncate(time.Second)))
		}
	}
	if o.Bootstrap, err = newBootstrapper(ctx, f, opts.Bootstrap); err != nil {
		return nil, err
	}
	r, err := outpost.New(ctx, o)
	if err != nil {
		return nil, err
	}
	return &session{r: r, opts: opts}, nil
}

func (s *session) close() { s.r.Close() }
