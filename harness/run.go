package harness

import (
	"context"
	"errors"
	"log/slog"
	"runtime/debug"
	"strings"
	"time"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/credentials"
	"github.com/outpost-dev/outpost/credentials/install"
	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/sandbox"
	"github.com/outpost-dev/outpost/usage"
)

// Run executes one turn and returns its result. The returned error is
// Result.Err: nil on success, else an *outposterr.Error. Run always returns a
// non-nil Result. A panic inside Outpost during the turn is recovered and
// reported as an [outposterr.Internal] error.
func Run(ctx context.Context, t Turn) (res *Result, err error) {
	t = t.withDefaults()
	started := t.Now()
	// One deadline for the whole turn: acquisition, seeding, every attempt
	// (a re-seed, a typed repair, each steered continuation), and what the
	// caller did since Begin.
	if t.deadline.IsZero() {
		t.deadline = time.Now().Add(t.Limits.Deadline)
	}
	defer func() {
		if v := recover(); v != nil {
			t.Logger.Error("panic in turn", "panic", v, "stack", string(debug.Stack()))
			perr := outposterr.Panic(v)
			if res == nil {
				res = newResult(t, started)
			}
			res.Err, err = perr, perr
			res.Duration = t.Now().Sub(started)
		}
	}()
	if _, err := t.validate(); err != nil { // plans the credentials once for every attempt
		return failed(t, started, err)
	}
	if t.Sandbox == nil && t.Provider == nil {
		return failed(t, started, outposterr.New(outposterr.Configuration, "turn has neither a sandbox nor a provider"))
	}
	if t.Gateway != nil {
		b, err := t.Gateway.turnBudget(t.Limits)
		if err != nil {
			return failed(t, started, err)
		}
		t.budget = b
	}

	// One lease for every attempt of the turn (a re-seed, a typed
	// response's repair), so a repair finds the conversation even without a
	// store.
	if t.Sandbox == nil {
		actx, acancel := context.WithDeadline(ctx, t.deadline)
		sb, aerr := t.Provider.Acquire(actx, t.Spec)
		expired := errors.Is(actx.Err(), context.DeadlineExceeded)
		acancel()
		if aerr != nil && expired && ctx.Err() == nil {
			return failed(t, started, outposterr.Wrap(outposterr.Timeout, aerr, "%s: acquire sandbox: over the turn's deadline", t.Adapter.Name()))
		}
		if aerr != nil {
			return failed(t, started, classifyInfra(ctx, t.Adapter.Name(), outposterr.Sandbox, "acquire sandbox", aerr))
		}
		defer func() {
			if rerr := release(ctx, t.Logger, sb); rerr != nil && res != nil {
				res.Warnings = append(res.Warnings, "release sandbox: "+rerr.Error())
			}
		}()
		t.Sandbox, t.Provider = sb, nil
	}
	if t.Limits.MaxTurns > 0 && t.Input.MaxTurns == 0 {
		t.Input.MaxTurns = t.Limits.MaxTurns
	}
	if err := prepareWorkspace(ctx, t, t.Sandbox); err != nil {
		return failed(t, started, vanished(ctx, t.Adapter.Name(), t.Sandbox, err))
	}
	switch {
	case t.Schema != nil:
		res, err = runTyped(ctx, t, started)
	case t.Live != nil && steerable(t.Adapter):
		res, err = runSteered(ctx, t, started)
	default:
		res, err = runReseed(ctx, t, t.Input, nil)
	}
	if t.Patch != nil && res != nil {
		// Also after a failure: what the agent changed before it failed is
		// part of the record.
		collectPatch(ctx, t, t.Sandbox, res)
	}
	return res, err
}

// newResult is an empty result for t.
func newResult(t Turn, started time.Time) *Result {
	res := &Result{Started: started, Counts: map[adapters.Kind]int{}}
	if t.Adapter != nil {
		res.Agent = t.Adapter.Name()
	}
	return res
}

// failed is the result of a turn that ends before its CLI runs. Nothing
// ran, so nothing was spent: its usage is a known zero (a job's sum over its
// attempts stays known).
func failed(t Turn, started time.Time, err error) (*Result, error) {
	res := newResult(t, started)
	res.Err = err
	res.Usage = usage.Usage{Complete: true, CostKnown: true}
	res.Duration = t.Now().Sub(started)
	return res, err
}

// runReseed runs one attempt with in and, when asked and the CLI cannot find
// the conversation to continue, one re-seeded attempt in a new conversation.
func runReseed(ctx context.Context, t Turn, in adapters.Input, baseline *usage.Usage) (*Result, error) {
	res, err := newAttempt(t, in, baseline).run(ctx)
	if err == nil || !t.Reseed || t.Store == nil || in.Continue == "" ||
		outposterr.ClassOf(err) != outposterr.Session || ctx.Err() != nil {
		return res, err
	}
	prompt, ok := reseedPrompt(ctx, t.Store, in.Continue, in.Prompt)
	if !ok {
		return res, err
	}
	in2 := in
	in2.Continue, in2.Fork, in2.Prompt = "", false, prompt
	res2, err2 := newAttempt(t, in2, nil).run(ctx)
	res2.Warnings = append(res2.Warnings, "conversation "+in.Continue+" could not be resumed ("+err.Error()+
		"); continued in a new conversation seeded with its stored transcript")
	res2.joinSecretPrinted(res)
	return res2, err2
}

// attempt is one run of the CLI in the turn's lease: the resolved input,
// the credentials installed for it, the collector and the result. Its
// methods are the steps of the turn, in order (see the package doc); each
// records what the later ones and the cleanup need.
type attempt struct {
	t   Turn           // the turn, defaults applied, with its lease in t.Sandbox
	in  adapters.Input // the input, resolved step by step; the only one read
	sb  sandbox.Sandbox
	res *Result
	// baseline is the conversation's cumulative usage before this attempt,
	// when the caller knows it (a repair continues what Run just ran).
	baseline *usage.Usage
	creds    *Credentials // the caller's, plus the adapter's configuration
	inst     *install.Installed
	br       *bridged                // the attempt's grant at the gateway, if any
	cleanup  []func(context.Context) // bounded steps run after the CLI, in reverse
}

func newAttempt(t Turn, in adapters.Input, baseline *usage.Usage) *attempt {
	return &attempt{t: t, in: in, sb: t.Sandbox, baseline: baseline, creds: t.Credentials,
		res: newResult(t, t.Now())}
}

// run runs the attempt's steps and returns its result.
func (a *attempt) run(ctx context.Context) (*Result, error) {
	turnCtx, cancel := a.t.deadlineContext(ctx)
	defer cancel()
	defer a.runCleanup(ctx)
	for _, step := range []func(context.Context) error{
		a.configure, a.installCredentials, a.resolveDirs, a.restore, a.turnFiles,
	} {
		if err := step(turnCtx); err != nil {
			err = classifyInfraCtx(ctx, a.res.Agent, err)
			if ctx.Err() == nil && errors.Is(turnCtx.Err(), context.DeadlineExceeded) {
				// The turn's deadline cut the step off (a restore, an
				// installation): a timeout, as during acquisition or seeding.
				err = outposterr.Wrap(outposterr.Timeout, err, "%s: over the turn's deadline", a.res.Agent)
			}
			return a.finish(vanished(ctx, a.res.Agent, a.sb, err))
		}
	}
	return a.finish(vanished(ctx, a.res.Agent, a.sb, a.execute(ctx, turnCtx)))
}

// finish stamps the result with err and the duration.
func (a *attempt) finish(err error) (*Result, error) {
	a.res.Err = err
	a.res.Duration = a.t.Now().Sub(a.res.Started)
	return a.res, err
}

// defer registers a bounded cleanup step.
func (a *attempt) deferCleanup(f func(context.Context)) { a.cleanup = append(a.cleanup, f) }

// runCleanup runs the registered cleanup steps, last first, each under its
// own bounded context that survives cancellation.
func (a *attempt) runCleanup(ctx context.Context) {
	for i := len(a.cleanup) - 1; i >= 0; i-- {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		a.cleanup[i](cctx)
		cancel()
	}
}

// configure merges the adapter's configuration plan (MCP servers a CLI
// reads from files) into the credentials to materialize.
func (a *attempt) configure(context.Context) error {
	cf, ok := a.t.Adapter.(adapters.Configurator)
	if !ok {
		return nil
	}
	cfg, err := cf.Configuration(a.in)
	if err != nil {
		return asClass(err, outposterr.Configuration, "configuration")
	}
	if len(cfg.Files) > 0 {
		c := orNone(a.creds)
		c.Config.Files = append(append([]credentials.ConfigFile{}, c.Config.Files...), cfg.Files...)
		a.creds = &c
	}
	return nil
}

// installCredentials materializes the credential plan into the lease and
// puts the CLI's credential environment into the input.
func (a *attempt) installCredentials(ctx context.Context) error {
	if a.creds == nil {
		return a.bridgeEndpoint(ctx)
	}
	// The plan was made once, before the lease existed (Run); a turn not
	// started by Run plans it here.
	var plan credentials.Plan
	if a.t.plan != nil {
		plan = *a.t.plan
	} else {
		p, err := planCredentials(a.t)
		if err != nil {
			return err
		}
		plan = p
	}
	if plan.Bridge == nil {
		if err := a.bridgeEndpoint(ctx); err != nil {
			return err
		}
	}
	if a.t.Gateway != nil && plan.Bridge != nil {
		br, err := a.t.Gateway.grantFor(ctx, a.sb, a.res.Agent+" "+a.sb.ID(), plan, &a.in, a.t.budget)
		if err != nil {
			return err
		}
		a.br = br
		// Registered first, so it runs last: after the CLI and its
		// session-usage reader are done with the gateway.
		a.deferCleanup(func(context.Context) { br.finish(a.res) })
		plan = plan.Bridged()
		a.t.Logger.Debug("credential bridged through the gateway", "agent", a.res.Agent, "var", plan.Strip)
	}
	inst, err := install.Materialize(ctx, a.sb, plan, a.creds.Config, install.Options{
		Agent: a.res.Agent, HostHome: a.creds.HostHome, Relocate: a.creds.Relocate,
		ShareLogins: a.creds.ShareLogins})
	if err != nil {
		return infraError{outposterr.Configuration, "install credentials", err}
	}
	a.inst = inst
	a.deferCleanup(func(context.Context) { inst.Close() })
	a.in.Env = credentialEnv(a.in.Env, a.creds.Vars, inst)
	if len(inst.Rotating) > 0 && !a.creds.NoWriteBack {
		// A refreshed login is written back even after failures and
		// cancellation, so the user's host login stays valid. Registered
		// after the capture step would be, it runs before inst.Close.
		a.deferCleanup(func(ctx context.Context) {
			n, werr := install.WriteBack(ctx, a.sb, inst.Rotating)
			if werr != nil {
				a.res.Warnings = append(a.res.Warnings, "write back rotated login: "+werr.Error())
			}
			a.t.Logger.Debug("write back", "files", n)
		})
	}
	return nil
}

// bridgeEndpoint puts the gateway between the CLI and the endpoint the
// input names, when the bridge asks for it (Bridge.Endpoint).
func (a *attempt) bridgeEndpoint(ctx context.Context) error {
	if a.t.Gateway == nil || !a.t.Gateway.Endpoint {
		return nil
	}
	br, err := a.t.Gateway.grantFor(ctx, a.sb, a.res.Agent+" "+a.sb.ID(), credentials.Plan{}, &a.in, a.t.budget)
	if err != nil || br == nil {
		return err
	}
	a.br = br
	a.deferCleanup(func(context.Context) { br.finish(a.res) })
	return nil
}

// resolveDirs defaults the working and home directories to the lease's.
func (a *attempt) resolveDirs(context.Context) error {
	if a.in.Workdir == "" {
		a.in.Workdir = a.sb.Root()
	}
	if a.in.Home == "" {
		a.in.Home = a.sb.Home()
	}
	return nil
}

// restore puts the stored conversation to continue into the lease.
func (a *attempt) restore(ctx context.Context) error {
	if err := restoreConversation(ctx, a.t.Adapter, a.t.Store, a.sb, a.in); err != nil {
		return infraError{outposterr.Session, "restore conversation", err}
	}
	return nil
}

// turnFiles writes the files the adapter's command reads for this
// invocation into a scratch directory, removed after the turn.
func (a *attempt) turnFiles(ctx context.Context) error {
	tf, ok := a.t.Adapter.(adapters.TurnFiles)
	if !ok {
		return nil
	}
	a.in.Scratch = newScratch(a.in.Home)
	files := tf.TurnFiles(a.in)
	if len(files) == 0 {
		return nil
	}
	td, err := materializeTurnFiles(ctx, a.sb, a.in.Scratch, files)
	// Invocation teardown: always, also after a partial write.
	a.deferCleanup(func(ctx context.Context) {
		if err := td.Close(ctx); err != nil {
			a.t.Logger.Warn("remove turn files", "dir", a.in.Scratch, "err", err)
			a.res.Warnings = append(a.res.Warnings, "remove turn files: "+err.Error())
		}
	})
	if err != nil {
		return infraError{outposterr.Sandbox, "write turn files", err}
	}
	return nil
}

// execute runs the CLI and judges the turn: command, supervision,
// classification, usage, and the capture of the conversation.
func (a *attempt) execute(ctx, turnCtx context.Context) error {
	name := a.res.Agent
	var cmd sandbox.Command
	var live adapters.LiveSession
	var err error
	if a.t.Live != nil && a.t.steer == nil {
		cmd, live, err = a.t.Adapter.(adapters.LiveInput).LiveRequest(a.in)
	} else {
		cmd, err = a.t.Adapter.Request(a.in)
	}
	if err != nil {
		return asClass(err, outposterr.Configuration, name+": build request")
	}
	if err := cmd.Validate(); err != nil {
		return outposterr.Wrap(outposterr.Configuration, err, "%s: invalid command", name)
	}
	a.t.Logger.Debug("exec", "agent", name, "sandbox", a.sb.ID(), "cmd", cmd.Redacted())
	cmd = probeCommand(cmd, a.sb.Root())

	// The exec context outlives the caller's: the harness stops the CLI
	// itself (TERM, grace, KILL) and cancels this only as a last resort.
	execCtx, execCancel := context.WithCancel(context.WithoutCancel(ctx))
	defer execCancel()
	proc, err := a.sb.Exec(execCtx, cmd)
	if err != nil {
		return classifyInfra(ctx, name, outposterr.Sandbox, "start "+a.t.Adapter.Binary(), err)
	}
	col := newCollector(a.t.Adapter, a.t.Now, a.t.OnEvent, a.t.KeepEvents, a.t.Limits, a.res)
	col.model = a.in.Model
	col.redact = newOutputRedactor(cmd.Env, a.secrets()...)
	a.res.redact = col.redact
	if d, ok := a.t.Adapter.(adapters.DefaultModeler); ok && col.model == "" {
		col.model = d.DefaultModel()
	}
	col.ledger.Baseline = a.usageBaseline(turnCtx)
	var feed *liveFeed
	if live != nil {
		if proc.Stdin() == nil {
			_ = proc.Close()
			return outposterr.New(outposterr.Sandbox, "%s: the sandbox gave the live-input turn no stdin", name)
		}
		col.dec = live
		feed = newLiveFeed(live, proc.Stdin(), a.t.Live, col)
	}
	if st := a.t.steer; st != nil {
		col.seq = st.seq
		defer func() { st.seq = col.seq }()
	}
	v := supervise(ctx, turnCtx, a.t, proc, col, feed, a.t.steer, a.br)
	a.res.Exit, a.res.Exited = v.exit, v.exited
	if col.probe != "" && v.exited && (v.exit.Code == probeExit || v.exit.Code == probeMissing) {
		// The probe did not start the CLI: the workspace is not writable,
		// or the CLI is not in the lease.
		a.res.Exit, a.res.Exited = sandbox.ExitStatus{}, false
		col.finalize()
		if missing, ok := strings.CutPrefix(col.probe, "missing="); ok {
			return outposterr.New(outposterr.Sandbox, "%s: start %s: %s not found in the sandbox", name, a.t.Adapter.Binary(), missing)
		}
		return unwritableError(a.t, a.sb, col.probe)
	}
	if hit := a.br.over(); hit != nil && v.stop == stopNone && !col.finishedOK() {
		// The CLI gave up on the gateway's refusal before the harness
		// stopped it: the budget ended the turn all the same.
		col.over, v.stop = hit, stopBudget
	}
	if v.stop == stopSettled {
		col.warn("CLI kept running after its final event; stopped after the settle window")
	}
	err = limitReached(ctx, name, proc, classify(col, v))
	a.res.Err = err
	if v.exited {
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		readSessionUsage(rctx, a.t.Adapter, a.sb, a.in.Home, col)
		rcancel()
	}
	col.finalize()
	priceTurn(a.res, a.in, a.t.Adapter)
	if col.over != nil && v.stop != stopBudget {
		// The cap was reached by the CLI's final report, after its work was
		// done: the turn stands; the caller sees the cost.
		a.res.Warnings = append(a.res.Warnings, "after the CLI's final event: "+col.over.text)
	}
	if a.t.Store != nil {
		// Captured even after failures and cancellation, bounded: by a
		// stall (captureConversation) and by captureMax.
		cctx, ccancel := context.WithTimeout(context.WithoutCancel(ctx), captureMax)
		captureConversation(cctx, a.t.Adapter, a.t.Store, a.sb, a.in, a.res, col.redact)
		ccancel()
	}
	return err
}

// secrets are the values the lease holds, beside its CLI's secret
// variables, that the CLI's output must not show: its login files' tokens,
// the variables the caller names secret (Credentials.Secret) and the
// declared secrets (declaredSecrets).
func (a *attempt) secrets() []string {
	var out []string
	vars := a.in.Env
	if a.inst != nil {
		out = append(out, a.inst.Secrets...)
	}
	if a.creds != nil {
		vars = a.creds.Vars
		for _, name := range a.creds.Secret {
			if v, ok := vars[name]; ok {
				out = append(out, v)
			}
		}
	}
	return append(out, declaredSecrets(a.t.Adapter, a.in, vars)...)
}

// usageBaseline is the conversation-wide usage total before this attempt.
func (a *attempt) usageBaseline(ctx context.Context) *usage.Usage {
	if a.baseline != nil {
		u := *a.baseline
		return &u
	}
	return usageBaseline(ctx, a.t.Store, a.in)
}

// release releases a cold lease even after cancellation, bounded, and logs
// a failure.
func release(ctx context.Context, log *slog.Logger, sb sandbox.Sandbox) error {
	rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer rcancel()
	err := sb.Release(rctx)
	if err != nil {
		log.Warn("release sandbox", "sandbox", sb.ID(), "err", err)
	}
	return err
}

// planCredentials plans the turn's credentials. It is pure.
func planCredentials(t Turn) (credentials.Plan, error) {
	if t.Credentials == nil {
		return credentials.Plan{}, nil
	}
	a, ok := t.Adapter.(adapters.Authenticator)
	if !ok {
		if t.Credentials.Auth.Form == credentials.None || t.Credentials.Auth.Form == "" {
			return credentials.Plan{}, nil
		}
		return credentials.Plan{}, outposterr.New(outposterr.Configuration, "%s does not plan credentials", t.Adapter.Name())
	}
	plan, err := a.Credentials(t.Credentials.Auth, t.Credentials.Vars)
	if err != nil {
		return credentials.Plan{}, asClass(err, outposterr.Configuration, t.Adapter.Name()+": credentials")
	}
	return plan, nil
}

// credentialEnv is the CLI environment: the caller's input variables, the
// declared variables, then the plan's, minus what the plan strips.
func credentialEnv(input, declared map[string]string, inst *install.Installed) map[string]string {
	env := map[string]string{}
	for k, v := range declared {
		env[k] = v
	}
	for k, v := range input {
		env[k] = v
	}
	for _, k := range inst.Strip {
		delete(env, k)
	}
	for k, v := range inst.Env {
		env[k] = v
	}
	return env
}

func (t Turn) withDefaults() Turn {
	t.Limits = t.Limits.withDefaults()
	if t.Logger == nil {
		t.Logger = slog.New(slog.DiscardHandler)
	}
	if t.Now == nil {
		t.Now = time.Now
	}
	return t
}

// infraError is a failure of a step before the CLI runs: its class and
// what the step was doing, classified by [classifyInfraCtx].
type infraError struct {
	class outposterr.Class
	what  string
	err   error
}

func (e infraError) Error() string { return e.what + ": " + e.err.Error() }
func (e infraError) Unwrap() error { return e.err }

// classifyInfraCtx classifies a step's error: an infraError by its class
// (aborted when the caller cancelled), anything else as it is.
func classifyInfraCtx(ctx context.Context, agent string, err error) error {
	var ie infraError
	if errors.As(err, &ie) {
		return classifyInfra(ctx, agent, ie.class, ie.what, ie.err)
	}
	return err
}

// classifyInfra classifies a failure of the sandbox layer, keeping the
// class of an error that already has one and honouring cancellation.
func classifyInfra(ctx context.Context, agent string, class outposterr.Class, what string, err error) error {
	if agent != "" {
		what = agent + ": " + what
	}
	if ctx.Err() != nil {
		return outposterr.Wrap(outposterr.Aborted, err, "%s", what)
	}
	return asClass(err, class, what)
}

// asClass keeps err's Outpost class, or gives it class.
func asClass(err error, class outposterr.Class, what string) error {
	if _, ok := outposterr.As(err); ok {
		return err
	}
	return outposterr.Wrap(class, err, "%s", what)
}

// orNone returns a copy of c, or an empty credential choice (auth none).
func orNone(c *Credentials) Credentials {
	if c == nil {
		return Credentials{Auth: credentials.Auth{Form: credentials.None}}
	}
	return *c
}
