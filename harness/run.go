package harness

import (
	"bufio"
	"context"
	"errors"
	"github.com/outpost-dev/outpost/credentials"
	"github.com/outpost-dev/outpost/credentials/install"
	"io"
	"log/slog"
	"sync"
	"syscall"
	"time"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/sandbox"
)

// Run executes one turn and returns its result. The returned error is
// Result.Err: nil on success, else an *outposterr.Error. Run always returns a
// non-nil Result.
func Run(ctx context.Context, t Turn) (*Result, error) {
	if len(t.Schema) > 0 {
		return runTyped(ctx, t)
	}
	return runReseed(ctx, t)
}

// runReseed runs one turn and, when asked, its re-seed.
func runReseed(ctx context.Context, t Turn) (*Result, error) {
	res, err := run(ctx, t)
	if err == nil || !t.Reseed || t.Store == nil || t.Input.Continue == "" ||
		outposterr.ClassOf(err) != outposterr.Session || ctx.Err() != nil {
		return res, err
	}
	// The CLI cannot find the conversation: start a new one seeded with the
	// stored transcript, once.
	prompt, ok := reseedPrompt(ctx, t.Store, t.Input.Continue, t.Input.Prompt)
	if !ok {
		return res, err
	}
	t2 := t
	t2.Reseed = false
	t2.Input.Continue, t2.Input.Fork, t2.Input.Prompt = "", false, prompt
	res2, err2 := run(ctx, t2)
	res2.Warnings = append(res2.Warnings, "conversation "+t.Input.Continue+" could not be resumed ("+err.Error()+
		"); continued in a new conversation seeded with its stored transcript")
	return res2, err2
}

func run(ctx context.Context, t Turn) (*Result, error) {
	t = t.withDefaults()
	res := &Result{Started: t.Now(), Counts: map[adapters.Kind]int{}}
	finish := func(err error) (*Result, error) {
		res.Err = err
		res.Duration = t.Now().Sub(res.Started)
		return res, err
	}
	if t.Adapter == nil {
		return finish(outposterr.New(outposterr.Configuration, "turn has no adapter"))
	}
	res.Agent = t.Adapter.Name()
	if err := preflight(t); err != nil {
		return finish(err)
	}
	plan, err := planCredentials(t)
	if err != nil {
		return finish(err)
	}

	turnCtx, cancel := context.WithTimeout(ctx, t.Deadline)
	defer cancel()

	sb := t.Sandbox
	if sb == nil {
		var err error
		sb, err = t.Provider.Acquire(turnCtx, t.Spec)
		if err != nil {
			return finish(classifyInfra(ctx, t, outposterr.Sandbox, "acquire sandbox", err))
		}
		defer func() {
			if err := release(ctx, t, sb); err != nil {
				res.Warnings = append(res.Warnings, "release sandbox: "+err.Error())
			}
		}()
	}

	in := t.Input
	var inst *install.Installed
	creds := t.Credentials
	if cf, ok := t.Adapter.(adapters.Configurator); ok {
		cfg, err := cf.Configuration(in)
		if err != nil {
			return finish(asClass(err, outposterr.Configuration, "configuration"))
		}
		if len(cfg.Files) > 0 {
			c := orNone(creds)
			c.Config.Files = append(append([]credentials.ConfigFile{}, c.Config.Files...), cfg.Files...)
			creds = &c
		}
	}
	if creds != nil {
		t.Credentials = creds
		inst, err = install.Materialize(turnCtx, sb, plan, t.Credentials.Config, install.Options{
			Agent: res.Agent, HostHome: t.Credentials.HostHome, Relocate: t.Credentials.Relocate,
			ShareLogins: t.Credentials.ShareLogins})
		if err != nil {
			return finish(classifyInfra(ctx, t, outposterr.Configuration, "install credentials", err))
		}
		defer inst.Close()
		in.Env = credentialEnv(in.Env, t.Credentials.Vars, inst)
	}
	if in.Workdir == "" {
		in.Workdir = sb.Root()
	}
	if in.Home == "" {
		in.Home = sb.Home()
	}
	if err := restoreConversation(turnCtx, t, sb, in); err != nil {
		return finish(classifyInfra(ctx, t, outposterr.Session, "restore conversation", err))
	}
	if tf, ok := t.Adapter.(adapters.TurnFiles); ok {
		in.Scratch = newScratch(in.Home)
		if files := tf.TurnFiles(in); len(files) > 0 {
			td, err := materializeTurnFiles(turnCtx, sb, in.Scratch, files)
			defer func() {
				// Invocation teardown: always, bounded, even after cancellation.
				rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
				defer rcancel()
				if err := td.Close(rctx); err != nil {
					t.Logger.Warn("remove turn files", "dir", in.Scratch, "err", err)
					res.Warnings = append(res.Warnings, "remove turn files: "+err.Error())
				}
			}()
			if err != nil {
				return finish(classifyInfra(ctx, t, outposterr.Sandbox, "write turn files", err))
			}
		}
	}
	var cmd sandbox.Command
	var live adapters.LiveSession
	if t.Live != nil {
		cmd, live, err = t.Adapter.(adapters.LiveInput).LiveRequest(in)
	} else {
		cmd, err = t.Adapter.Request(in)
	}
	if err != nil {
		return finish(asClass(err, outposterr.Configuration, "build request"))
	}
	if err := cmd.Validate(); err != nil {
		return finish(outposterr.Wrap(outposterr.Configuration, err, "%s: invalid command", res.Agent))
	}
	t.Logger.Debug("exec", "agent", res.Agent, "sandbox", sb.ID(), "cmd", cmd.Redacted())

	// The exec context outlives the caller's: the harness stops the CLI
	// itself (TERM, grace, KILL) and cancels this only as a last resort.
	execCtx, execCancel := context.WithCancel(context.WithoutCancel(ctx))
	defer execCancel()
	proc, err := sb.Exec(execCtx, cmd)
	if err != nil {
		return finish(classifyInfra(ctx, t, outposterr.Sandbox, "start "+t.Adapter.Binary(), err))
	}
	col := newCollector(t.Adapter, t.Now, t.OnEvent, t.KeepEvents, t.TailBytes, res)
	col.ledger.Baseline = usageBaseline(turnCtx, t)
	var feed *liveFeed
	if live != nil {
		if proc.Stdin() == nil {
			_ = proc.Close()
			return finish(outposterr.New(outposterr.Sandbox, "%s: the sandbox gave the live-input turn no stdin", res.Agent))
		}
		col.dec = live
		feed = newLiveFeed(live, proc.Stdin(), t.Live, col)
	}
	v := supervise(ctx, turnCtx, t, proc, col, feed)
	res.Exit, res.Exited = v.exit, v.exited
	if v.stop == stopSettled {
		col.warn("CLI kept running after its final event; stopped after the settle window")
	}
	err = classify(col, v)
	res.Err = err
	if v.exited {
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		readSessionUsage(rctx, t, sb, in.Home, col)
		rcancel()
	}
	col.finalize()
	priceTurn(res, in, t.Adapter)
	if t.Store != nil {
		// Captured even after failures and cancellation, bounded.
		cctx, ccancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		captureConversation(cctx, t, sb, in, res)
		ccancel()
	}
	if inst != nil && len(inst.Rotating) > 0 && !t.Credentials.NoWriteBack {
		// A refreshed login is written back even after failures and
		// cancellation, bounded, so the user's host login stays valid.
		wctx, wcancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		n, werr := install.WriteBack(wctx, sb, inst.Rotating)
		wcancel()
		if werr != nil {
			res.Warnings = append(res.Warnings, "write back rotated login: "+werr.Error())
		}
		t.Logger.Debug("write back", "files", n)
	}
	return finish(err)
}

// release releases a cold lease even after cancellation, bounded, and logs
// a failure.
func release(ctx context.Context, t Turn, sb sandbox.Sandbox) error {
	rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer rcancel()
	err := sb.Release(rctx)
	if err != nil {
		t.Logger.Warn("release sandbox", "sandbox", sb.ID(), "err", err)
	}
	return err
}

// planCredentials plans the turn's credentials before any sandbox exists.
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
	if t.Deadline <= 0 {
		t.Deadline = DefaultDeadline
	}
	if t.IdleTimeout <= 0 {
		t.IdleTimeout = DefaultIdleTimeout
	}
	if t.Settle <= 0 {
		t.Settle = DefaultSettle
	}
	if t.KillGrace <= 0 {
		t.KillGrace = DefaultKillGrace
	}
	if t.Drain <= 0 {
		t.Drain = DefaultDrain
	}
	if t.TailBytes <= 0 {
		t.TailBytes = DefaultTailBytes
	}
	if t.Logger == nil {
		t.Logger = slog.New(slog.DiscardHandler)
	}
	if t.Now == nil {
		t.Now = time.Now
	}
	return t
}

// preflight checks the turn before any sandbox exists.
func preflight(t Turn) error {
	caps := t.Adapter.Capabilities()
	name := t.Adapter.Name()
	switch {
	case t.Sandbox == nil && t.Provider == nil:
		return outposterr.New(outposterr.Configuration, "turn has neither a sandbox nor a provider")
	case t.Input.Prompt == "":
		return outposterr.New(outposterr.Configuration, "%s: empty prompt", name)
	case t.Input.Fork && t.Input.Continue == "":
		return outposterr.New(outposterr.Configuration, "%s: fork needs the conversation to fork", name)
	case t.Input.Fork && !caps.Forkable:
		return outposterr.New(outposterr.Configuration, "%s does not support fork", name)
	case t.Input.Continue != "" && !caps.Resumable:
		return outposterr.New(outposterr.Configuration, "%s does not support resuming a conversation", name)
	case t.Live != nil && !canSteer(t.Adapter):
		return outposterr.New(outposterr.Configuration, "%s does not take live input into a running turn", name)
	}
	vars := t.Input.Env
	if t.Credentials != nil {
		vars = t.Credentials.Vars
	}
	return credentials.CheckMCPVars(name, t.Input.MCP, vars)
}

// classifyInfra classifies a failure of the sandbox layer, keeping the
// class of an error that already has one and honouring cancellation.
func classifyInfra(ctx context.Context, t Turn, class outposterr.Class, what string, err error) error {
	if ctx.Err() != nil {
		return outposterr.Wrap(outposterr.Aborted, err, "%s: %s", t.Adapter.Name(), what)
	}
	return asClass(err, class, t.Adapter.Name()+": "+what)
}

// asClass keeps err's Outpost class, or gives it class.
func asClass(err error, class outposterr.Class, what string) error {
	if _, ok := outposterr.As(err); ok {
		return err
	}
	return outposterr.Wrap(class, err, "%s", what)
}

// line is one output line from stdout or stderr.
type line struct {
	data      []byte
	stderr    bool
	oversized bool // the line exceeded MaxLineBytes and was dropped
}

// exitResult is what Process.Wait returned.
type exitResult struct {
	st  sandbox.ExitStatus
	err error
}

// supervise streams the process's output into the collector until the
// process exits (plus the drain window), enforcing deadline, idle timeout,
// settle window and cancellation.
func supervise(parent, turnCtx context.Context, t Turn, proc sandbox.Process, col *collector, feed *liveFeed) verdict {
	v := verdict{deadline: t.Deadline, idle: t.IdleTimeout}
	lines := make(chan line, 64)
	quit := make(chan struct{})
	var readers sync.WaitGroup
	readers.Add(2)
	go readLines(proc.Stdout(), false, lines, quit, &readers)
	go readLines(proc.Stderr(), true, lines, quit, &readers)
	readersDone := make(chan struct{})
	go func() { readers.Wait(); close(readersDone) }()

	exitCh := make(chan exitResult, 1)
	go func() {
		st, err := proc.Wait()
		exitCh <- exitResult{st, err}
	}()

	idle := time.NewTimer(t.IdleTimeout)
	defer idle.Stop()
	var settle <-chan time.Time
	var killWait <-chan time.Time
	var stopOnce sync.Once
	stopped := make(chan struct{})
	stop := func(r stopReason, cause error) {
		stopOnce.Do(func() {
			v.stop, v.cause = r, cause
			go func() {
				defer close(stopped)
				terminate(proc, t.KillGrace, exitCh)
			}()
		})
	}
	handle := func(l line) {
		if l.oversized {
			col.warn("dropped an output line longer than 16 MiB")
			return
		}
		if l.stderr {
			col.stderrLine(l.data)
		} else {
			hadFinished := col.finished != nil
			col.stdoutLine(l.data)
			if !hadFinished && col.finished != nil {
				settle = time.After(t.Settle)
			}
			if t.StopOnQuotaRetry && col.quotaChatter != nil && col.finished == nil {
				stop(stopQuota, nil)
				killWait = time.After(t.KillGrace + 10*time.Second)
			}
			feed.afterLine()
		}
	}
	done := turnCtx.Done()
	messages := feed.messages()

loop:
	for {
		select {
		case l := <-lines:
			handle(l)
			resetTimer(idle, t.IdleTimeout)
		case m, ok := <-messages:
			if !ok {
				messages = nil
				continue
			}
			feed.add(m)
		case r := <-exitCh:
			v.exit, v.exited = r.st, r.err == nil
			if r.err != nil {
				col.warn("wait for CLI: " + r.err.Error())
			}
			exitCh <- r // terminate may be waiting on it too
			break loop
		case <-idle.C:
			stop(stopIdle, nil)
			killWait = time.After(t.KillGrace + 10*time.Second)
		case <-settle:
			settle = nil
			stop(stopSettled, nil)
			killWait = time.After(t.KillGrace + 10*time.Second)
		case <-done:
			done = nil
			if col.finishedOK() {
				stop(stopSettled, nil)
			} else {
				stop(contextStop(parent), context.Cause(turnCtx))
			}
			killWait = time.After(t.KillGrace + 10*time.Second)
		case <-killWait:
			// The process did not report its exit even after SIGKILL.
			col.warn("CLI did not exit after SIGKILL; abandoning it")
			break loop
		}
	}

	// Drain: output already in flight is still collected for a short while.
	drain := time.NewTimer(t.Drain)
	defer drain.Stop()
drainLoop:
	for {
		select {
		case l := <-lines:
			handle(l)
		case <-readersDone:
			// Both streams are closed; take what is still buffered.
			for {
				select {
				case l := <-lines:
					handle(l)
				default:
					break drainLoop
				}
			}
		case <-drain.C:
			break drainLoop
		}
	}
	close(quit)
	feed.close()
	_ = proc.Close()
	select {
	case <-readersDone:
	case <-time.After(5 * time.Second):
	}
	if v.stop != stopNone {
		select {
		case <-stopped:
		case <-time.After(t.KillGrace + 5*time.Second):
		}
	}
	return v
}

// terminate stops the process group: SIGTERM, then SIGKILL after grace
// unless the process exited first.
func terminate(proc sandbox.Process, grace time.Duration, exitCh chan exitResult) {
	_ = proc.Signal(syscall.SIGTERM)
	timer := time.NewTimer(grace)
	defer timer.Stop()
	select {
	case r := <-exitCh:
		exitCh <- r
		return
	case <-timer.C:
	}
	_ = proc.Signal(syscall.SIGKILL)
}

func resetTimer(t *time.Timer, d time.Duration) {
	t.Stop()
	t.Reset(d)
}

// readLines splits r into lines and sends them, bounded by MaxLineBytes: a
// longer line is reported as a warning and skipped up to its newline.
func readLines(r io.Reader, stderr bool, out chan<- line, quit <-chan struct{}, wg *sync.WaitGroup) {
	defer wg.Done()
	if r == nil {
		return
	}
	br := bufio.NewReaderSize(r, 64<<10)
	var buf []byte
	oversized := false
	send := func(b []byte, over bool) bool {
		select {
		case out <- line{data: b, stderr: stderr, oversized: over}:
			return true
		case <-quit:
			return false
		}
	}
	for {
		chunk, err := br.ReadSlice('\n')
		if len(chunk) > 0 && !oversized {
			if len(buf)+len(chunk) > MaxLineBytes {
				oversized = true
				buf = nil
			} else {
				buf = append(buf, chunk...)
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		complete := err == nil
		if complete || (err != nil && len(buf) > 0) {
			if oversized {
				if !send(nil, true) {
					return
				}
			} else {
				b := buf
				if n := len(b); n > 0 && b[n-1] == '\n' {
					b = b[:n-1]
				}
				if !send(append([]byte(nil), b...), false) {
					return
				}
			}
			buf, oversized = buf[:0], false
		}
		if err != nil {
			return
		}
	}
}

// orNone returns a copy of c, or an empty credential choice (auth none).
func orNone(c *Credentials) Credentials {
	if c == nil {
		return Credentials{Auth: credentials.Auth{Form: credentials.None}}
	}
	return *c
}
