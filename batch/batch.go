// Package batch runs many agent turns unattended: a concurrency cap,
// quota-aware parking, retries of outages with capped exponential backoff
// and full jitter, fallback agents, and a results log that makes a run
// resumable.
//
// Jobs (one line each of a jobs file) name an agent and a prompt, and
// optionally a workspace source (a fresh copy per job and attempt, see
// package source), metadata carried into the results, per-job limits and
// resources, and a number of independent attempts ([Expand]).
//
// Policy, per job:
//   - success: one result record, done;
//   - quota: the next fallback agent is tried if one is left; otherwise the
//     job is parked — it holds no concurrency slot — until the quota's reset
//     (capped by Options.MaxPark), then resumed on the conversation the
//     failed turn left, with a short continuation prompt instead of a
//     restart; at most Options.MaxParks times;
//   - outage (process failure with Unavailable set, a timeout, or a
//     retryable sandbox failure such as a lease that disappeared): retried
//     from the job's own starting point after a backoff of
//     rand·min(MaxBackoff, BaseBackoff·2^n), at most Options.MaxRetries
//     times, then the next fallback agent;
//   - anything else: a failure record, done.
//
// Accounts: a quota failure with a reset time pauses every job that uses
// the same agent with the same credential (Options.Account's fingerprint)
// until the reset: no turn of that agent and account starts before it,
// queued jobs included (a job with a fallback agent left moves on to it).
// Options.AgentConcurrency caps the turns of one agent running at once,
// beside the overall Options.Concurrency.
//
// Budgets: Options.MaxJobCostUSD (or a job's max_cost_usd) caps each job's
// cost and Options.MaxCostUSD the whole batch's; each turn runs with the
// cap that is left (harness.Limits.MaxCostUSD, which stops it as a process
// failure with the budget reason "cost"), and a job whose cap is spent
// before a further turn ends with that failure. Once the batch's spend
// reaches its cap no further turn starts: jobs that did not finish get no
// record and Run returns a budget error. Only known costs count
// (usage.Usage.CostKnown); a turn whose tokens nothing prices is stopped by
// the harness when a cap is set, and one that reports no usage at all adds
// nothing (its record says cost_known false).
//
// Cancelling the context stops scheduling and cancels running turns (the
// turn function releases its sandboxes); unfinished jobs get no record, so a
// later run given the same results (Options.Done) redoes only them.
package batch

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/outpost-dev/outpost/harness"
	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/usage"
)

// TurnRequest is one turn the runner asks for.
type TurnRequest struct {
	Job    Job
	Agent  string
	Prompt string
	// Continue is the conversation to resume ("" starts a new one).
	Continue string
	// Patch is what the job's earlier turns changed in its source
	// workspace, to re-apply on the fresh copy a continued conversation
	// runs in (nil: start from the source).
	Patch []byte
	// Timeout is what is left of the job's timeout (Job.Timeout) for this
	// turn: the job's turns share it (0: the job has none).
	Timeout time.Duration
	// MaxCostUSD, MaxTokens and MaxTurns cap this turn (0: none): what is
	// left of the job's and the batch's cost and token caps, and the job's
	// turn cap.
	MaxCostUSD float64
	MaxTokens  int64
	MaxTurns   int
}

// TurnFunc runs one turn and returns its result (never nil) and classified error.
type TurnFunc func(ctx context.Context, t TurnRequest) (*harness.Result, error)

// Record is one line of the results log.
type Record struct {
	Job string `json:"job"`
	// Task and Trial name the job a trial was expanded from and its number
	// (jobs with attempts > 1).
	Task  string `json:"task,omitempty"`
	Trial int    `json:"trial,omitempty"`
	// Attempt counts the job's result lines: 1 for its first, more for
	// reruns (--retry-failed). The latest line of a job is its result.
	Attempt int             `json:"attempt"`
	Agent   string          `json:"agent"`
	Outcome harness.Outcome `json:"outcome"`
	// Started is when the job's first turn started (it held its slot).
	Started time.Time `json:"started,omitzero"`
	// DurationMS is the job's wall time from its first turn's start to its
	// end: parks, backoffs and fallbacks included, waiting for a slot not.
	DurationMS   int64  `json:"duration_ms"`
	Conversation string `json:"conversation"`
	CLIVersion   string `json:"cli_version"`
	Turns        int    `json:"turns"`
	Retries      int    `json:"retries"`
	Parks        int    `json:"parks"`
	// Agents lists every agent tried, in order; more than one means a
	// fallback was used.
	Agents []string `json:"agents"`
	// Usage sums every turn the job ran; it is complete (and its cost known)
	// only when every turn's was.
	Usage usage.Usage `json:"usage"`
	// Metadata is the job's metadata, unchanged.
	Metadata json.RawMessage `json:"metadata,omitempty"`
	// Source is the job's source.
	Source *SourceRecord `json:"source,omitempty"`
	// Patch describes what the job changed (jobs with a git source).
	Patch *PatchRecord `json:"patch,omitempty"`
	// Verdict is the verifier's (jobs with one): pass, fail or error; a
	// job without a verifier is not graded and has none. Reward is the
	// verifier's reward (none for an error); Verify how it ran.
	Verdict harness.Verdict       `json:"verdict,omitempty"`
	Reward  *float64              `json:"reward,omitempty"`
	Verify  *harness.Verification `json:"verify,omitempty"`
}

// SourceRecord is the source a job's workspace was copied from.
type SourceRecord struct {
	Repo   string `json:"repo,omitempty"`
	Commit string `json:"commit,omitempty"`
	Dir    string `json:"dir,omitempty"`
}

// PatchRecord describes a job's patch: where it was stored (Options.SavePatch),
// its base commit, size and changed files.
type PatchRecord struct {
	Path    string   `json:"path,omitempty"`
	Base    string   `json:"base"`
	Bytes   int      `json:"bytes"`
	Files   []string `json:"files"`
	Omitted bool     `json:"omitted,omitempty"`
	// Error says why the patch could not be stored.
	Error string `json:"error,omitempty"`
}

// Status is a snapshot for progress displays.
type Status struct {
	Total, Done, Failed, Running, Parked int
	Tokens                               int64
	CostUSD                              float64
	// Unpriced counts turns whose cost is not known (not in CostUSD).
	Unpriced int
	// Paused lists the agents waiting for an account's quota reset.
	Paused []Pause
	// Stopped says the batch's cost cap stopped scheduling.
	Stopped bool
	// Graded counts finished jobs a verifier graded, Solved those it
	// passed.
	Graded, Solved int
}

// Pause is an agent (on one account) that starts no turn before Until.
type Pause struct {
	Agent string
	Until time.Time
}

// DefaultContinuePrompt resumes a parked conversation.
const DefaultContinuePrompt = "Continue where you left off and finish the task."

// Options tune a run. Zero values are documented per field.
type Options struct {
	// Concurrency caps turns running at once (0: 4).
	Concurrency int
	// AgentConcurrency caps the turns of one agent running at once (absent
	// or 0: only Concurrency).
	AgentConcurrency map[string]int
	// MaxParks bounds how often one job waits for a quota reset (0: 3;
	// negative: never).
	MaxParks int
	// MaxPark caps one wait (0: 6h); DefaultPark is used when the reset is
	// unknown (0: 15m).
	MaxPark, DefaultPark time.Duration
	// ContinuePrompt resumes a parked conversation (empty: DefaultContinuePrompt).
	ContinuePrompt string
	// MaxRetries bounds outage retries per agent (0: 3; negative: none).
	MaxRetries int
	// RetryTimeouts retries a turn that timed out as an outage. Off by
	// default: a timeout is the agent's outcome (it did not finish in
	// time), and a job's timeout bounds all its turns together. A timeout
	// during which the CLI reported an outage is retried either way.
	RetryTimeouts bool
	// JobTimeout bounds each job's turns together when the job sets no
	// Timeout of its own (0: each turn gets the runner's deadline).
	JobTimeout time.Duration
	// BaseBackoff and MaxBackoff shape the outage backoff (0: 2s and 2m).
	BaseBackoff, MaxBackoff time.Duration
	// MaxJobCostUSD caps each job's cost (a job's MaxCostUSD wins; 0: no
	// cap); MaxCostUSD caps the batch's (0: no cap). See the package doc.
	MaxJobCostUSD, MaxCostUSD float64
	// MaxJobTokens caps each job's tokens (a job's MaxTokens wins; 0: no
	// cap); MaxTokens caps the batch's (0: no cap). Tokens of every class
	// count (usage.Usage.Tokens); no price is needed.
	MaxJobTokens, MaxTokens int64
	// MaxTurns caps each turn's assistant turns (a job's MaxTurns wins; 0:
	// no cap).
	MaxTurns int
	// DiscardRecords hands each record to OnRecord only: Run keeps none
	// and returns none, so its memory does not grow with the batch.
	DiscardRecords bool
	// Done lists job ids already finished (from an earlier results log).
	Done map[string]bool
	// Attempts holds how many result lines each job already has;
	// Record.Attempt continues from it.
	Attempts map[string]int
	// Account returns a fingerprint of the credential agent's turns use
	// (never the secret); a quota pause holds every job of the same agent
	// and fingerprint. Nil: one account per agent.
	Account func(agent string) string
	// SavePatch stores a finished job's patch and returns its path (nil:
	// not stored; the record keeps the size and files).
	SavePatch func(rec Record, diff []byte) (string, error)
	// Verify grades a finished job that has a verifier (Job.Verify) given
	// its patch (nil: none; the untouched source is graded), whatever the
	// job's outcome (a job that never ran a turn, its Load failed, is not
	// graded); the verification holds one of the Concurrency slots.
	// Nil: jobs are not graded. [outpost.Runner.Batch] sets it.
	Verify func(ctx context.Context, j Job, patch []byte) *harness.Verification
	// OnRecord receives each finished job's record, from one goroutine at a time.
	OnRecord func(Record)
	// OnStatus receives a snapshot whenever something changes.
	OnStatus func(Status)
	// OnPark is told when a job is parked and until when.
	OnPark func(job string, until time.Time)
	// OnPause is told when an agent's account is paused and until when.
	OnPause func(agent string, until time.Time)
	// Now and Sleep are the clock (nil: real time). Sleep must return early
	// with the context's error when it is cancelled.
	Now   func() time.Time
	Sleep func(ctx context.Context, d time.Duration) error
	// Jitter returns a number in [0,1) (nil: math/rand/v2).
	Jitter func() float64
}

func (o *Options) defaults() {
	o.Concurrency = positiveOr(o.Concurrency, 4)
	o.MaxParks = cmp.Or(o.MaxParks, 3)
	o.MaxPark = positiveOr(o.MaxPark, 6*time.Hour)
	o.DefaultPark = positiveOr(o.DefaultPark, 15*time.Minute)
	o.ContinuePrompt = cmp.Or(o.ContinuePrompt, DefaultContinuePrompt)
	o.MaxRetries = cmp.Or(o.MaxRetries, 3)
	o.BaseBackoff = positiveOr(o.BaseBackoff, 2*time.Second)
	o.MaxBackoff = positiveOr(o.MaxBackoff, 2*time.Minute)
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Sleep == nil {
		o.Sleep = sleep
	}
	if o.Jitter == nil {
		o.Jitter = rand.Float64
	}
}

// positiveOr is v, or def when v is zero or negative.
func positiveOr[T int | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Backoff returns the n-th (0-based) full-jitter backoff.
func Backoff(n int, base, maxD time.Duration, jitter float64) time.Duration {
	d := float64(base) * math.Pow(2, float64(n))
	if d > float64(maxD) || math.IsInf(d, 0) {
		d = float64(maxD)
	}
	return time.Duration(jitter * d)
}

// runner holds a run's shared state.
type runner struct {
	opts   Options
	turn   TurnFunc
	sem    chan struct{}
	agents map[string]chan struct{} // per-agent slots

	mu     sync.Mutex
	pubMu  sync.Mutex // orders OnStatus deliveries
	status Status
	// pauses holds, per agent and account, when its quota resets.
	pauses map[account]time.Time
	spent  float64 // known cost of every turn so far
	tokens int64   // tokens of every turn so far
}

// account is an agent on one credential.
type account struct{ agent, fingerprint string }

// Run runs jobs (expanded by [Expand]) and returns the records of the
// jobs it finished. It returns the context's error when cancelled, and a
// budget error (outposterr.IsBudget) when the batch's cost cap stopped it
// before every job finished; the records so far are returned either way
// and were delivered to OnRecord.
func Run(ctx context.Context, jobs []Job, turn TurnFunc, opts Options) ([]Record, error) {
	opts.defaults()
	for i := range jobs {
		if err := jobs[i].Compile(); err != nil {
			return nil, err
		}
	}
	jobs, err := Expand(jobs)
	if err != nil {
		return nil, err
	}
	for a, n := range opts.AgentConcurrency {
		if n < 0 {
			return nil, outposterr.New(outposterr.Configuration, "negative concurrency for %s", a)
		}
	}
	if opts.MaxCostUSD < 0 || opts.MaxJobCostUSD < 0 || opts.MaxTurns < 0 || opts.MaxTokens < 0 || opts.MaxJobTokens < 0 {
		return nil, outposterr.New(outposterr.Configuration, "negative cost, token or turn cap")
	}
	r := &runner{opts: opts, turn: turn, sem: make(chan struct{}, opts.Concurrency),
		agents: map[string]chan struct{}{}, pauses: map[account]time.Time{}}
	for a, n := range opts.AgentConcurrency {
		if n > 0 {
			r.agents[a] = make(chan struct{}, n)
		}
	}
	var pending []Job
	for _, j := range jobs {
		if !opts.Done[j.ID] {
			pending = append(pending, j)
		}
	}
	r.status.Total = len(pending)
	r.publish(func(*Status) {})

	var (
		wg      sync.WaitGroup
		recMu   sync.Mutex
		records []Record
	)
	// Jobs take their first slot in file order: each waits until the job
	// before it has taken its own (goroutines would race for it). A job's
	// goroutine starts only then, so a batch of any size holds goroutines
	// (and loaded prompts, Job.Load) for its running jobs and one more.
	prev := make(chan struct{})
	close(prev)
	for _, j := range pending {
		after, admitted := prev, make(chan struct{})
		prev = admitted
		<-after
		wg.Go(func() {
			rec, ok := r.job(ctx, j, after, admitted)
			if !ok {
				return
			}
			recMu.Lock()
			defer recMu.Unlock()
			if !opts.DiscardRecords {
				records = append(records, rec)
			}
			if opts.OnRecord != nil {
				opts.OnRecord(rec)
			}
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return records, err
	}
	if r.stopped() && len(records) < len(pending) {
		if opts.MaxTokens > 0 && r.tokens >= opts.MaxTokens {
			return records, outposterr.New(outposterr.Process,
				"the batch's token cap of %d is spent: %d of %d jobs did not finish (raise --max-batch-tokens and --resume)",
				opts.MaxTokens, len(pending)-len(records), len(pending)).With(outposterr.Details{Budget: "tokens"})
		}
		return records, outposterr.New(outposterr.Process,
			"the batch's cost cap of $%.4f is spent: %d of %d jobs did not finish (raise --max-batch-cost-usd and --resume)",
			opts.MaxCostUSD, len(pending)-len(records), len(pending)).With(outposterr.Details{Budget: "cost"})
	}
	return records, nil
}

// publish changes the status and hands the snapshot to OnStatus. pubMu
// keeps deliveries in the order of the changes, so a display never sees
// an older snapshot after a newer one.
func (r *runner) publish(f func(*Status)) {
	r.pubMu.Lock()
	defer r.pubMu.Unlock()
	r.mu.Lock()
	f(&r.status)
	s := r.status
	s.Paused = nil
	now := r.opts.Now()
	for a, until := range r.pauses {
		if until.After(now) {
			s.Paused = append(s.Paused, Pause{Agent: a.agent, Until: until})
		}
	}
	r.mu.Unlock()
	sort.Slice(s.Paused, func(i, j int) bool { return s.Paused[i].Agent < s.Paused[j].Agent })
	if r.opts.OnStatus != nil {
		r.opts.OnStatus(s)
	}
}

func (r *runner) account(agent string) account {
	a := account{agent: agent}
	if r.opts.Account != nil {
		a.fingerprint = r.opts.Account(agent)
	}
	return a
}

// pausedUntil is when agent's account may start turns again (zero: now).
func (r *runner) pausedUntil(agent string) time.Time {
	a := r.account(agent)
	r.mu.Lock()
	defer r.mu.Unlock()
	if until := r.pauses[a]; until.After(r.opts.Now()) {
		return until
	}
	return time.Time{}
}

// pause holds agent's account until reset (at most Options.MaxPark from
// now).
func (r *runner) pause(agent string, reset time.Time) {
	a := r.account(agent)
	if limit := r.opts.Now().Add(r.opts.MaxPark); reset.After(limit) {
		reset = limit
	}
	r.mu.Lock()
	extended := reset.After(r.pauses[a])
	if extended {
		r.pauses[a] = reset
	}
	r.mu.Unlock()
	if extended {
		if r.opts.OnPause != nil {
			r.opts.OnPause(agent, reset)
		}
		r.publish(func(*Status) {})
	}
}

func (r *runner) stopped() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.status.Stopped
}

// errStopped says the batch's cost cap stopped scheduling; errPaused that
// the agent's account is paused and the job has a fallback to try.
var (
	errStopped = errors.New("the batch's cost cap is spent")
	errPaused  = errors.New("the agent's account is paused")
)

// acquire waits for a turn slot for agent, outside any pause of its
// account, and returns its release. It fails with the context's error,
// errStopped, or (when fallback says the job has another agent to try)
// errPaused instead of waiting for a pause to end.
func (r *runner) acquire(ctx context.Context, agent string, fallback bool) (func(), error) {
	for {
		if r.stopped() {
			return nil, errStopped
		}
		if until := r.pausedUntil(agent); !until.IsZero() {
			if fallback {
				return nil, errPaused
			}
			if err := r.opts.Sleep(ctx, until.Sub(r.opts.Now())); err != nil {
				return nil, err
			}
			continue
		}
		own := r.agents[agent]
		if own != nil {
			select {
			case own <- struct{}{}:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		select {
		case r.sem <- struct{}{}:
		case <-ctx.Done():
			if own != nil {
				<-own
			}
			return nil, ctx.Err()
		}
		release := func() {
			<-r.sem
			if own != nil {
				<-own
			}
		}
		switch {
		case ctx.Err() != nil: // both were ready: never start a turn after cancellation
			release()
			return nil, ctx.Err()
		case r.stopped():
			release()
			return nil, errStopped
		case !r.pausedUntil(agent).IsZero():
			// A quota arrived while this job waited for its slot.
			release()
			continue
		}
		return release, nil
	}
}

// capFor is the cost and token caps of a job's next turn: what is left of
// the job's caps (given its spend) and of the batch's, the smaller of each;
// 0 without caps. spent names a cap already spent ("cost", "tokens"; ""
// when none is).
func (r *runner) capFor(j Job, jobSpent float64, jobTokens int64) (cost float64, tokens int64, spent string) {
	cost, over := capLeft(cmp.Or(j.MaxCostUSD, r.opts.MaxJobCostUSD), jobSpent)
	if over {
		return 0, 0, "cost"
	}
	if tokens, over = capLeft(cmp.Or(j.MaxTokens, r.opts.MaxJobTokens), jobTokens); over {
		return 0, 0, "tokens"
	}
	r.mu.Lock()
	batchSpent, batchTokens := r.spent, r.tokens
	r.mu.Unlock()
	restCost, over := capLeft(r.opts.MaxCostUSD, batchSpent)
	if over {
		return 0, 0, "cost"
	}
	restTokens, over := capLeft(r.opts.MaxTokens, batchTokens)
	if over {
		return 0, 0, "tokens"
	}
	return tighter(cost, restCost), tighter(tokens, restTokens), ""
}

// capLeft is what is left of limit after used, 0 when there is no limit
// (limit <= 0); over says the limit is used up.
func capLeft[T float64 | int64](limit, used T) (left T, over bool) {
	if limit <= 0 {
		return 0, false
	}
	if used >= limit {
		return 0, true
	}
	return limit - used, false
}

// tighter is the smaller of two caps, where 0 is no cap.
func tighter[T float64 | int64](a, b T) T {
	if b != 0 && (a == 0 || b < a) {
		return b
	}
	return a
}

// job drives one job to a record; ok is false when the run was cancelled
// (or the batch's budget stopped it) first.
//
// It asks for its first slot once after is closed, and closes admitted when
// it has it, waits for a pause of its account, or gives up: with one slot,
// jobs start in file order.
func (r *runner) job(ctx context.Context, j Job, after <-chan struct{}, admitted chan<- struct{}) (Record, bool) {
	var admit sync.Once
	defer admit.Do(func() { close(admitted) })
	jr, loadErr := r.newJobRun(j)
	if loadErr != nil {
		return jr.finish(ctx, j.Agent, nil, outposterr.Wrap(outposterr.Configuration, loadErr, "job %s", j.ID))
	}
	select {
	case <-after:
	case <-ctx.Done():
		return jr.rec, false
	}
	for {
		agent := jr.agents[jr.ai]
		if n := len(jr.rec.Agents); n == 0 || jr.rec.Agents[n-1] != agent {
			jr.rec.Agents = append(jr.rec.Agents, agent)
		}
		if !r.pausedUntil(agent).IsZero() {
			// A paused account waits for its reset, not for the job
			// before it: later jobs need not wait with it.
			admit.Do(func() { close(admitted) })
		}
		asked := r.opts.Now()
		release, err := r.acquire(ctx, agent, jr.ai+1 < len(jr.agents))
		admit.Do(func() { close(admitted) })
		if errors.Is(err, errPaused) {
			// Its account is waiting for a reset: the next agent starts the
			// job afresh (conversations do not move between CLIs).
			jr.ai, jr.retries, jr.conv, jr.prompt, jr.earlier = jr.ai+1, 0, "", j.Prompt, nil
			continue
		}
		if err != nil {
			return jr.rec, false
		}
		// The caps are read with the slot in hand: turns that ended while
		// this job waited have spent their share.
		t, stop, give := jr.nextTurn(agent)
		if stop != nil {
			release()
			if !give {
				return jr.rec, false
			}
			if jr.last != nil {
				// Keep what the last turn left; the verdict is the cap.
				jr.last.Err = stop
			}
			return jr.finish(ctx, agent, jr.last, stop)
		}
		if jr.start.IsZero() {
			jr.start = r.opts.Now()
		} else {
			jr.queued += r.opts.Now().Sub(asked)
		}
		r.publish(func(s *Status) { s.Running++ })
		turnStart := r.opts.Now()
		res, err := r.turn(ctx, t)
		jr.ran += r.opts.Now().Sub(turnStart)
		// A quota pauses its account before the slot is given back: a job
		// waiting for the slot must find the pause.
		if reset, ok := outposterr.ResetAt(err); ok && outposterr.IsQuota(err) {
			r.pause(agent, reset)
		}
		release()
		jr.account(res)
		if ctx.Err() != nil && (err == nil || outposterr.ClassOf(err) == outposterr.Aborted) {
			return jr.rec, false
		}
		if res == nil {
			res = &harness.Result{Agent: agent}
		}
		if res.Err == nil {
			res.Err = err
		}
		if res.Patch == nil && jr.earlier != nil && jr.last != nil {
			// The turn ended before its patch was collected (no lease, a
			// lease that vanished): the work of the earlier turns, which it
			// was to continue from, is still the job's.
			res.Patch = jr.last.Patch
		}
		jr.last = res
		if err == nil {
			return jr.finish(ctx, agent, res, nil)
		}
		if again, ok := jr.after(ctx, res, err); !again {
			if !ok {
				return jr.rec, false
			}
			return jr.finish(ctx, agent, res, err)
		}
	}
}

// jobRun is the state of one job across its turns: the record it builds,
// which agent it is on, its retries and parks, the conversation and prompt
// of its next turn, and what its turns spent.
type jobRun struct {
	r      *runner
	j      Job
	rec    Record
	agents []string // the job's agent, then its fallbacks

	ai, retries, parks int
	conv, prompt       string
	earlier            []byte // the patch a continued conversation re-applies
	last               *harness.Result

	spent  float64
	tokens int64
	ran    time.Duration // the job's turns' time, against its timeout
	// The job's clock starts with its first turn and stops while it waits
	// for a slot behind other jobs.
	start  time.Time
	queued time.Duration
}

// newJobRun starts the state of job j, with its large parts loaded
// (Job.Load) for as long as it runs; the error is the load's.
func (r *runner) newJobRun(j Job) (*jobRun, error) {
	var loadErr error
	if j.Load != nil {
		j.Prompt, j.Metadata, loadErr = j.Load()
		j.Load = nil
	}
	jr := &jobRun{r: r, j: j, agents: append([]string{j.Agent}, j.Fallback...),
		rec:  Record{Job: j.ID, Task: j.Task, Trial: j.Trial, Attempt: r.opts.Attempts[j.ID] + 1, Metadata: j.Metadata},
		conv: j.Conversation, prompt: j.Prompt}
	if j.Source != nil {
		jr.rec.Source = &SourceRecord{Repo: j.Source.Repo, Commit: j.Source.Commit, Dir: j.Source.Dir}
	}
	return jr, loadErr
}

// finish completes the record with the job's last result and err, and
// its verdict; ok is false when the run was cancelled while the job was
// being graded.
func (jr *jobRun) finish(ctx context.Context, agent string, res *harness.Result, err error) (rec Record, ok bool) {
	r := jr.r
	if res == nil {
		res = &harness.Result{Agent: agent}
	}
	if res.Err == nil {
		res.Err = err
	}
	rp := &jr.rec
	rp.Agent, rp.Outcome = agent, res.Outcome()
	rp.Conversation, rp.CLIVersion = res.Conversation, res.CLIVersion
	if jr.start.IsZero() {
		jr.start = r.opts.Now()
	}
	rp.Started = jr.start
	rp.DurationMS = (r.opts.Now().Sub(jr.start) - jr.queued).Milliseconds()
	if p := res.Patch; p != nil {
		rp.Patch = &PatchRecord{Base: p.Base, Bytes: p.Bytes, Files: p.Files, Omitted: p.Omitted}
		if r.opts.SavePatch != nil && !p.Omitted {
			path, serr := r.opts.SavePatch(*rp, p.Diff)
			rp.Patch.Path = path
			if serr != nil {
				rp.Patch.Error = serr.Error()
			}
		}
	}
	// A job that never ran a turn (its Load failed) has no attempt to
	// grade: it is not graded.
	if jr.j.Verify != nil && r.opts.Verify != nil && rp.Turns > 0 {
		if !jr.grade(ctx, res) {
			return *rp, false
		}
	}
	r.publish(func(s *Status) {
		s.Done++
		if err != nil {
			s.Failed++
		}
		if rp.Verdict != "" {
			s.Graded++
		}
		if rp.Verdict == harness.VerdictPass {
			s.Solved++
		}
	})
	return *rp, true
}

// grade runs the job's verifier on its last result's patch, in one of the
// batch's slots, and puts the verdict in the record; false when the
// context ended first.
func (jr *jobRun) grade(ctx context.Context, res *harness.Result) bool {
	r, rp := jr.r, &jr.rec
	select {
	case r.sem <- struct{}{}:
	case <-ctx.Done():
		return false
	}
	var patch []byte
	p := res.Patch
	var v *harness.Verification
	if p != nil && p.Omitted {
		v = &harness.Verification{Verdict: harness.VerdictError,
			Error: fmt.Sprintf("the attempt's patch (%d bytes) was over the bound and not kept: nothing to grade", p.Bytes)}
	} else {
		if p != nil {
			patch = p.Diff
		}
		v = r.opts.Verify(ctx, jr.j, patch)
	}
	<-r.sem
	if ctx.Err() != nil {
		return false
	}
	if v == nil {
		return true
	}
	rp.Verdict, rp.Reward, rp.Verify = v.Verdict, v.Reward, v
	return true
}

// nextTurn is the job's next turn on agent, with what is left of its caps
// and timeout. When a cap or the timeout is spent it returns the error
// that ends the job instead, and give says whether the job gets a record
// (false: the batch's own cap stopped it, or no cap of the job's is set).
func (jr *jobRun) nextTurn(agent string) (t TurnRequest, stop error, give bool) {
	r, j := jr.r, jr.j
	costCap, tokenCap, spent := r.capFor(j, jr.spent, jr.tokens)
	if spent != "" {
		jobCapped := j.MaxCostUSD > 0 || r.opts.MaxJobCostUSD > 0 || j.MaxTokens > 0 || r.opts.MaxJobTokens > 0
		err := outposterr.New(outposterr.Process, "%s: the job's cost cap is spent ($%.4f)", agent, jr.spent).
			With(outposterr.Details{Agent: agent, Budget: spent})
		if spent == "tokens" {
			err = outposterr.New(outposterr.Process, "%s: the job's token cap is spent (%d tokens)", agent, jr.tokens).
				With(outposterr.Details{Agent: agent, Budget: spent})
		}
		return TurnRequest{}, err, !r.stopped() && jobCapped
	}
	var timeout time.Duration
	jt := time.Duration(j.Timeout)
	if jt == 0 {
		jt = r.opts.JobTimeout
	}
	if jt > 0 {
		if timeout = jt - jr.ran; timeout <= 0 {
			return TurnRequest{}, outposterr.New(outposterr.Timeout, "%s: the job's timeout of %s is spent by its earlier turns", agent, jt).
				With(outposterr.Details{Agent: agent}), true
		}
	}
	maxTurns := j.MaxTurns
	if maxTurns == 0 {
		maxTurns = r.opts.MaxTurns
	}
	return TurnRequest{Job: j, Agent: agent, Prompt: jr.prompt, Continue: jr.conv, Patch: jr.earlier,
		Timeout: timeout, MaxCostUSD: costCap, MaxTokens: tokenCap, MaxTurns: maxTurns}, nil, true
}

// account adds a turn's usage to the job's, the batch's and the status.
func (jr *jobRun) account(res *harness.Result) {
	r := jr.r
	cost, known := 0.0, false
	if res != nil && res.Usage.CostKnown {
		cost, known = res.Usage.CostUSD, true
	}
	var tokens int64
	if res != nil {
		tokens = res.Usage.Tokens()
	}
	jr.spent += cost
	jr.tokens += tokens
	r.mu.Lock()
	r.spent += cost
	r.tokens += tokens
	if (r.opts.MaxCostUSD > 0 && r.spent >= r.opts.MaxCostUSD) || (r.opts.MaxTokens > 0 && r.tokens >= r.opts.MaxTokens) {
		r.status.Stopped = true
	}
	r.mu.Unlock()
	r.publish(func(s *Status) {
		s.Running--
		if res != nil {
			s.Tokens += tokens
			s.CostUSD += cost
			if !known {
				s.Unpriced++
			}
		}
	})
	rec := &jr.rec
	rec.Turns++
	switch {
	case res == nil:
		// Nothing is known of this turn's usage.
		rec.Usage.Complete, rec.Usage.CostKnown, rec.Usage.CostSource = false, false, ""
	case rec.Turns == 1:
		// The sum starts from the first turn: the zero Usage would make it
		// incomplete and its cost unknown forever.
		rec.Usage = res.Usage
	default:
		rec.Usage = rec.Usage.Add(res.Usage)
	}
}

// after decides what follows a failed turn: the next agent, a park until
// the quota resets, an outage retry after a backoff (again: the job goes
// on), or the end of the job (again false). ok is false when the context
// ended a wait: the job gets no record.
func (jr *jobRun) after(ctx context.Context, res *harness.Result, err error) (again, ok bool) {
	r, j := jr.r, jr.j
	quota := outposterr.IsQuota(err)
	outage := !quota && (outposterr.UnavailableReason(err) != "" ||
		(r.opts.RetryTimeouts && outposterr.ClassOf(err) == outposterr.Timeout) ||
		// A lease that disappeared mid-turn: a new one may do.
		outposterr.ClassOf(err) == outposterr.Sandbox && outposterr.IsRetryable(err))
	reset, hasReset := outposterr.ResetAt(err)
	more := jr.ai+1 < len(jr.agents)
	switch {
	case quota && more, outage && jr.retries >= r.opts.MaxRetries && more:
		// The next agent starts the job afresh: conversations do not move
		// between CLIs.
		jr.ai, jr.retries, jr.conv, jr.prompt, jr.earlier = jr.ai+1, 0, j.Conversation, j.Prompt, nil
		if jr.conv != "" && jr.agents[jr.ai] != j.Agent {
			jr.conv = ""
		}
		return true, true
	case quota && jr.parks < r.opts.MaxParks:
		wait := r.opts.DefaultPark
		if hasReset {
			wait = reset.Sub(r.opts.Now())
		}
		wait = min(max(wait, 0), r.opts.MaxPark)
		jr.parks++
		jr.rec.Parks = jr.parks
		if res.Conversation != "" {
			// Resume the conversation the limited turn left, not a
			// restart, in a copy holding the work it did.
			jr.conv, jr.prompt = res.Conversation, r.opts.ContinuePrompt
			if res.Patch != nil && !res.Patch.Omitted {
				jr.earlier = res.Patch.Diff
			}
		}
		if r.opts.OnPark != nil {
			r.opts.OnPark(j.ID, r.opts.Now().Add(wait))
		}
		r.publish(func(s *Status) { s.Parked++ })
		serr := r.opts.Sleep(ctx, wait)
		r.publish(func(s *Status) { s.Parked-- })
		return serr == nil, serr == nil
	case outage && jr.retries < r.opts.MaxRetries:
		d := Backoff(jr.retries, r.opts.BaseBackoff, r.opts.MaxBackoff, r.opts.Jitter())
		jr.retries++
		jr.rec.Retries++
		serr := r.opts.Sleep(ctx, d)
		return serr == nil, serr == nil
	}
	return false, true
}

// String summarizes a status line.
func (s Status) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d/%d done (%d failed), %d running, %d parked, %d tokens, $%.4f",
		s.Done, s.Total, s.Failed, s.Running, s.Parked, s.Tokens, s.CostUSD)
	if s.Graded > 0 {
		fmt.Fprintf(&b, ", %d of %d graded solved", s.Solved, s.Graded)
	}
	if s.Unpriced > 0 {
		fmt.Fprintf(&b, " (+%d turns of unknown cost)", s.Unpriced)
	}
	for _, p := range s.Paused {
		fmt.Fprintf(&b, "; %s paused until %s", p.Agent, p.Until.UTC().Format("15:04:05Z"))
	}
	if s.Stopped {
		b.WriteString("; cost cap spent, no new turns")
	}
	return b.String()
}
