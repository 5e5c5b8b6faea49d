// Package batch runs many agent turns unattended: a concurrency cap,
// quota-aware parking, retries of outages with capped exponential backoff
// and full jitter, fallback agents, and a results log that makes a run
// resumable.
//
// Policy, per job:
//   - success: one result record, done;
//   - quota: the next fallback agent is tried if one is left; otherwise the
//     job is parked — it holds no concurrency slot — until the quota's reset
//     (capped by Options.MaxPark), then resumed on the conversation the
//     failed turn left, with a short continuation prompt instead of a
//     restart; at most Options.MaxParks times;
//   - outage (process failure with Unavailable set, or a timeout): retried
//     from the job's own starting point after a backoff of
//     rand·min(MaxBackoff, BaseBackoff·2^n), at most Options.MaxRetries
//     times, then the next fallback agent;
//   - anything else: a failure record, done.
//
// Cancelling the context stops scheduling and cancels running turns (the
// turn function releases its sandboxes); unfinished jobs get no record, so a
// later run given the same results (Options.Done) redoes only them.
package batch

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/outpost-dev/outpost/harness"
	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/typed"
	"github.com/outpost-dev/outpost/usage"
)

// Job is one unit of work.
type Job struct {
	ID        string `json:"id"`
	Agent     string `json:"agent"`
	Prompt    string `json:"prompt"`
	Workspace string `json:"workspace,omitempty"`
	Model     string `json:"model,omitempty"`
	// Conversation continues an existing conversation.
	Conversation string `json:"conversation,omitempty"`
	// Fallback agents are tried in order on quota and outage failures.
	Fallback []string `json:"fallback,omitempty"`
	// Schema asks for a typed response: a JSON Schema the answer must match
	// (the outcome then carries its value). Compile checks it once.
	Schema json.RawMessage `json:"schema,omitempty"`
	// Compiled is Schema compiled by [Job.Compile]; nil without a schema.
	Compiled *typed.Schema `json:"-"`
}

// maxJobID bounds a job id.
const maxJobID = 256

// Compile checks a job and compiles its schema into Compiled. [Run] calls
// it for jobs not compiled yet; callers that read jobs call it once to
// report a bad job before anything runs.
func (j *Job) Compile() error {
	switch {
	case j.ID == "":
		return outposterr.New(outposterr.Configuration, "job without an id")
	case len(j.ID) > maxJobID:
		return outposterr.New(outposterr.Configuration, "job id of %d bytes: at most %d", len(j.ID), maxJobID)
	case !utf8.ValidString(j.ID) || strings.IndexFunc(j.ID, unicode.IsControl) >= 0:
		// Ids are printed on terminals and written to results: no escape
		// sequences, no line breaks, no invalid text.
		return outposterr.New(outposterr.Configuration, "job id %q: use printable text (no control characters)", j.ID)
	case j.Agent == "":
		return outposterr.New(outposterr.Configuration, "job %s: no agent", j.ID)
	case strings.TrimSpace(j.Prompt) == "":
		return outposterr.New(outposterr.Configuration, "job %s: empty prompt", j.ID)
	}
	if len(j.Schema) > 0 && j.Compiled == nil {
		s, err := typed.Compile(j.Schema)
		if err != nil {
			return outposterr.Wrap(outposterr.Configuration, err, "job %s: schema", j.ID)
		}
		j.Compiled = s
	}
	return nil
}

// Turn is one turn the runner asks for.
type Turn struct {
	Job    Job
	Agent  string
	Prompt string
	// Continue is the conversation to resume ("" starts a new one).
	Continue string
}

// TurnFunc runs one turn and returns its result (never nil) and classified error.
type TurnFunc func(ctx context.Context, t Turn) (*harness.Result, error)

// Record is one line of the results log.
type Record struct {
	Job     string          `json:"job"`
	Agent   string          `json:"agent"`
	Outcome harness.Outcome `json:"outcome"`
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
}

// Status is a snapshot for progress displays.
type Status struct {
	Total, Done, Failed, Running, Parked int
	Tokens                               int64
	CostUSD                              float64
}

// DefaultContinuePrompt resumes a parked conversation.
const DefaultContinuePrompt = "Continue where you left off and finish the task."

// Options tune a run. Zero values are documented per field.
type Options struct {
	// Concurrency caps turns running at once (0: 4).
	Concurrency int
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
	// BaseBackoff and MaxBackoff shape the outage backoff (0: 2s and 2m).
	BaseBackoff, MaxBackoff time.Duration
	// Done lists job ids already finished (from an earlier results log).
	Done map[string]bool
	// OnRecord receives each finished job's record, from one goroutine at a time.
	OnRecord func(Record)
	// OnStatus receives a snapshot whenever something changes.
	OnStatus func(Status)
	// OnPark is told when a job is parked and until when.
	OnPark func(job string, until time.Time)
	// Now and Sleep are the clock (nil: real time). Sleep must return early
	// with the context's error when it is cancelled.
	Now   func() time.Time
	Sleep func(ctx context.Context, d time.Duration) error
	// Jitter returns a number in [0,1) (nil: math/rand/v2).
	Jitter func() float64
}

func (o *Options) defaults() {
	if o.Concurrency <= 0 {
		o.Concurrency = 4
	}
	if o.MaxParks == 0 {
		o.MaxParks = 3
	}
	if o.MaxPark <= 0 {
		o.MaxPark = 6 * time.Hour
	}
	if o.DefaultPark <= 0 {
		o.DefaultPark = 15 * time.Minute
	}
	if o.ContinuePrompt == "" {
		o.ContinuePrompt = DefaultContinuePrompt
	}
	if o.MaxRetries == 0 {
		o.MaxRetries = 3
	}
	if o.BaseBackoff <= 0 {
		o.BaseBackoff = 2 * time.Second
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = 2 * time.Minute
	}
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
	opts Options
	turn TurnFunc
	sem  chan struct{}

	mu     sync.Mutex
	status Status
}

// Run runs jobs and returns the records of the jobs it finished. It returns
// the context's error when cancelled (the records so far are still
// returned and were delivered to OnRecord).
func Run(ctx context.Context, jobs []Job, turn TurnFunc, opts Options) ([]Record, error) {
	opts.defaults()
	seen := map[string]bool{}
	for i := range jobs {
		j := &jobs[i]
		if err := j.Compile(); err != nil {
			return nil, err
		}
		if seen[j.ID] {
			return nil, outposterr.New(outposterr.Configuration, "duplicate job id %q", j.ID)
		}
		seen[j.ID] = true
	}
	r := &runner{opts: opts, turn: turn, sem: make(chan struct{}, opts.Concurrency)}
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
	// before it has taken its own (goroutines would race for it).
	prev := make(chan struct{})
	close(prev)
	for _, j := range pending {
		after, admitted := prev, make(chan struct{})
		prev = admitted
		wg.Go(func() {
			rec, ok := r.job(ctx, j, after, admitted)
			if !ok {
				return
			}
			recMu.Lock()
			defer recMu.Unlock()
			records = append(records, rec)
			if opts.OnRecord != nil {
				opts.OnRecord(rec)
			}
		})
	}
	wg.Wait()
	return records, ctx.Err()
}

func (r *runner) publish(f func(*Status)) {
	r.mu.Lock()
	f(&r.status)
	s := r.status
	r.mu.Unlock()
	if r.opts.OnStatus != nil {
		r.opts.OnStatus(s)
	}
}

// job drives one job to a record; ok is false when the run was cancelled
// first. It asks for its first slot once after is closed, and closes
// admitted when it has it (or gives up).
func (r *runner) job(ctx context.Context, j Job, after <-chan struct{}, admitted chan<- struct{}) (Record, bool) {
	var admit sync.Once
	defer admit.Do(func() { close(admitted) })
	agents := append([]string{j.Agent}, j.Fallback...)
	rec := Record{Job: j.ID}
	ai, retries, parks := 0, 0, 0
	conv, prompt := j.Conversation, j.Prompt
	// The job's clock starts with its first turn and stops while it waits
	// for a slot behind other jobs.
	var start time.Time
	var queued time.Duration
	select {
	case <-after:
	case <-ctx.Done():
		return rec, false
	}
	for {
		agent := agents[ai]
		if len(rec.Agents) == 0 || rec.Agents[len(rec.Agents)-1] != agent {
			rec.Agents = append(rec.Agents, agent)
		}
		asked := r.opts.Now()
		select {
		case r.sem <- struct{}{}:
		case <-ctx.Done():
			return rec, false
		}
		admit.Do(func() { close(admitted) })
		if ctx.Err() != nil { // both were ready: never start a turn after cancellation
			<-r.sem
			return rec, false
		}
		if start.IsZero() {
			start = r.opts.Now()
		} else {
			queued += r.opts.Now().Sub(asked)
		}
		r.publish(func(s *Status) { s.Running++ })
		res, err := r.turn(ctx, Turn{Job: j, Agent: agent, Prompt: prompt, Continue: conv})
		<-r.sem
		r.publish(func(s *Status) {
			s.Running--
			if res != nil {
				s.Tokens += res.Usage.Tokens()
				s.CostUSD += res.Usage.CostUSD
			}
		})
		rec.Turns++
		switch {
		case res == nil:
			// Nothing is known of this turn's usage.
			rec.Usage.Complete, rec.Usage.CostKnown, rec.Usage.CostSource = false, false, ""
		case rec.Turns == 1:
			// The sum starts from the first turn: the zero Usage would
			// make it incomplete and its cost unknown forever.
			rec.Usage = res.Usage
		default:
			rec.Usage = rec.Usage.Add(res.Usage)
		}
		if ctx.Err() != nil && (err == nil || outposterr.ClassOf(err) == outposterr.Aborted) {
			return rec, false
		}
		if res == nil {
			res = &harness.Result{Agent: agent}
		}
		if res.Err == nil {
			res.Err = err
		}
		done := func() (Record, bool) {
			rec.Agent, rec.Outcome = agent, res.Outcome()
			rec.Conversation, rec.CLIVersion = res.Conversation, res.CLIVersion
			rec.DurationMS = (r.opts.Now().Sub(start) - queued).Milliseconds()
			r.publish(func(s *Status) {
				s.Done++
				if err != nil {
					s.Failed++
				}
			})
			return rec, true
		}
		if err == nil {
			return done()
		}
		quota := outposterr.IsQuota(err)
		outage := !quota && (outposterr.UnavailableReason(err) != "" || outposterr.ClassOf(err) == outposterr.Timeout)
		switch {
		case quota && ai+1 < len(agents), outage && retries >= r.opts.MaxRetries && ai+1 < len(agents):
			// The next agent starts the job afresh: conversations do not
			// move between CLIs.
			ai, retries, conv, prompt = ai+1, 0, j.Conversation, j.Prompt
			if conv != "" && agents[ai] != j.Agent {
				conv = ""
			}
		case quota && parks < r.opts.MaxParks:
			wait := r.opts.DefaultPark
			if reset, ok := outposterr.ResetAt(err); ok {
				wait = reset.Sub(r.opts.Now())
			}
			wait = min(max(wait, 0), r.opts.MaxPark)
			parks++
			rec.Parks = parks
			if res.Conversation != "" {
				// Resume the conversation the limited turn left, not a restart.
				conv, prompt = res.Conversation, r.opts.ContinuePrompt
			}
			if r.opts.OnPark != nil {
				r.opts.OnPark(j.ID, r.opts.Now().Add(wait))
			}
			r.publish(func(s *Status) { s.Parked++ })
			serr := r.opts.Sleep(ctx, wait)
			r.publish(func(s *Status) { s.Parked-- })
			if serr != nil {
				return rec, false
			}
		case outage && retries < r.opts.MaxRetries:
			d := Backoff(retries, r.opts.BaseBackoff, r.opts.MaxBackoff, r.opts.Jitter())
			retries++
			rec.Retries++
			if err := r.opts.Sleep(ctx, d); err != nil {
				return rec, false
			}
		default:
			return done()
		}
	}
}

// String summarizes a status line.
func (s Status) String() string {
	return fmt.Sprintf("%d/%d done (%d failed), %d running, %d parked, %d tokens, $%.4f",
		s.Done, s.Total, s.Failed, s.Running, s.Parked, s.Tokens, s.CostUSD)
}
