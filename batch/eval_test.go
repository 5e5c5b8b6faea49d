package batch

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/harness"
	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/source"
	"github.com/outpost-dev/outpost/usage"
)

func TestJobFormat(t *testing.T) {
	var j Job
	dec := json.NewDecoder(stringsReader(`{"id":"t1","agent":"claude","prompt":"fix it",
		"source":{"repo":"/tasks/r1","commit":"main"},"metadata":{"instance_id":"repo__1","n":[1,2]},
		"timeout":"30m","idle_timeout":90,"effort":"high","model":"m","env":["HF_TOKEN"],"image":"img:1",
		"cpus":1.5,"memory":"2g","pids":256,"attempts":3,"max_cost_usd":0.5,"max_turns":20}`))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&j))
	require.NoError(t, j.Compile())
	assert.Equal(t, 30*time.Minute, time.Duration(j.Timeout))
	assert.Equal(t, 90*time.Second, time.Duration(j.IdleTimeout))
	assert.Equal(t, Bytes(2<<30), j.Memory)
	assert.Equal(t, int64(256), j.Pids)
	assert.Equal(t, &source.Spec{Repo: "/tasks/r1", Commit: "main"}, j.Source)

	jobs, err := Expand([]Job{j, {ID: "single", Agent: "a", Prompt: "p", Attempts: 1}})
	require.NoError(t, err)
	require.Len(t, jobs, 4)
	for k, want := range []string{"t1#1", "t1#2", "t1#3", "single"} {
		assert.Equal(t, want, jobs[k].ID)
	}
	assert.Equal(t, 2, jobs[1].Trial)
	assert.Equal(t, "t1", jobs[1].Task)
	assert.Zero(t, jobs[3].Trial)
	again, err := Expand(jobs)
	require.NoError(t, err)
	assert.Equal(t, jobs, again, "expanding twice changes nothing")
	_, err = Expand([]Job{{ID: "x#1", Agent: "a", Prompt: "p"}, {ID: "x", Agent: "a", Prompt: "p", Attempts: 2}})
	assert.True(t, outposterr.Is(err, outposterr.Configuration), "colliding ids: %v", err)

	// An unknown field stays an error.
	dec = json.NewDecoder(stringsReader(`{"id":"t","agent":"a","prompt":"p","instance_id":"x"}`))
	dec.DisallowUnknownFields()
	assert.Error(t, dec.Decode(&j))

	// A null metadata is no metadata.
	n := Job{ID: "n", Agent: "a", Prompt: "p", Metadata: json.RawMessage(`null`)}
	require.NoError(t, n.Compile())
	assert.Nil(t, n.Metadata)
}

func TestJobFormatRefusals(t *testing.T) {
	base := func() Job { return Job{ID: "j", Agent: "a", Prompt: "p"} }
	for name, mut := range map[string]func(*Job){
		"metadata array":       func(j *Job) { j.Metadata = json.RawMessage(`[1]`) },
		"metadata string":      func(j *Job) { j.Metadata = json.RawMessage(`"x"`) },
		"source and workspace": func(j *Job) { j.Workspace = "/w"; j.Source = &source.Spec{Dir: "/d"} },
		"relative source":      func(j *Job) { j.Source = &source.Spec{Dir: "d"} },
		"option commit":        func(j *Job) { j.Source = &source.Spec{Repo: "/r", Commit: "--x"} },
		"negative attempts":    func(j *Job) { j.Attempts = -1 },
		"env value":            func(j *Job) { j.Env = []string{"A=b"} },
		"env PATH":             func(j *Job) { j.Env = []string{"PATH"} },
		"env LD_PRELOAD":       func(j *Job) { j.Env = []string{"LD_PRELOAD"} },
		"negative cpus":        func(j *Job) { j.CPUs = -1 },
		"negative memory":      func(j *Job) { j.Memory = -1 },
		"negative timeout":     func(j *Job) { j.Timeout = -1 },
		"negative cost cap":    func(j *Job) { j.MaxCostUSD = -1 },
	} {
		t.Run(name, func(t *testing.T) {
			j := base()
			mut(&j)
			err := j.Compile()
			require.Error(t, err)
			assert.True(t, outposterr.Is(err, outposterr.Configuration), "%v", err)
		})
	}
	for _, s := range []string{`"1x"`, `"-2g"`, `true`} {
		var b Bytes
		assert.Error(t, json.Unmarshal([]byte(s), &b), s)
	}
	for s, want := range map[string]int64{`"512m"`: 512 << 20, `"1.5GiB"`: 3 << 29, `"800MB"`: 800 << 20, `1024`: 1024, `"4k"`: 4096} {
		var b Bytes
		require.NoError(t, json.Unmarshal([]byte(s), &b), s)
		assert.Equal(t, Bytes(want), b, s)
	}
	var d Duration
	assert.Error(t, json.Unmarshal([]byte(`"soon"`), &d))
}

func TestMetadataAttemptAndPatchInRecords(t *testing.T) {
	meta := json.RawMessage(`{"instance_id":"r__1","k":{"x":[1,"two"]}}`)
	var saved []string
	turn := func(_ context.Context, tr TurnRequest) (*harness.Result, error) {
		return &harness.Result{Conversation: "c-" + tr.Job.ID, Patch: &harness.Patch{Base: "abcd", Diff: []byte("diff " + tr.Job.ID),
			Bytes: 6 + len(tr.Job.ID), Files: []string{"f"}}}, nil
	}
	var mu sync.Mutex
	recs, err := Run(context.Background(), []Job{{ID: "t", Agent: "a", Prompt: "p", Metadata: meta, Attempts: 2,
		Source: &source.Spec{Dir: "/d"}}}, turn, Options{
		Attempts: map[string]int{"t#2": 3},
		SavePatch: func(rec Record, diff []byte) (string, error) {
			mu.Lock()
			defer mu.Unlock()
			saved = append(saved, string(diff))
			return "/patches/" + rec.Job, nil
		}})
	require.NoError(t, err)
	require.Len(t, recs, 2)
	byID := map[string]Record{}
	for _, r := range recs {
		byID[r.Job] = r
		b, _ := json.Marshal(r)
		var back map[string]json.RawMessage
		require.NoError(t, json.Unmarshal(b, &back))
		assert.JSONEq(t, string(meta), string(back["metadata"]), "metadata round-trips")
		assert.Equal(t, "t", r.Task)
		assert.Equal(t, "/d", r.Source.Dir)
		require.NotNil(t, r.Patch)
		assert.Equal(t, "/patches/"+r.Job, r.Patch.Path)
		assert.Equal(t, []string{"f"}, r.Patch.Files)
		assert.Equal(t, "abcd", r.Patch.Base)
	}
	assert.Equal(t, 1, byID["t#1"].Attempt)
	assert.Equal(t, 4, byID["t#2"].Attempt, "attempt counts the job's result lines")
	assert.Equal(t, 2, byID["t#2"].Trial)
	assert.ElementsMatch(t, []string{"diff t#1", "diff t#2"}, saved)
}

// TestAccountPauseHoldsEveryJob: a quota with a reset on one agent and
// account pauses every job of it — queued ones and ones that would start
// — until the reset, while another account of the same agent runs on.
func TestAccountPauseHoldsEveryJob(t *testing.T) {
	const wait = 400 * time.Millisecond
	var (
		mu      sync.Mutex
		starts  = map[string][]time.Time{}
		quotaAt time.Time
		reset   time.Time
		running = map[string]int{}
		peak    = map[string]int{}
	)
	turn := func(_ context.Context, tr TurnRequest) (*harness.Result, error) {
		mu.Lock()
		now := time.Now()
		starts[tr.Agent] = append(starts[tr.Agent], now)
		running[tr.Agent]++
		peak[tr.Agent] = max(peak[tr.Agent], running[tr.Agent])
		first := tr.Job.ID == "a0" && reset.IsZero()
		if first {
			reset = now.Add(wait)
		}
		r := reset
		mu.Unlock()
		defer func() { mu.Lock(); running[tr.Agent]--; mu.Unlock() }()
		if first {
			time.Sleep(30 * time.Millisecond)
			return &harness.Result{Conversation: "c"}, quotaErr(r)
		}
		time.Sleep(60 * time.Millisecond)
		return ok("c")
	}
	var jobs []Job
	for i := range 6 {
		jobs = append(jobs, Job{ID: "a" + string(rune('0'+i)), Agent: "claude", Prompt: "p"})
	}
	for i := range 3 {
		jobs = append(jobs, Job{ID: "b" + string(rune('0'+i)), Agent: "other", Prompt: "p"})
	}
	var statuses []Status
	recs, err := Run(context.Background(), jobs, turn, Options{
		Concurrency: 4, AgentConcurrency: map[string]int{"claude": 3, "other": 1},
		Account: func(agent string) string { return "fp-" + agent },
		OnPause: func(agent string, until time.Time) {
			mu.Lock()
			defer mu.Unlock()
			if agent == "claude" && quotaAt.IsZero() {
				quotaAt = time.Now() // the batch has seen the quota
			}
		},
		OnStatus: func(s Status) { mu.Lock(); statuses = append(statuses, s); mu.Unlock() },
	})
	require.NoError(t, err)
	require.Len(t, recs, 9)
	for _, r := range recs {
		assert.True(t, r.Outcome.OK, "%s: %+v", r.Job, r.Outcome)
	}
	mu.Lock()
	defer mu.Unlock()
	require.False(t, quotaAt.IsZero(), "the pause was announced")
	for _, at := range starts["claude"] {
		if at.After(quotaAt) {
			assert.False(t, at.Before(reset), "a claude turn started at %v, after the quota (%v) and before its reset (%v)", at, quotaAt, reset)
		}
	}
	assert.LessOrEqual(t, peak["claude"], 3, "per-agent cap")
	assert.Equal(t, 1, peak["other"], "per-agent cap")
	var sawPause bool
	for _, s := range statuses {
		for _, p := range s.Paused {
			sawPause = sawPause || p.Agent == "claude"
			assert.NotEqual(t, "other", p.Agent, "another account is not paused")
		}
		if len(s.Paused) > 0 {
			assert.Contains(t, s.String(), "claude paused until")
		}
	}
	assert.True(t, sawPause, "the status shows the paused agent")
}

func TestPausedAgentFallsBack(t *testing.T) {
	var mu sync.Mutex
	var agents []string
	turn := func(_ context.Context, tr TurnRequest) (*harness.Result, error) {
		mu.Lock()
		agents = append(agents, tr.Job.ID+":"+tr.Agent)
		mu.Unlock()
		if tr.Agent == "a" && tr.Job.ID == "first" {
			return &harness.Result{}, quotaErr(time.Now().Add(time.Hour))
		}
		return ok("c")
	}
	// Concurrency 1: "first" hits the quota (and, with no parks, fails)
	// while "second" waits for the slot.
	_, err := Run(context.Background(), []Job{{ID: "first", Agent: "a", Prompt: "p"},
		{ID: "second", Agent: "a", Prompt: "p", Fallback: []string{"b"}}}, turn,
		Options{Concurrency: 1, MaxParks: -1})
	require.NoError(t, err)
	if agents[0] == "first:a" {
		assert.Equal(t, []string{"first:a", "second:b"}, agents, "a paused agent's job moves to its fallback")
	}
}

func costly(cost float64) (*harness.Result, error) {
	return &harness.Result{Conversation: "c", Usage: usage.Usage{Input: 1, Complete: true, CostUSD: cost, CostKnown: true}}, nil
}

func TestBatchCostCapStopsScheduling(t *testing.T) {
	var mu sync.Mutex
	var caps []float64
	turn := func(_ context.Context, tr TurnRequest) (*harness.Result, error) {
		mu.Lock()
		caps = append(caps, tr.MaxCostUSD)
		mu.Unlock()
		return costly(0.4)
	}
	var jobs []Job
	for _, id := range []string{"1", "2", "3", "4", "5"} {
		jobs = append(jobs, Job{ID: id, Agent: "a", Prompt: "p"})
	}
	var last Status
	recs, err := Run(context.Background(), jobs, turn, Options{Concurrency: 1, MaxCostUSD: 1.0,
		OnStatus: func(s Status) { mu.Lock(); last = s; mu.Unlock() }})
	require.Error(t, err)
	assert.True(t, outposterr.IsBudget(err), "%v", err)
	assert.Len(t, recs, 3, "no turn starts once the cap is spent")
	require.Len(t, caps, 3)
	assert.InDelta(t, 1.0, caps[0], 1e-9)
	assert.InDelta(t, 0.6, caps[1], 1e-9)
	assert.InDelta(t, 0.2, caps[2], 1e-9, "each turn runs with what is left")
	assert.True(t, last.Stopped)
	assert.Contains(t, last.String(), "cost cap spent")
}

func TestJobCostCap(t *testing.T) {
	clock := &fakeClock{now: t0}
	n := 0
	turn := func(_ context.Context, tr TurnRequest) (*harness.Result, error) {
		n++
		assert.InDelta(t, 0.5, tr.MaxCostUSD, 1e-9, "the job's cap reaches the turn")
		res, _ := costly(0.6)
		err := quotaErr(t0.Add(time.Minute))
		res.Err = err
		return res, err
	}
	recs, err := Run(context.Background(), []Job{{ID: "j", Agent: "a", Prompt: "p"}}, turn,
		Options{MaxJobCostUSD: 0.5, Now: clock.Now, Sleep: clock.Sleep})
	require.NoError(t, err)
	require.Len(t, recs, 1)
	assert.Equal(t, 1, n, "no further turn once the job's cap is spent")
	assert.Equal(t, "process", recs[0].Outcome.Class)
	assert.Equal(t, "cost", recs[0].Outcome.Budget)
	assert.Equal(t, 1, recs[0].Parks)

	// A job's own cap wins over the flag; max turns reach the turn.
	turn = func(_ context.Context, tr TurnRequest) (*harness.Result, error) {
		assert.InDelta(t, 2.0, tr.MaxCostUSD, 1e-9)
		assert.Equal(t, 7, tr.MaxTurns)
		return costly(0.1)
	}
	_, err = Run(context.Background(), []Job{{ID: "j", Agent: "a", Prompt: "p", MaxCostUSD: 2, MaxTurns: 7}}, turn,
		Options{MaxJobCostUSD: 0.5, MaxTurns: 3})
	require.NoError(t, err)
}

func TestParkCarriesThePatch(t *testing.T) {
	clock := &fakeClock{now: t0}
	var got []TurnRequest
	turn := func(_ context.Context, tr TurnRequest) (*harness.Result, error) {
		got = append(got, tr)
		if len(got) == 1 {
			err := quotaErr(t0.Add(time.Minute))
			return &harness.Result{Conversation: "c1", Patch: &harness.Patch{Diff: []byte("half"), Bytes: 4}, Err: err}, err
		}
		return ok("c1")
	}
	_, err := Run(context.Background(), []Job{{ID: "j", Agent: "a", Prompt: "p", Source: &source.Spec{Dir: "/d"}}}, turn,
		Options{Now: clock.Now, Sleep: clock.Sleep})
	require.NoError(t, err)
	require.Len(t, got, 2)
	assert.Nil(t, got[0].Patch)
	assert.Equal(t, "half", string(got[1].Patch), "the continued conversation finds its work")
	assert.Equal(t, "c1", got[1].Continue)
}

func stringsReader(s string) *strings.Reader { return strings.NewReader(s) }
