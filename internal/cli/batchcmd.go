package cli

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/outpost-dev/outpost"
	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/batch"
	"github.com/outpost-dev/outpost/harness"
	"github.com/outpost-dev/outpost/internal/atomicfile"
	"github.com/outpost-dev/outpost/internal/lines"
	"github.com/outpost-dev/outpost/internal/progress"
	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/runrec"
)

// BatchOptions are the flags of `outpost batch`.
type BatchOptions struct {
	Run     RunOptions
	Jobs    string
	Results string
	// Concurrency is "N", "agent=N,…" or both ("8,claude=4,codex=2").
	Concurrency string
	Resume      bool
	// RetryFailed reruns jobs whose latest result failed: "all" or a list
	// of classes ("quota,process"); empty: off.
	RetryFailed string
	// RetryTimeouts retries turns that timed out, as outages.
	RetryTimeouts bool
	MaxParks      int
	MaxPark       time.Duration
	MaxRetries    int
	// MaxCostUSD caps each job's cost, MaxBatchCostUSD the batch's.
	MaxCostUSD      float64
	MaxBatchCostUSD float64
	// MaxTokens caps each job's tokens, MaxBatchTokens the batch's.
	MaxTokens      int64
	MaxBatchTokens int64
	// MaxTurns caps each turn's assistant turns.
	MaxTurns int
	// Predictions is the SWE-bench predictions file to write;
	// PredictionsPick the policy choosing an instance's attempt.
	Predictions     string
	PredictionsPick string
	// AllowPaths are directories besides the jobs file's own that job
	// paths may resolve into; AllowEnv the host variables a job's env may
	// forward (besides those --env forwards to every job).
	AllowPaths []string
	AllowEnv   []string
	// grading reads the jobs as tasks to grade (outpost grade): agent and
	// prompt may be left out, and env is dropped (a verifier gets none).
	grading bool

	// Pool is "off", "on" (the overall concurrency) or a number of leases
	// kept warm.
	Pool string

	// Attempts is the number of attempts of every job or task that names
	// none (0: one).
	Attempts int
}

// NewCmdBatch builds `outpost batch`.
func NewCmdBatch(f *Factory) *cobra.Command {
	o := &BatchOptions{Run: RunOptions{IO: f.IO}}
	cmd := &cobra.Command{
		Use:   "batch JOBS.jsonl|TASKS-DIR|- [--results FILE] [--concurrency N[,AGENT=N…]] [--resume | --retry-failed[=CLASSES]]",
		Short: "Run many turns unattended: task workspaces, patches, quota pauses, budgets, resumable",
		Long: `batch runs every job of a JSON-lines file with a concurrency cap and appends one JSON
line per finished job to the results file. A job line:

  {"id","agent","prompt", "source":{"repo","commit"}|{"dir"} | "workspace",
   "metadata":{…}, "model","effort","timeout","idle_timeout","env":[…],
   "image"|"environment":{"dockerfile","context"},"cpus","memory","pids", "max_cost_usd","max_tokens","max_turns", "attempts",
   "conversation","fallback":[…],"schema":{…},
   "verify":{"command","files","timeout","image","network",
             "fail_to_pass","pass_to_pass","parser","test_patch"}}

An "environment":{"dockerfile","context"} instead of "image" builds the job's image
from a Dockerfile once per content, tagged outpost-task:<its hash> and reused while
that tag exists; the agent's and the verifier's leases (unless verify.image) run on it.
A recipe that fails is a configuration error (exit 2) ending with the build's last
lines; outpost gc --images removes these images.

A directory instead of a jobs file is a task directory, or a directory of them (each
holding instruction.md, task.json, and optionally environment/Dockerfile, tests/ and
workspace/, a git repository; see the README's "Evaluation workloads"). --agent names
the agent of tasks whose task.json names none; --attempts K runs K attempts of every
job or task that names no "attempts".

Relative paths resolve against the jobs file's directory ("-" reads the jobs from
standard input; paths then resolve against the current directory). A jobs file
reaches only what the command line hands it: every path a job names (workspace,
source dir and repo), links and ".." resolved, must lie under that directory or an
--allow-path DIR, and its env may name only variables given with --allow-env NAME
(forwarded into the sandboxes of the jobs that name them) or --env NAME (forwarded
into every job's). Anything else is a configuration error before anything runs.

A job with a source runs
each attempt in a fresh copy of it (a git checkout at the commit, or a copy of the
directory) copied into its own lease; "workspace" runs in place. For a git source
the patch of everything the agent changed is stored next to the results file
(RESULTS.patches/) and the result line carries its path, size and files.
"attempts": K runs K independent trials, ids ID#1…ID#K. Unknown fields are errors.

A result line holds job, attempt (its count of lines for the job), agent, outcome
(as printed by "outpost replay"), duration_ms, conversation, cli_version, turns,
retries, parks, agents, usage, metadata, source and patch, and for a job with a
verifier its verdict, reward and verify (exit_code, duration_ms, output, error, grading).
The latest line of a job is its result.

A verifier ("verify", jobs with a git source) grades each attempt once its last turn
ended, in a fresh lease of its own: the source at its commit, the attempt's patch, then
the test files of "files" (a directory, under the same path rules as a source dir)
copied over it, then "command" run with sh -c (timeout default 10m, network default
none, image default the job's). Verdict pass (exit 0), fail (another exit, or a patch
that does not apply) or error (the verifier could not run: no lease, exit 126/127,
killed, over its timeout); reward the number written to $OUTPOST_REWARD_FILE, else 1
for pass and 0 for fail. SWE-bench style: "test_patch" (a diff) is applied after the
patch, over the source's own version of the files it touches, and before "files" (one
that does not apply is an error); "fail_to_pass" and "pass_to_pass" test lists with a
"parser" ("pytest" or "go-test-json") read the command's whole output, and the verdict
is pass exactly when every listed test passed (a test the output does not report
failed), whatever the exit code; verify.grading keeps each listed test's outcome.
The batch then prints solved, pass@1 and pass@k per task and
writes RESULTS.scores.json; verdicts do not change the exit code.

Quota failures try the next fallback agent, else are parked until their reset time
(or --max-park) and resumed on the conversation they left (in a copy holding the
work it did), with a short continuation prompt. A quota with a reset pauses every
job of the same agent and account until the reset. Outages are retried with capped
exponential backoff and full jitter, then fall back. A timeout is the job's outcome,
not retried unless --retry-timeouts; --timeout (or a job's "timeout") bounds all of a
job's turns together.

Budgets: --max-cost-usd caps each job, --max-batch-cost-usd the batch, --max-tokens
and --max-batch-tokens their tokens (no price needed), --max-turns each turn's
assistant turns (Claude Code enforces it itself; other CLIs are counted). Caps are
enforced at the model gateway when the credential goes through it (and for capped
--offline turns): it refuses requests once a cap is spent and its measurement is the
usage of record. A job stopped by a cap fails as process with "budget" set in its
outcome (exit 12); a batch over its cap starts no further turn. A dollar cap on a
model without a list price is refused before anything runs; cap tokens instead.

A signal (SIGINT, SIGTERM, SIGHUP, SIGQUIT) stops scheduling, cancels running turns and
removes their sandboxes, and prints the command that continues the batch (every flag
of this invocation, --resume instead of --retry-failed). --resume
redoes jobs without a result line; --retry-failed reruns jobs whose latest line failed
(all, or only the named classes). The exit code covers the whole results file: 0
when every job's latest line succeeded, else the failures' code when they share a
class, else 1 (configuration errors: 2; a signal: 128 + its number).

--json prints each result line on standard output as well; --out DIR records the run
(every attempt's trajectory, the results, parks and a manifest) for outpost report.

--predictions FILE writes SWE-bench predictions (instance_id, model_name_or_path,
model_patch), one line per metadata.instance_id: the first attempt whose verifier
passed, else the first with a patch, else the first (--predictions-pick passed; patch
skips the verdicts, first takes the first attempt). When an instance has several
attempts every one is written to FILE.all.jsonl (preds.jsonl: preds.all.jsonl) with
its job, trial and verdict. "{trial}" in FILE writes one file per trial instead.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Jobs = args[0]
			if o.Results == "" {
				if o.Jobs == "-" {
					return &flagError{errors.New("jobs read from standard input (-) need --results FILE")}
				}
				o.Results = filepath.Clean(o.Jobs) + ".results.jsonl"
			}
			return runBatch(cmd.Context(), cmd, f, o)
		},
	}
	addRunFlags(f, cmd, &o.Run)
	fl := cmd.Flags()
	fl.StringVar(&o.Results, "results", "", "results file (JSON lines, appended; default JOBS.results.jsonl)")
	fl.StringVar(&o.Concurrency, "concurrency", "4", "turns running at once: N, and caps per agent (\"8,claude=4,codex=2\")")
	fl.BoolVar(&o.Resume, "resume", false, "skip jobs that already have a result line")
	fl.StringVar(&o.RetryFailed, "retry-failed", "", "rerun jobs whose latest result failed: all, or classes (\"quota,process\"); implies --resume")
	fl.Lookup("retry-failed").NoOptDefVal = "all"
	fl.IntVar(&o.MaxParks, "max-parks", 3, "times one job may wait for a quota reset (0: never; fail or fall back at once)")
	fl.DurationVar(&o.MaxPark, "max-park", 6*time.Hour, "longest single wait for a quota reset")
	fl.BoolVar(&o.RetryTimeouts, "retry-timeouts", false, "retry a turn that timed out like an outage (default: a timeout is the job's outcome)")
	fl.IntVar(&o.MaxRetries, "max-retries", 3, "outage retries per agent (0: none)")
	fl.Float64Var(&o.MaxCostUSD, "max-cost-usd", 0, "stop a job once its cost reaches this many dollars (0: no cap)")
	fl.Float64Var(&o.MaxBatchCostUSD, "max-batch-cost-usd", 0, "start no further turn once the batch's cost reaches this many dollars (0: no cap)")
	fl.Int64Var(&o.MaxTokens, "max-tokens", 0, "stop a job once it has used this many tokens, of every class (0: no cap; needs no price)")
	fl.Int64Var(&o.MaxBatchTokens, "max-batch-tokens", 0, "start no further turn once the batch has used this many tokens (0: no cap)")
	fl.IntVar(&o.MaxTurns, "max-turns", 0, "stop a turn after this many assistant turns (0: no cap)")
	fl.StringVar(&o.Predictions, "predictions", "", "write SWE-bench predictions JSONL from the jobs' metadata.instance_id, one line per instance")
	fl.StringVar(&o.PredictionsPick, "predictions-pick", pickPassed, "the attempt an instance's prediction takes: passed (the first whose verifier passed, else the first with a patch), patch (the first with a patch) or first")
	fl.StringArrayVar(&o.AllowPaths, "allow-path", nil, "a directory (links resolved) job paths may name besides the jobs file's own (repeatable)")
	fl.StringVar(&o.Pool, "pool", "off", "keep leases created and started ahead of the turns: on (as many as --concurrency's overall cap), N, or off")

	fl.IntVar(&o.Attempts, "attempts", 0, "attempts of every job or task that names none (\"attempts\"), ids ID#1…ID#K")
	fl.StringArrayVar(&o.AllowEnv, "allow-env", nil, "a host variable a job's env may forward into that job's sandbox (repeatable; names only)")
	fl.BoolVar(&o.Run.SSHIdentity, "allow-ssh-identity", false, "fetch jobs' ssh:// sources with your SSH keys and configuration (off: without them)")
	return cmd
}

// parseConcurrency reads "N", "agent=N,…" or "N,agent=N,…".
func parseConcurrency(s string) (int, map[string]int, error) {
	total, per := 0, map[string]int{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		name, v, isAgent := strings.Cut(part, "=")
		if !isAgent {
			v = name
		}
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n <= 0 {
			return 0, nil, fmt.Errorf("--concurrency: want N or AGENT=N with N > 0, not %q", part)
		}
		if !isAgent {
			if total != 0 {
				return 0, nil, fmt.Errorf("--concurrency: two overall caps in %q", s)
			}
			total = n
			continue
		}
		per[strings.TrimSpace(name)] = n
	}
	if total == 0 {
		// Only per-agent caps: the overall cap is their sum.
		for _, n := range per {
			total += n
		}
	}
	return total, per, nil
}

// parsePool reads --pool: off, on (concurrency leases) or N.
func parsePool(s string, concurrency int) (int, error) {
	switch s {
	case "off", "":
		return 0, nil
	case "on":
		return concurrency, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("--pool: on, off or a number of leases, not %q", s)
	}
	return n, nil
}

// parseRetryClasses reads "all" or a class list.
func parseRetryClasses(s string) (map[outposterr.Class]bool, error) {
	if s == "" || s == "all" {
		return nil, nil
	}
	out := map[outposterr.Class]bool{}
	for _, name := range strings.Split(s, ",") {
		c, ok := outposterr.ParseClass(name)
		if !ok {
			return nil, fmt.Errorf("--retry-failed: unknown class %q (all, or a list of %s)", name, classNames())
		}
		out[c] = true
	}
	return out, nil
}

func classNames() string {
	names := make([]string, len(outposterr.Classes))
	for i, c := range outposterr.Classes {
		names[i] = string(c)
	}
	return strings.Join(names, ", ")
}

func runBatch(ctx context.Context, cmd *cobra.Command, f *Factory, o *BatchOptions) error {
	total, perAgent, err := parseConcurrency(o.Concurrency)
	if err != nil {
		return &flagError{err}
	}
	retry, err := parseRetryClasses(o.RetryFailed)
	if err != nil {
		return &flagError{err}
	}
	if o.Run.Pool, err = parsePool(o.Pool, total); err != nil {
		return &flagError{err}
	}
	if o.MaxCostUSD < 0 || o.MaxBatchCostUSD < 0 || o.MaxTurns < 0 || o.MaxTokens < 0 || o.MaxBatchTokens < 0 {
		return &flagError{fmt.Errorf("--max-cost-usd, --max-batch-cost-usd, --max-tokens, --max-batch-tokens and --max-turns take positive values")}
	}
	switch o.PredictionsPick {
	case pickPassed, pickPatch, pickFirst:
	default:
		return &flagError{fmt.Errorf("--predictions-pick: passed, patch or first, not %q", o.PredictionsPick)}
	}
	switch {
	case o.MaxRetries < 0:
		return &flagError{fmt.Errorf("--max-retries must be 0 or more, not %d", o.MaxRetries)}
	case o.MaxParks < 0:
		return &flagError{fmt.Errorf("--max-parks must be 0 or more, not %d", o.MaxParks)}
	case o.MaxPark <= 0:
		return &flagError{fmt.Errorf("--max-park must be positive, not %s", o.MaxPark)}
	}
	if o.Attempts < 0 || o.Attempts > batch.MaxAttempts {
		return &flagError{fmt.Errorf("--attempts must be between 1 and %d, not %d", batch.MaxAttempts, o.Attempts)}
	}
	jobs, err := readJobsOrTasks(o.Jobs, f.IO.In, o)
	if err != nil {
		return err
	}
	for i := range jobs {
		if jobs[i].Attempts == 0 {
			jobs[i].Attempts = o.Attempts
		}
	}
	if jobs, err = batch.Expand(jobs); err != nil {
		return err
	}
	// Locked from reading it back to the verdict: one batch at a time.
	rf, err := openResults(o.Results)
	if err != nil {
		return err
	}
	defer rf.close()
	prev, err := readResults(o.Results)
	if err != nil {
		return err
	}
	prev.exists = prev.exists && !rf.created
	done := map[string]bool{}
	switch {
	case o.Resume || o.RetryFailed != "":
		var finished, failed, rerun int
		for _, j := range jobs {
			last, ok := prev.latest[j.ID]
			if !ok {
				continue
			}
			finished++
			if !last.Outcome.OK {
				failed++
			}
			again := o.RetryFailed != "" && !last.Outcome.OK &&
				(retry == nil || retry[outposterr.Class(last.Outcome.Class)])
			if again {
				rerun++
			} else {
				done[j.ID] = true
			}
		}
		msg := fmt.Sprintf("%d of %d jobs already have a result (%d failed)", finished, len(jobs), failed)
		if o.RetryFailed != "" {
			msg += fmt.Sprintf("; rerunning %d failed", rerun)
		}
		fmt.Fprintf(f.IO.ErrOut, "%s; running %d\n", msg, len(jobs)-len(done))
	case prev.exists:
		return &flagError{fmt.Errorf("%s exists: pass --resume to continue that run (or --retry-failed to rerun its failures), or choose another --results file", o.Results)}
	}
	table, err := loadAgents(f)
	if err != nil {
		return err
	}
	onlyDrivers := true
	for _, j := range jobs {
		for _, name := range append([]string{j.Agent}, j.Fallback...) {
			row, err := table.Lookup(name)
			if err != nil {
				return outposterr.Wrap(outposterr.Configuration, err, "job %s", j.ID)
			}
			onlyDrivers = onlyDrivers && row.Driver != nil
		}
	}
	if onlyDrivers && o.Run.Credentials.Auth == "" {
		// Drivers declare their secrets themselves; there is no login to choose.
		o.Run.Credentials.Auth = "none"
	}
	finished := 0
	if len(done) < len(jobs) {
		if finished, err = runPending(ctx, cmd, f, o, table, jobs, rf, batch.Options{
			Concurrency: total, AgentConcurrency: perAgent, MaxParks: noneIfZero(o.MaxParks), MaxPark: o.MaxPark,
			MaxRetries: noneIfZero(o.MaxRetries), Done: done, Attempts: prev.count,
			MaxJobCostUSD: o.MaxCostUSD, MaxCostUSD: o.MaxBatchCostUSD, MaxTurns: o.MaxTurns,
			MaxJobTokens: o.MaxTokens, MaxTokens: o.MaxBatchTokens,
			RetryTimeouts: o.RetryTimeouts, JobTimeout: o.Run.Turn.Timeout,
		}); err != nil && !outposterr.IsBudget(err) {
			return err
		} else if err != nil {
			fmt.Fprintln(f.IO.ErrOut, err)
		}
	}
	// The verdict covers the whole results file, not only this run.
	all, rerr := readResults(o.Results)
	if rerr != nil {
		return rerr
	}
	if err := reportScores(f.IO.ErrOut, o.Results, jobs, all); err != nil {
		return err
	}
	if o.Predictions != "" {
		if err := writePredictions(f.IO.ErrOut, o.Predictions, o.PredictionsPick, o.Results, jobs, all); err != nil {
			return err
		}
	}
	if err != nil {
		return &silentError{err}
	}
	return verdict(f.IO.ErrOut, jobs, all, finished)
}

// runPending runs the jobs not in opts.Done and appends their records.
func runPending(ctx context.Context, cmd *cobra.Command, f *Factory, o *BatchOptions, table *outpost.AgentTable, jobs []batch.Job, rf *resultsFile, opts batch.Options) (int, error) {
	if err := buildEnvironments(ctx, f, o, jobs, opts.Done); err != nil {
		return 0, err
	}
	s, err := newSession(ctx, f, &o.Run, table)
	if err != nil {
		return 0, err
	}
	defer s.close()
	if err := s.r.CheckJobs(jobs); err != nil {
		return 0, err
	}
	if err := s.r.CheckPrices(jobs, opts); err != nil {
		return 0, err
	}
	// Lines are appended after whole lines only, never glued to a torn one.
	if err := rf.mend(f.IO.ErrOut); err != nil {
		return 0, err
	}
	out := rf.fh
	patchDir := o.Results + ".patches"
	if o.Run.Output.Out != "" {
		if err := mendResultsTail(f.IO.ErrOut, filepath.Join(o.Run.Output.Out, runrec.ResultsFile)); err != nil {
			return 0, err
		}
	}
	rec, err := openRecord(cmd, &o.Run, f.IO.ErrOut)
	if err != nil {
		return 0, err
	}
	var attempt func(batch.TurnRequest) (func(adapters.Event), func(*harness.Result))
	if rec != nil {
		defer rec.Close()
		attempt = func(t batch.TurnRequest) (func(adapters.Event), func(*harness.Result)) {
			a := rec.Job(t.Job.ID, 0)
			_ = rec.Input(t.Job.ID, t.Job.Prompt, t.Job.Metadata) // the first attempt's; an error is Close's
			if t.Prompt != t.Job.Prompt {
				a.Prompt(t.Prompt) // a resumed turn's continue prompt
			}
			return a.Event, func(res *harness.Result) { _ = a.Finish(res) }
		}
	}
	p := newPendingRun(f.IO.ErrOut)
	// A line that cannot be written (a full disk) stops the batch: the jobs
	// after it would run for results nobody keeps.
	ctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	var writeErr error // under p.mu
	// Records go to the results file as they come; none is kept.
	opts.DiscardRecords = true
	opts.OnRecord = func(r batch.Record) {
		b, _ := json.Marshal(r)
		p.mu.Lock()
		defer p.mu.Unlock()
		if writeErr != nil {
			return
		}
		// One write per line, synced: a crash never leaves half a record;
		// a line written in part is cut off again.
		if err := appendLine(out, append(b, '\n')); err != nil {
			writeErr = err
			stop(err)
			return
		}
		p.finished++
		if o.Run.Output.JSON {
			fmt.Fprintf(f.IO.Out, "%s\n", b)
		}
		if rec != nil {
			_ = rec.Record(r)
		}
		p.prog.record(r)
	}
	opts.SavePatch = func(r batch.Record, diff []byte) (string, error) {
		return savePatch(patchDir, r, diff)
	}
	opts.OnStatus, opts.OnPause = p.prog.status, p.prog.pause
	opts.OnPark = func(job string, until time.Time) {
		p.prog.park(job, until)
		if rec != nil {
			_ = rec.Park(job, time.Now(), until)
		}
	}
	_, err = s.r.Batch(ctx, jobs, outpost.BatchOptions{Options: opts, Attempt: attempt})
	p.mu.Lock()
	werr, n := writeErr, p.finished
	p.mu.Unlock()
	if werr != nil {
		p.prog.finish()
		return n, outposterr.Wrap(outposterr.Configuration, werr,
			"append to %s: the batch stopped (%d results written this run); once it can be written, continue with:\n  %s",
			o.Results, n, batchResumeCommand(cmd, o))
	}
	return p.end(ctx, f.IO.ErrOut, err, "jobs finished", "batch", batchResumeCommand(cmd, o))
}

// appendLine appends line to the results file in one write and syncs it;
// when the write fails, what it wrote of the line is cut off again.
func appendLine(out *os.File, line []byte) error {
	fi, err := out.Stat()
	if err != nil {
		return err
	}
	if _, err := out.Write(line); err != nil {
		if fi.Mode().IsRegular() {
			_ = out.Truncate(fi.Size())
		}
		return err
	}
	if err := out.Sync(); err != nil && fi.Mode().IsRegular() {
		return err // a pipe or /dev/null cannot be synced
	}
	return nil
}

// pendingRun is what a run of pending jobs (batch's or grade's) holds while
// batch.Run runs: the progress line and, under mu, the number of records
// it wrote.
type pendingRun struct {
	prog     *batchProgress
	mu       sync.Mutex
	finished int
}

func newPendingRun(w io.Writer) *pendingRun {
	return &pendingRun{prog: newBatchProgress(w, isTerminal(w))}
}

// end closes the progress line once batch.Run returned err and returns the
// number of records the run wrote. An interrupted run tells w how many
// ("3 jobs finished") and the command that continues it (resume), and
// exits 130 as an aborted name ("batch") without printing more.
func (p *pendingRun) end(ctx context.Context, w io.Writer, err error, counted, name, resume string) (int, error) {
	p.prog.finish()
	p.mu.Lock()
	n := p.finished
	p.mu.Unlock()
	if errors.Is(err, context.Canceled) || ctx.Err() != nil {
		fmt.Fprintf(w, "interrupted: %d %s this run; to continue, run:\n  %s\n", n, counted, resume)
		return n, &silentError{outposterr.New(outposterr.Aborted, "%s interrupted", name)}
	}
	return n, err
}

// savePatch writes a job's patch into dir as ESCAPED-ID.ATTEMPT.patch and
// returns its path relative to the results file's directory.
func savePatch(dir string, r batch.Record, diff []byte) (string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	name := fileSafe(r.Job) + "." + strconv.Itoa(r.Attempt) + ".patch"
	if err := atomicfile.Write(filepath.Join(dir, name), diff, 0o600); err != nil {
		return "", err
	}
	return filepath.ToSlash(filepath.Join(filepath.Base(dir), name)), nil
}

// fileSafe escapes an id into a file name: letters, digits, '-' and '_'
// stay; everything else (and a leading '.') becomes %XX.
func fileSafe(id string) string {
	var b strings.Builder
	for i := 0; i < len(id); i++ {
		c := id[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' && i > 0 {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "%%%02X", c)
	}
	return b.String()
}

// firstIDs sorts ids and keeps the first ten, then "…".
func firstIDs(ids []string) []string {
	sort.Strings(ids)
	if len(ids) > 10 {
		ids = append(ids[:10], "…")
	}
	return ids
}

// verdict reports the whole results file and returns the exit error: nil
// when every job's latest line succeeded; else an error of the failures'
// class when they share one (a budget stop keeps its reason), else a
// process error.
func verdict(w io.Writer, jobs []batch.Job, all results, ran int) error {
	var failed []resultLine
	var printed []string
	missing := 0
	for _, j := range jobs {
		last, ok := all.latest[j.ID]
		if ok && last.Outcome.SecretPrinted {
			printed = append(printed, j.ID)
		}
		switch {
		case !ok:
			missing++
		case !last.Outcome.OK:
			failed = append(failed, last)
		}
	}
	if len(printed) > 0 {
		// A security signal, whatever the verdict: an agent that shows its
		// own key may be following instructions planted in its task.
		fmt.Fprintf(w, "%d of %d jobs' CLIs printed a secret their lease holds (replaced by [REDACTED]): %s\n",
			len(printed), len(jobs), strings.Join(firstIDs(printed), ", "))
	}
	if len(failed) == 0 && missing == 0 {
		return nil
	}
	if missing > 0 && len(failed) == 0 {
		return &silentError{outposterr.New(outposterr.Process, "%d of %d jobs have no result", missing, len(jobs))}
	}
	first := failed[0].Outcome
	same := true
	for _, r := range failed[1:] {
		o := r.Outcome
		if o.Class != first.Class || o.Budget != first.Budget || o.Unavailable != first.Unavailable || o.Auth != first.Auth || o.Limit != first.Limit {
			same = false
		}
	}
	ids := make([]string, 0, len(failed))
	for _, r := range failed {
		ids = append(ids, r.Job)
	}
	fmt.Fprintf(w, "%d of %d jobs failed (latest result per job; %d ran now): %s\n", len(failed), len(jobs), ran, strings.Join(firstIDs(ids), ", "))
	class := outposterr.Process
	var d outposterr.Details
	if c, ok := outposterr.ParseClass(first.Class); ok && same {
		class = c
		d = outposterr.Details{Budget: first.Budget, Unavailable: first.Unavailable, Auth: first.Auth, Limit: first.Limit}
	}
	return &silentError{outposterr.New(class, "%d of %d jobs failed", len(failed), len(jobs)).With(d)}
}

// readJobs parses a JSON-lines job file ("-": standard input); blank
// lines and lines starting with # are skipped. Relative paths in a job
// (workspace, source repo and dir) resolve against the file's directory —
// the current directory for standard input or another stream (a pipe,
// /dev/stdin) — and every path must stay inside that directory or an
// --allow-path, every env name be allowed (jobTrust).
func readJobs(path string, stdin io.Reader, o *BatchOptions) ([]batch.Job, error) {
	var in io.Reader
	var file string // the jobs file when it is a regular file: large jobs are read again as they start
	base, baseHelp := "", "the jobs file's directory"
	if path == "-" {
		in, path = stdin, "standard input"
	} else {
		fh, err := os.Open(path)
		if err != nil {
			return nil, outposterr.Wrap(outposterr.Configuration, err, "read jobs")
		}
		defer fh.Close()
		in = fh
		if fi, err := fh.Stat(); err == nil && fi.Mode().IsRegular() {
			abs, err := filepath.Abs(path)
			if err != nil {
				return nil, outposterr.Wrap(outposterr.Configuration, err, "read jobs")
			}
			base, file = filepath.Dir(abs), abs
		}
	}
	if base == "" {
		// A stream has no directory of its own: the current one stands in.
		wd, err := os.Getwd()
		if err != nil {
			return nil, outposterr.Wrap(outposterr.Configuration, err, "read jobs")
		}
		base, baseHelp = wd, "the current directory (jobs read from a stream)"
	}
	trust, err := newJobTrust(base, baseHelp, o.AllowPaths, o.AllowEnv, o.Run.Credentials.Env)
	if err != nil {
		return nil, err
	}
	var defaultWorkspace string
	if o.Run.Sandbox.Workspace != "" {
		if defaultWorkspace, err = filepath.Abs(o.Run.Sandbox.Workspace); err != nil {
			return nil, &flagError{fmt.Errorf("--workspace %s: %w", o.Run.Sandbox.Workspace, err)}
		}
	}
	var jobs []batch.Job
	// Read as a stream: memory holds the jobs, never the file.
	err = eachInputLine(in, path, "job", maxJobLine, func(n int, at int64, raw, line []byte) error {
		if line[0] == '#' {
			return nil
		}
		if err := checkJobLine(line); err != nil {
			return outposterr.Wrap(outposterr.Configuration, err, "%s line %d", path, n)
		}
		var j batch.Job
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&j); err != nil {
			return outposterr.Wrap(outposterr.Configuration, err, "%s line %d", path, n)
		}
		if _, err := dec.Token(); !errors.Is(err, io.EOF) {
			return outposterr.New(outposterr.Configuration, "%s line %d: text after the job's JSON object", path, n)
		}
		if o.grading {
			gradingTask(&j)
		}
		trust.resolve(&j)
		if err := j.Compile(); err != nil {
			return outposterr.Wrap(outposterr.Configuration, err, "%s line %d", path, n)
		}
		if err := trust.check(&j, fmt.Sprintf("%s line %d", path, n)); err != nil {
			return err
		}
		if j.Workspace == "" && j.Source == nil && defaultWorkspace != "" {
			// The command line's --workspace: the user's, not the file's.
			j.Workspace = defaultWorkspace
		}
		if file != "" && len(raw) > lazyJobBytes {
			j.Prompt, j.Metadata, j.Load = "", nil, lazyJob(file, n, at, raw)
		}
		jobs = append(jobs, j)
		return nil
	})
	return nonEmpty(jobs, err, path, "jobs")
}

// lazyJobBytes: a job line longer than this keeps only its small parts in
// memory until the job starts (batch.Job.Load).
const lazyJobBytes = 4 << 10

// lazyJob loads the prompt and metadata of the job on line n of file, at
// offset at, which read as raw: the line must read the same again (a jobs
// file changed under a running batch is an error, not another job).
func lazyJob(file string, n int, at int64, raw []byte) func() (string, json.RawMessage, error) {
	sum := sha256.Sum256(raw)
	size := len(raw)
	return func() (string, json.RawMessage, error) {
		fh, err := os.Open(file)
		if err != nil {
			return "", nil, err
		}
		defer fh.Close()
		line := make([]byte, size)
		if _, err := fh.ReadAt(line, at); err != nil {
			return "", nil, fmt.Errorf("%s line %d: read again: %w", file, n, err)
		}
		if sha256.Sum256(line) != sum {
			return "", nil, fmt.Errorf("%s line %d changed while the batch ran", file, n)
		}
		var j struct {
			Prompt   string          `json:"prompt"`
			Metadata json.RawMessage `json:"metadata"`
		}
		if err := json.Unmarshal(line, &j); err != nil {
			return "", nil, fmt.Errorf("%s line %d: %w", file, n, err)
		}
		return j.Prompt, j.Metadata, nil
	}
}

// Bounds on one line of a jobs file and of a results file (a result line
// carries the job's patch).
const (
	maxJobLine    = lines.MaxBytes
	maxResultLine = 64 << 20
)

// resultLine is what batch reads back of a result line.
type resultLine struct {
	Job      string              `json:"job"`
	Task     string              `json:"task"`
	Trial    int                 `json:"trial"`
	Attempt  int                 `json:"attempt"`
	Agent    string              `json:"agent"`
	Outcome  resultOutcome       `json:"outcome"`
	Metadata json.RawMessage     `json:"metadata"`
	Patch    *batch.PatchRecord  `json:"patch"`
	Source   *batch.SourceRecord `json:"source"`
	Verdict  harness.Verdict     `json:"verdict"`
	Reward   *float64            `json:"reward"`
}

type resultOutcome struct {
	OK          bool   `json:"ok"`
	Class       string `json:"class"`
	Budget      string `json:"budget"`
	Unavailable string `json:"unavailable"`
	Auth        string `json:"auth"`
	Limit       string `json:"limit"`
	Model       string `json:"model"`
	// SecretPrinted: the job's CLI printed a secret its lease holds.
	SecretPrinted bool `json:"secret_printed"`
}

// results is an existing results file: the latest line and the number of
// lines per job.
type results struct {
	exists bool
	latest map[string]resultLine
	count  map[string]int
}

// readResults reads a results file; a torn last line (a crash mid-write)
// is ignored, a missing file is empty.
func readResults(path string) (results, error) {
	r := results{latest: map[string]resultLine{}, count: map[string]int{}}
	fh, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return r, nil
	}
	if err != nil {
		return r, outposterr.Wrap(outposterr.Configuration, err, "read results")
	}
	defer fh.Close()
	r.exists = true
	err = eachInputLine(fh, path, "result", maxResultLine, func(_ int, _ int64, _, line []byte) error {
		var l resultLine
		if json.Unmarshal(line, &l) == nil && l.Job != "" {
			r.count[l.Job]++
			r.latest[l.Job] = l
		}
		return nil
	})
	return r, err
}

// readPatch reads a stored patch, bounded, without following a link.
func readPatch(path string) ([]byte, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() || fi.Size() > maxPredictionPatch {
		return nil, fmt.Errorf("%s is not a regular file under %d MiB", path, maxPredictionPatch>>20)
	}
	return os.ReadFile(path)
}

// batchProgress shows the batch's status line (internal/progress): drawn
// in place on a terminal, periodic plain lines otherwise, job lines above.
type batchProgress struct{ line *progress.Line }

func newBatchProgress(w io.Writer, tty bool) *batchProgress {
	return &batchProgress{line: progress.New(w, tty, 0)}
}

func (p *batchProgress) status(s batch.Status) {
	text := s.String()
	// The line shows the count itself, with elapsed time and an estimate.
	if _, rest, ok := strings.Cut(text, " done"); ok {
		text = "done" + rest
	}
	p.line.Set(text, s.Done, s.Total)
}

func (p *batchProgress) record(r batch.Record) {
	state, reason := "ok", ""
	if !r.Outcome.OK {
		state = r.Outcome.Class
		if r.Outcome.Error != "" {
			// Why, in a line: the whole error is in the record.
			reason = ": " + termSafe(oneLine(r.Outcome.Error, maxReason))
		}
		if r.Outcome.Unavailable != "" {
			state += " (unavailable: " + r.Outcome.Unavailable + ")"
		}
		if r.Outcome.Budget != "" {
			state += " (budget: " + r.Outcome.Budget + ")"
		}
		if r.Outcome.Limit != "" {
			state += " (limit: " + r.Outcome.Limit + ")"
		}
	}
	patch := ""
	if r.Patch != nil {
		patch = fmt.Sprintf(", patch %d files", len(r.Patch.Files))
	}
	graded := ""
	if r.Verdict != "" {
		graded = "; verdict " + string(r.Verdict)
		if r.Reward != nil {
			graded += fmt.Sprintf(" (reward %g)", *r.Reward)
		}
		if r.Verify != nil && r.Verify.Grading != nil {
			g := r.Verify.Grading
			graded += fmt.Sprintf(", fail_to_pass %d/%d and pass_to_pass %d/%d passed", g.FailToPass.Passed, g.FailToPass.Total,
				g.PassToPass.Passed, g.PassToPass.Total)
		}
		if r.Verify != nil && r.Verify.Error != "" {
			graded += ": " + r.Verify.Error
		}
	}
	p.line.Logf("job %s: %s via %s in %s%s%s%s", r.Job, state, r.Agent, time.Duration(r.DurationMS)*time.Millisecond, reason, patch, graded)
}

// maxReason bounds the error a failed job's line shows.
const maxReason = 200

func (p *batchProgress) park(job string, until time.Time) {
	p.line.Logf("job %s: quota; parked until %s", job, until.UTC().Format(time.RFC3339))
}

func (p *batchProgress) pause(agent string, until time.Time) {
	p.line.Logf("agent %s: quota on its account; no new turn before %s", agent, until.UTC().Format(time.RFC3339))
}

func (p *batchProgress) finish() { p.line.Close() }

// noneIfZero maps a flag's explicit 0 ("none") to batch.Options' negative
// (whose zero means "the default").
func noneIfZero(n int) int {
	if n == 0 {
		return -1
	}
	return n
}

// buildEnvironments builds (or finds) the task image of every job to run
// that has an environment, once per recipe, and makes it the job's image:
// its agent's and its verifier's leases run on it. A recipe that fails
// fails the batch before anything runs.
func buildEnvironments(ctx context.Context, f *Factory, o *BatchOptions, jobs []batch.Job, done map[string]bool) error {
	type recipe struct{ context, dockerfile string }
	tags := map[recipe]string{}
	var out io.Writer
	if o.Run.Output.Verbose {
		out = f.IO.ErrOut
	}
	for i := range jobs {
		j := &jobs[i]
		if j.Environment == nil || done[j.ID] {
			continue
		}
		dir, file, err := j.Environment.Paths()
		if err != nil {
			return outposterr.Wrap(outposterr.Configuration, err, "job %s: environment", j.ID)
		}
		key := recipe{dir, file}
		tag, ok := tags[key]
		if !ok {
			var built bool
			tag, built, err = f.ensureTaskImage(ctx, o.Run.Sandbox.Kind, dir, file, out)
			if err != nil {
				return outposterr.Wrap(outposterr.ClassOf(err), err, "job %s: environment %s", j.ID, filepath.Join(dir, file))
			}
			state := "reused"
			if built {
				state = "built"
			}
			fmt.Fprintf(f.IO.ErrOut, "environment %s: %s %s\n", filepath.Join(dir, file), state, tag)
			tags[key] = tag
		}
		j.Image, j.Environment = tag, nil
	}
	return nil
}
