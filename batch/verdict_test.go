package batch

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/harness"
	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/source"
)

// TestExpandRefusesAnIDUsedByAJobAndATask: a job "x" and a job "x" with
// attempts are two jobs with one id; their attempts "x#1", "x#2" and the
// job "x" would be scored as one task "x" of three attempts.
func TestExpandRefusesAnIDUsedByAJobAndATask(t *testing.T) {
	single := Job{ID: "x", Agent: "a", Prompt: "p"}
	multi := Job{ID: "x", Agent: "a", Prompt: "q", Attempts: 2}
	for name, jobs := range map[string][]Job{
		"job first":  {single, multi},
		"task first": {multi, single},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Expand(jobs)
			require.Error(t, err, "the id x names two jobs")
			assert.True(t, outposterr.Is(err, outposterr.Configuration), "%v", err)
		})
	}
	// Expanded jobs expand to themselves, and distinct ids still pass.
	jobs, err := Expand([]Job{multi, {ID: "y", Agent: "a", Prompt: "p"}})
	require.NoError(t, err)
	again, err := Expand(jobs)
	require.NoError(t, err)
	assert.Equal(t, jobs, again)
}

// TestJobThatNeverRanIsNotGraded: a job whose Load failed never ran a
// turn: it has no attempt to grade, and a verdict (graded on the untouched
// source) would count a configuration error as the agent's fail in pass@k.
func TestJobThatNeverRanIsNotGraded(t *testing.T) {
	src := &source.Spec{Repo: "/r", Commit: "main"}
	var mu sync.Mutex
	graded := map[string]bool{}
	recs, err := Run(context.Background(), []Job{
		{ID: "lost", Agent: "a", Source: src, Verify: &VerifySpec{Command: "t"},
			Load: func() (string, json.RawMessage, error) { return "", nil, errors.New("the jobs file changed") }},
		{ID: "ran", Agent: "a", Prompt: "p", Source: src, Verify: &VerifySpec{Command: "t"}},
	}, func(context.Context, TurnRequest) (*harness.Result, error) { return &harness.Result{Agent: "a"}, nil },
		Options{Verify: func(_ context.Context, j Job, _ []byte) *harness.Verification {
			mu.Lock()
			graded[j.ID] = true
			mu.Unlock()
			return &harness.Verification{Verdict: harness.VerdictFail, Reward: f(0)}
		}})
	require.NoError(t, err)
	by := map[string]Record{}
	for _, r := range recs {
		by[r.Job] = r
	}
	require.Len(t, by, 2)
	assert.Equal(t, "configuration", by["lost"].Outcome.Class)
	assert.Empty(t, by["lost"].Verdict, "a job that never ran is not graded")
	assert.False(t, graded["lost"], "no verifier runs for a job that never ran")
	assert.Equal(t, harness.VerdictFail, by["ran"].Verdict)
}

// TestParkedWorkSurvivesAFailedResume: a job parked on a quota keeps the
// work its first turn did (it is re-applied for the resumed turn); when
// the resumed turn fails before any patch is collected (no lease, a lease
// that vanished), that work is still the job's patch: it is recorded and
// graded, not replaced by the untouched source.
func TestParkedWorkSurvivesAFailedResume(t *testing.T) {
	clock := &fakeClock{now: t0}
	src := &source.Spec{Repo: "/r", Commit: "main"}
	calls := 0
	turn := func(_ context.Context, tr TurnRequest) (*harness.Result, error) {
		calls++
		if calls == 1 {
			err := quotaErr(t0.Add(time.Minute))
			return &harness.Result{Conversation: "c1", Err: err,
				Patch: &harness.Patch{Base: "abcd", Diff: []byte("half"), Bytes: 4, Files: []string{"x"}}}, err
		}
		// The resumed turn gets no lease: the runner returns a bare result.
		err := outposterr.New(outposterr.Sandbox, "fake: the engine refused the lease")
		return &harness.Result{Agent: tr.Agent, Err: err}, err
	}
	var graded []byte
	gradedCalled := false
	var saved string
	recs, err := Run(context.Background(), []Job{{ID: "j", Agent: "a", Prompt: "p", Source: src,
		Verify: &VerifySpec{Command: "t"}}}, turn, Options{Now: clock.Now, Sleep: clock.Sleep,
		SavePatch: func(_ Record, diff []byte) (string, error) { saved = string(diff); return "/p/j", nil },
		Verify: func(_ context.Context, _ Job, patch []byte) *harness.Verification {
			gradedCalled, graded = true, patch
			return &harness.Verification{Verdict: harness.VerdictPass, Reward: f(1)}
		}})
	require.NoError(t, err)
	require.Equal(t, 2, calls)
	require.Len(t, recs, 1)
	require.True(t, gradedCalled)
	assert.Equal(t, "half", string(graded), "the verifier grades the work the job did")
	require.NotNil(t, recs[0].Patch, "the record keeps the job's patch")
	assert.Equal(t, []string{"x"}, recs[0].Patch.Files)
	assert.Equal(t, "half", saved)
	assert.Equal(t, "sandbox", recs[0].Outcome.Class, "the outcome is still the last turn's")
}

// TestJobEnvValueNotEchoed: a jobs file that gives an env value where a
// name belongs gets an error that names the variable, never the value
// (it may be a secret).
func TestJobEnvValueNotEchoed(t *testing.T) {
	j := Job{ID: "x", Agent: "a", Prompt: "p", Env: []string{"DEPLOY_TOKEN=MARK-secret-value"}}
	err := j.Compile()
	require.Error(t, err)
	assert.True(t, outposterr.Is(err, outposterr.Configuration), "%v", err)
	assert.Contains(t, err.Error(), "DEPLOY_TOKEN=…")
	assert.NotContains(t, err.Error(), "MARK-secret-value")
}
