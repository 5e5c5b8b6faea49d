package batch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/harness"
	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/usage"
)

var t0 = time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)

// fakeClock advances virtual time on every Sleep.
type fakeClock struct {
	mu    sync.Mutex
	now   time.Time
	slept []time.Duration
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.slept = append(c.slept, d)
	c.mu.Unlock()
	return ctx.Err()
}

func quotaErr(reset time.Time) error {
	return &outposterr.Error{Class: outposterr.Quota, Message: "quota", Details: outposterr.Details{ResetAt: reset}}
}

func outageErr() error {
	return outposterr.New(outposterr.Process, "overloaded").With(outposterr.Details{Unavailable: "overloaded"})
}

func ok(conv string) (*harness.Result, error) {
	return &harness.Result{Conversation: conv, Text: "done", Usage: usage.Usage{Input: 10, Output: 2, Complete: true}}, nil
}

func TestParkedQuotaResumesConversation(t *testing.T) {
	clock := &fakeClock{now: t0}
	var turns []TurnRequest
	var mu sync.Mutex
	turn := func(_ context.Context, tr TurnRequest) (*harness.Result, error) {
		mu.Lock()
		turns = append(turns, tr)
		n := len(turns)
		mu.Unlock()
		if n == 1 {
			return &harness.Result{Conversation: "conv-1", Err: quotaErr(t0.Add(90 * time.Minute))}, quotaErr(t0.Add(90 * time.Minute))
		}
		return ok(tr.Continue)
	}
	var parked []time.Time
	recs, err := Run(context.Background(), []Job{{ID: "j1", Agent: "claude", Prompt: "do it"}}, turn,
		Options{Now: clock.Now, Sleep: clock.Sleep, OnPark: func(_ string, until time.Time) { parked = append(parked, until) }})
	require.NoError(t, err)
	require.Len(t, recs, 1)
	assert.True(t, recs[0].Outcome.OK)
	assert.Equal(t, 1, recs[0].Parks)
	assert.Equal(t, []time.Duration{90 * time.Minute}, clock.slept, "parked until the reset")
	assert.Equal(t, []time.Time{t0.Add(90 * time.Minute)}, parked)
	require.Len(t, turns, 2)
	assert.Equal(t, "conv-1", turns[1].Continue, "resumed on the stored conversation")
	assert.Equal(t, DefaultContinuePrompt, turns[1].Prompt, "with a continuation prompt, not a restart")
}

func TestParkCappedAndBounded(t *testing.T) {
	clock := &fakeClock{now: t0}
	turn := func(context.Context, TurnRequest) (*harness.Result, error) {
		return &harness.Result{}, quotaErr(t0.Add(48 * time.Hour))
	}
	recs, err := Run(context.Background(), []Job{{ID: "j", Agent: "a", Prompt: "p"}}, turn,
		Options{Now: clock.Now, Sleep: clock.Sleep, MaxParks: 2, MaxPark: time.Hour})
	require.NoError(t, err)
	require.Len(t, recs, 1)
	assert.False(t, recs[0].Outcome.OK)
	assert.Equal(t, "quota", recs[0].Outcome.Class)
	assert.Equal(t, 3, recs[0].Turns)
	assert.Equal(t, []time.Duration{time.Hour, time.Hour}, clock.slept, "each wait capped")
}

func TestOutageBackoffThenFallback(t *testing.T) {
	clock := &fakeClock{now: t0}
	var agents []string
	var mu sync.Mutex
	turn := func(_ context.Context, tr TurnRequest) (*harness.Result, error) {
		mu.Lock()
		agents = append(agents, tr.Agent)
		mu.Unlock()
		if tr.Agent == "claude" {
			return &harness.Result{}, outageErr()
		}
		return ok("c2")
	}
	recs, err := Run(context.Background(), []Job{{ID: "j", Agent: "claude", Prompt: "p", Fallback: []string{"codex"}}}, turn,
		Options{Now: clock.Now, Sleep: clock.Sleep, MaxRetries: 3, BaseBackoff: time.Second, MaxBackoff: 3 * time.Second,
			Jitter: func() float64 { return 1 }})
	require.NoError(t, err)
	require.Len(t, recs, 1)
	assert.True(t, recs[0].Outcome.OK)
	assert.Equal(t, "codex", recs[0].Agent)
	assert.Equal(t, []string{"claude", "codex"}, recs[0].Agents, "the fallback is recorded")
	assert.Equal(t, []string{"claude", "claude", "claude", "claude", "codex"}, agents)
	assert.Equal(t, []time.Duration{time.Second, 2 * time.Second, 3 * time.Second}, clock.slept, "capped exponential backoff")
	assert.Equal(t, 3, recs[0].Retries)
}

func TestQuotaFallsBackBeforeParking(t *testing.T) {
	clock := &fakeClock{now: t0}
	turn := func(_ context.Context, tr TurnRequest) (*harness.Result, error) {
		if tr.Agent == "claude" {
			return &harness.Result{Conversation: "cc"}, quotaErr(t0.Add(time.Hour))
		}
		assert.Empty(t, tr.Continue, "conversations never cross CLIs")
		return ok("x")
	}
	recs, err := Run(context.Background(), []Job{{ID: "j", Agent: "claude", Prompt: "p", Fallback: []string{"copilot"}}}, turn,
		Options{Now: clock.Now, Sleep: clock.Sleep})
	require.NoError(t, err)
	assert.Equal(t, "copilot", recs[0].Agent)
	assert.Empty(t, clock.slept)
}

func TestBackoffJitterBounds(t *testing.T) {
	for n := range 10 {
		d := Backoff(n, time.Second, time.Minute, 0.999)
		assert.LessOrEqual(t, d, time.Minute)
		assert.GreaterOrEqual(t, d, time.Duration(0))
	}
	assert.Equal(t, time.Duration(0), Backoff(3, time.Second, time.Minute, 0))
	assert.Equal(t, time.Minute, Backoff(1000, time.Second, time.Minute, 1))
}

func TestConcurrencyCapAndSkipDone(t *testing.T) {
	var running, peak atomic.Int32
	turn := func(context.Context, TurnRequest) (*harness.Result, error) {
		n := running.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		time.Sleep(5 * time.Millisecond)
		running.Add(-1)
		return ok("c")
	}
	var jobs []Job
	for i := range 20 {
		jobs = append(jobs, Job{ID: fmt.Sprintf("j%d", i), Agent: "a", Prompt: "p"})
	}
	var statuses atomic.Int32
	recs, err := Run(context.Background(), jobs, turn, Options{Concurrency: 3, Done: map[string]bool{"j0": true, "j1": true},
		OnStatus: func(Status) { statuses.Add(1) }})
	require.NoError(t, err)
	assert.Len(t, recs, 18, "finished jobs are not redone")
	assert.LessOrEqual(t, peak.Load(), int32(3))
	assert.Positive(t, statuses.Load())
}

func TestCancelStopsSchedulingAndWritesNoRecord(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var started atomic.Int32
	turn := func(ctx context.Context, _ TurnRequest) (*harness.Result, error) {
		if started.Add(1) == 2 {
			cancel()
		}
		<-ctx.Done()
		return &harness.Result{}, outposterr.Wrap(outposterr.Aborted, ctx.Err(), "cancelled")
	}
	var jobs []Job
	for i := range 10 {
		jobs = append(jobs, Job{ID: fmt.Sprintf("j%d", i), Agent: "a", Prompt: "p"})
	}
	recs, err := Run(ctx, jobs, turn, Options{Concurrency: 2})
	assert.ErrorIs(t, err, context.Canceled)
	assert.Empty(t, recs, "interrupted jobs get no record, so a resumed run redoes them")
	assert.LessOrEqual(t, started.Load(), int32(2), "no new turn after cancellation")
}

func TestInvalidJobs(t *testing.T) {
	turn := func(context.Context, TurnRequest) (*harness.Result, error) { return ok("") }
	for _, jobs := range [][]Job{{{Agent: "a", Prompt: "p"}}, {{ID: "x", Prompt: "p"}}, {{ID: "x", Agent: "a"}},
		{{ID: "x", Agent: "a", Prompt: "p"}, {ID: "x", Agent: "a", Prompt: "p"}}} {
		_, err := Run(context.Background(), jobs, turn, Options{})
		assert.Equal(t, outposterr.Configuration, outposterr.ClassOf(err))
	}
}

func TestRecordUsageCompleteWhenEveryTurnIs(t *testing.T) {
	clock := &fakeClock{now: t0}
	priced := usage.Usage{Input: 10, Output: 2, Complete: true, CostUSD: 0.5, CostKnown: true, CostSource: usage.CostSourceCLI}
	var n atomic.Int32
	turn := func(_ context.Context, tr TurnRequest) (*harness.Result, error) {
		switch tr.Job.ID {
		case "one":
			return &harness.Result{Usage: priced}, nil
		case "parked":
			if n.Add(1) == 1 {
				return &harness.Result{Conversation: "c", Usage: priced}, quotaErr(t0.Add(time.Minute))
			}
			return &harness.Result{Usage: priced}, nil
		default: // "mixed": the second turn's usage is incomplete and unpriced
			if tr.Continue == "" {
				return &harness.Result{Conversation: "m", Usage: priced}, quotaErr(t0.Add(time.Minute))
			}
			return &harness.Result{Usage: usage.Usage{Input: 1}}, nil
		}
	}
	recs, err := Run(context.Background(), []Job{{ID: "one", Agent: "a", Prompt: "p"}, {ID: "parked", Agent: "a", Prompt: "p"},
		{ID: "mixed", Agent: "a", Prompt: "p"}}, turn, Options{Now: clock.Now, Sleep: clock.Sleep, Concurrency: 1})
	require.NoError(t, err)
	byID := map[string]Record{}
	for _, r := range recs {
		byID[r.Job] = r
	}
	require.Len(t, byID, 3)
	assert.Equal(t, priced, byID["one"].Usage, "one complete turn: the job's usage is complete, its cost known")
	assert.Equal(t, 2, byID["parked"].Turns)
	assert.True(t, byID["parked"].Usage.Complete)
	assert.True(t, byID["parked"].Usage.CostKnown)
	assert.InDelta(t, 1.0, byID["parked"].Usage.CostUSD, 1e-9)
	assert.Equal(t, int64(20), byID["parked"].Usage.Input)
	assert.False(t, byID["mixed"].Usage.Complete, "one incomplete turn makes the job's usage incomplete")
	assert.False(t, byID["mixed"].Usage.CostKnown)
}

// TestConcurrencyOneRunsInFileOrder: with one slot, jobs start in the
// order of the file, every time.
func TestConcurrencyOneRunsInFileOrder(t *testing.T) {
	var jobs []Job
	var want []string
	for i := range 40 {
		id := fmt.Sprintf("job-%02d", i)
		jobs = append(jobs, Job{ID: id, Agent: "a", Prompt: "p"})
		want = append(want, id)
	}
	for range 5 {
		var mu sync.Mutex
		var got []string
		turn := func(_ context.Context, tr TurnRequest) (*harness.Result, error) {
			mu.Lock()
			got = append(got, tr.Job.ID)
			mu.Unlock()
			return ok("")
		}
		_, err := Run(context.Background(), jobs, turn, Options{Concurrency: 1})
		require.NoError(t, err)
		require.Equal(t, want, got)
	}
}

// TestDurationExcludesQueueTime: a job's duration is the time its turns
// (and its parks and backoffs) took, not the time it waited for a slot
// behind other jobs. (The wait for a slot between a job's turns is not
// counted either; with a virtual clock that other jobs advance instantly it
// cannot be pinned down deterministically, so only its bounds are checked.)
func TestDurationExcludesQueueTime(t *testing.T) {
	clock := &fakeClock{now: t0}
	var calls sync.Map
	turn := func(_ context.Context, tr TurnRequest) (*harness.Result, error) {
		n, _ := calls.LoadOrStore(tr.Job.ID, new(atomic.Int32))
		k := n.(*atomic.Int32).Add(1)
		_ = clock.Sleep(context.Background(), 10*time.Second) // the turn takes 10 s
		if tr.Job.ID == "retried" && k == 1 {
			return &harness.Result{}, outageErr()
		}
		return ok("")
	}
	jobs := []Job{{ID: "retried", Agent: "a", Prompt: "p"}, {ID: "other", Agent: "a", Prompt: "p"}, {ID: "last", Agent: "a", Prompt: "p"}}
	recs, err := Run(context.Background(), jobs, turn, Options{Concurrency: 1, Now: clock.Now, Sleep: clock.Sleep,
		Jitter: func() float64 { return 0 }})
	require.NoError(t, err)
	byID := map[string]Record{}
	for _, r := range recs {
		byID[r.Job] = r
	}
	assert.Equal(t, int64(10_000), byID["other"].DurationMS, "waiting for the slot is not counted")
	assert.Equal(t, int64(10_000), byID["last"].DurationMS)
	assert.Equal(t, 2, byID["retried"].Turns)
	assert.GreaterOrEqual(t, byID["retried"].DurationMS, int64(20_000), "two turns of 10 s")
	assert.LessOrEqual(t, byID["retried"].DurationMS, int64(40_000))
}

// TestTimeoutIsTheAgentsOutcome: a turn that timed out is not retried (it
// is what the agent did in the time it had), unless RetryTimeouts asks.
func TestTimeoutIsTheAgentsOutcome(t *testing.T) {
	for _, retry := range []bool{false, true} {
		clock := &fakeClock{now: t0}
		turns := 0
		turn := func(_ context.Context, tr TurnRequest) (*harness.Result, error) {
			turns++
			if turns == 1 {
				return &harness.Result{}, outposterr.New(outposterr.Timeout, "turn exceeded its deadline")
			}
			return ok("c")
		}
		recs, err := Run(context.Background(), []Job{{ID: "j", Agent: "claude", Prompt: "p"}}, turn,
			Options{Now: clock.Now, Sleep: clock.Sleep, RetryTimeouts: retry})
		require.NoError(t, err)
		require.Len(t, recs, 1)
		if retry {
			assert.True(t, recs[0].Outcome.OK)
			assert.Equal(t, 2, turns)
		} else {
			assert.Equal(t, "timeout", recs[0].Outcome.Class)
			assert.Equal(t, 1, turns, "no retry")
		}
	}
}

// TestJobTimeoutBoundsItsTurns: a job's timeout is shared by its turns:
// each gets what the earlier ones left, and once they have spent it the
// job fails as a timeout without another turn. Backoff does not count.
func TestJobTimeoutBoundsItsTurns(t *testing.T) {
	clock := &fakeClock{now: t0}
	var got []time.Duration
	turn := func(_ context.Context, tr TurnRequest) (*harness.Result, error) {
		got = append(got, tr.Timeout)
		clock.mu.Lock()
		clock.now = clock.now.Add(6 * time.Minute) // each turn runs 6 minutes
		clock.mu.Unlock()
		return &harness.Result{}, outageErr()
	}
	recs, err := Run(context.Background(), []Job{{ID: "j", Agent: "claude", Prompt: "p", Timeout: Duration(10 * time.Minute)}}, turn,
		Options{Now: clock.Now, Sleep: clock.Sleep, MaxRetries: 5, BaseBackoff: time.Minute, Jitter: func() float64 { return 1 }})
	require.NoError(t, err)
	require.Len(t, recs, 1)
	assert.Equal(t, []time.Duration{10 * time.Minute, 4 * time.Minute}, got)
	o := recs[0].Outcome
	assert.Equal(t, "timeout", o.Class, "%+v", o)
	assert.Contains(t, o.Error, "the job's timeout of 10m0s is spent")
	assert.Equal(t, 2, recs[0].Turns)
}

// TestJobIDsRefuseInvisibleCharacters: an id holding a bidirectional
// override, isolate or mark, or a zero-width character, prints as something
// it is not (in results, reports, the status line): a configuration error
// that names the character, with the id escaped.
func TestJobIDsRefuseInvisibleCharacters(t *testing.T) {
	for _, r := range []rune{'\u202a', '\u202b', '\u202c', '\u202d', '\u202e', '\u2066', '\u2067', '\u2068', '\u2069',
		'\u200e', '\u200f', '\u200b', '\u200d', '\u2060', '\ufeff', '\u2028'} {
		j := Job{ID: "task-" + string(r) + "1", Agent: "a", Prompt: "p"}
		err := j.Compile()
		require.Error(t, err, "U+%04X", r)
		assert.Equal(t, outposterr.Configuration, outposterr.ClassOf(err))
		assert.Contains(t, err.Error(), fmt.Sprintf("U+%04X", r))
		assert.NotContains(t, err.Error(), string(r), "the id is shown escaped")
		assert.Contains(t, err.Error(), "use visible text")
	}
	j := Job{ID: "tâche-ü-日本", Agent: "a", Prompt: "p"}
	assert.NoError(t, j.Compile(), "visible text of any script stays allowed")
}

// TestVanishedLeaseRetriedLikeAnOutage: a turn whose lease disappeared (a
// retryable sandbox failure) is retried after a backoff, as an outage is;
// a sandbox failure that is not retryable is the job's result at once.
func TestVanishedLeaseRetriedLikeAnOutage(t *testing.T) {
	clock := &fakeClock{now: t0}
	calls := 0
	turn := func(context.Context, TurnRequest) (*harness.Result, error) {
		calls++
		if calls == 1 {
			return &harness.Result{}, &outposterr.Error{Class: outposterr.Sandbox, Details: outposterr.Details{Retryable: true},
				Message: "fake: the sandbox disappeared during the turn: container 0123 was removed"}
		}
		return ok("c1")
	}
	opts := Options{Now: clock.Now, Sleep: clock.Sleep, MaxRetries: 3, BaseBackoff: time.Second, Jitter: func() float64 { return 1 }}
	recs, err := Run(context.Background(), []Job{{ID: "j", Agent: "claude", Prompt: "p"}}, turn, opts)
	require.NoError(t, err)
	require.Len(t, recs, 1)
	assert.True(t, recs[0].Outcome.OK)
	assert.Equal(t, 1, recs[0].Retries)
	assert.Equal(t, []time.Duration{time.Second}, clock.slept)

	calls = 0
	fatal := func(context.Context, TurnRequest) (*harness.Result, error) {
		calls++
		return &harness.Result{}, outposterr.New(outposterr.Sandbox, "fake: image not found")
	}
	recs, err = Run(context.Background(), []Job{{ID: "k", Agent: "claude", Prompt: "p"}}, fatal, opts)
	require.NoError(t, err)
	require.Len(t, recs, 1)
	assert.Equal(t, "sandbox", recs[0].Outcome.Class)
	assert.Equal(t, 1, calls, "not retried")
}

// TestLoadOnlyRunningJobs: a job's Load runs as it starts, so a long batch
// holds the large parts of its running jobs and one more, never all of
// them; a Load that fails fails its job as a configuration error.
func TestLoadOnlyRunningJobs(t *testing.T) {
	var mu sync.Mutex
	loaded, peak := 0, 0
	var jobs []Job
	for i := 0; i < 2000; i++ {
		id := "j" + strconv.Itoa(i)
		jobs = append(jobs, Job{ID: id, Agent: "a", Load: func() (string, json.RawMessage, error) {
			mu.Lock()
			defer mu.Unlock()
			loaded++
			peak = max(peak, loaded)
			if id == "j7" {
				return "", nil, errors.New("gone")
			}
			return "prompt " + id, json.RawMessage(`{"n":1}`), nil
		}})
	}
	turn := func(_ context.Context, tr TurnRequest) (*harness.Result, error) {
		assert.Equal(t, "prompt "+tr.Job.ID, tr.Prompt)
		mu.Lock()
		loaded--
		mu.Unlock()
		return ok("c")
	}
	var recs []Record
	var recMu sync.Mutex
	got, err := Run(context.Background(), jobs, turn, Options{Concurrency: 4, DiscardRecords: true,
		OnRecord: func(r Record) { recMu.Lock(); recs = append(recs, r); recMu.Unlock() }})
	require.NoError(t, err)
	assert.Empty(t, got, "records discarded")
	require.Len(t, recs, 2000)
	assert.LessOrEqual(t, peak, 4+2, "loaded: the running jobs, the one waiting for a slot, the failed one")
	for _, r := range recs {
		if r.Job == "j7" {
			assert.Equal(t, "configuration", r.Outcome.Class)
			assert.Contains(t, r.Outcome.Error, "gone")
		} else {
			assert.True(t, r.Outcome.OK, r.Job)
			assert.JSONEq(t, `{"n":1}`, string(r.Metadata))
		}
	}
}

// TestOptionsDefaults pins the documented zero values: counts and durations
// that are zero (or, where negative means nothing, negative) take their
// defaults; negative MaxParks and MaxRetries and set values stay.
func TestOptionsDefaults(t *testing.T) {
	var zero Options
	zero.defaults()
	assert.Equal(t, 4, zero.Concurrency)
	assert.Equal(t, 3, zero.MaxParks)
	assert.Equal(t, 6*time.Hour, zero.MaxPark)
	assert.Equal(t, 15*time.Minute, zero.DefaultPark)
	assert.Equal(t, DefaultContinuePrompt, zero.ContinuePrompt)
	assert.Equal(t, 3, zero.MaxRetries)
	assert.Equal(t, 2*time.Second, zero.BaseBackoff)
	assert.Equal(t, 2*time.Minute, zero.MaxBackoff)
	assert.NotNil(t, zero.Now)
	assert.NotNil(t, zero.Sleep)
	assert.NotNil(t, zero.Jitter)

	neg := Options{Concurrency: -1, MaxParks: -1, MaxPark: -time.Second, DefaultPark: -time.Second,
		MaxRetries: -1, BaseBackoff: -time.Second, MaxBackoff: -time.Second}
	neg.defaults()
	assert.Equal(t, 4, neg.Concurrency)
	assert.Equal(t, -1, neg.MaxParks, "negative: never park")
	assert.Equal(t, 6*time.Hour, neg.MaxPark)
	assert.Equal(t, 15*time.Minute, neg.DefaultPark)
	assert.Equal(t, -1, neg.MaxRetries, "negative: no retries")
	assert.Equal(t, 2*time.Second, neg.BaseBackoff)
	assert.Equal(t, 2*time.Minute, neg.MaxBackoff)

	set := Options{Concurrency: 7, MaxParks: 5, MaxPark: time.Hour, DefaultPark: time.Minute,
		ContinuePrompt: "go on", MaxRetries: 9, BaseBackoff: time.Millisecond, MaxBackoff: time.Second}
	want := set
	set.defaults()
	set.Now, set.Sleep, set.Jitter = nil, nil, nil
	assert.Equal(t, want, set)
}
