package batch

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/harness"
	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/source"
)

// binom is C(n, k) by Pascal's rule, for checking the estimator.
func binom(n, k int) float64 {
	if k < 0 || k > n {
		return 0
	}
	row := []float64{1}
	for i := 1; i <= n; i++ {
		next := make([]float64, i+1)
		next[0], next[i] = 1, 1
		for j := 1; j < i; j++ {
			next[j] = row[j-1] + row[j]
		}
		row = next
	}
	return row[k]
}

func TestPassAtK(t *testing.T) {
	for n := 1; n <= 12; n++ {
		for c := 0; c <= n; c++ {
			for k := 1; k <= n; k++ {
				want := 1 - binom(n-c, k)/binom(n, k)
				assert.InDelta(t, want, PassAtK(n, c, k), 1e-12, "n=%d c=%d k=%d", n, c, k)
			}
		}
	}
	// Hand-computed: 3 attempts, 1 passing.
	assert.InDelta(t, 1.0/3, PassAtK(3, 1, 1), 1e-12)
	assert.InDelta(t, 2.0/3, PassAtK(3, 1, 2), 1e-12)
	assert.Equal(t, 1.0, PassAtK(3, 1, 3))
	assert.Equal(t, 0.0, PassAtK(3, 0, 3))
	assert.Equal(t, 0.0, PassAtK(2, 1, 3), "k over n")
	assert.Equal(t, 0.0, PassAtK(0, 0, 1))
	assert.False(t, math.IsNaN(PassAtK(10000, 5000, 100)))
}

func f(x float64) *float64 { return &x }

func TestScore(t *testing.T) {
	pass, fail, errV := harness.VerdictPass, harness.VerdictFail, harness.VerdictError
	s := Score([]Graded{
		{Task: "a", Verdict: pass, Reward: f(1)}, {Task: "a", Verdict: fail, Reward: f(0)}, {Task: "a", Verdict: fail, Reward: f(0)},
		{Task: "b", Verdict: pass, Reward: f(1)}, {Task: "b", Verdict: pass, Reward: f(0.5)}, {Task: "b", Verdict: errV},
		{Task: "c", Verdict: fail, Reward: f(0)}, {Task: "c", Verdict: fail, Reward: f(0)}, {Task: "c", Verdict: fail, Reward: f(0)},
		{Task: "d"},
	})
	assert.Equal(t, 10, s.Jobs)
	assert.Equal(t, 1, s.NotGraded)
	assert.Equal(t, 3, s.Passed)
	assert.Equal(t, 5, s.Failed)
	assert.Equal(t, 1, s.Errors, "an error is not a fail")
	require.Len(t, s.Tasks, 3, "a task without a verifier has no score")
	a, b, c := s.Tasks[0], s.Tasks[1], s.Tasks[2]
	assert.Equal(t, []int{3, 1, 0}, []int{a.N, a.C, a.Errors})
	assert.InDelta(t, 1.0/3, a.PassAt1, 1e-12)
	assert.Equal(t, 1.0, a.PassAtN)
	assert.InDelta(t, 1.0/3, *a.MeanReward, 1e-12)
	assert.InDelta(t, 1.0/3, *a.RewardSE, 1e-12, "sd 0.577 over √3")
	assert.Equal(t, 2, b.N, "the error is left out of n")
	assert.Equal(t, 1, b.Errors)
	assert.Equal(t, 1.0, b.PassAt1)
	assert.InDelta(t, 0.75, *b.MeanReward, 1e-12)
	assert.Equal(t, 0.0, c.PassAtN)
	assert.InDelta(t, (1.0/3+1+0)/3, s.PassAt1, 1e-12)
	assert.Equal(t, 2, s.K, "the fewest graded attempts of a task")
	assert.InDelta(t, (PassAtK(3, 1, 2)+1+0)/3, s.PassAtK, 1e-12)
	assert.InDelta(t, 2.5/8, *s.MeanReward, 1e-12)
	require.NotNil(t, s.RewardSE)

	none := Score([]Graded{{Task: "x"}})
	assert.Equal(t, 1, none.NotGraded)
	assert.Nil(t, none.MeanReward)
	assert.Zero(t, none.K)
}

func TestVerifyJobNeedsAGitSource(t *testing.T) {
	v := &VerifySpec{Command: "true"}
	for name, j := range map[string]Job{
		"no source":  {ID: "j", Agent: "a", Prompt: "p", Verify: v},
		"dir source": {ID: "j", Agent: "a", Prompt: "p", Verify: v, Source: &source.Spec{Dir: "/d"}},
		"no command": {ID: "j", Agent: "a", Prompt: "p", Verify: &VerifySpec{}, Source: &source.Spec{Repo: "/r", Commit: "main"}},
		"relative files": {ID: "j", Agent: "a", Prompt: "p", Verify: &VerifySpec{Command: "true", Files: "t"},
			Source: &source.Spec{Repo: "/r", Commit: "main"}},
	} {
		t.Run(name, func(t *testing.T) {
			err := j.Compile()
			assert.True(t, outposterr.Is(err, outposterr.Configuration), "%v", err)
		})
	}
	ok := Job{ID: "j", Agent: "a", Prompt: "p", Verify: v, Source: &source.Spec{Repo: "/r", Commit: "main"}}
	assert.NoError(t, ok.Compile())
}

// TestVerifyTestListsChecked: test lists, their parser and a test patch
// are checked when the job is, naming the job and the field.
func TestVerifyTestListsChecked(t *testing.T) {
	const diff = "diff --git a/t.py b/t.py\n--- a/t.py\n+++ b/t.py\n@@ -1 +1 @@\n-a\n+b\n"
	for want, v := range map[string]VerifySpec{
		`fail_to_pass and pass_to_pass need a parser`:  {FailToPass: []string{"t.py::a"}},
		`parser "junit" is not known`:                  {Parser: "junit", FailToPass: []string{"t.py::a"}},
		`a parser grades the tests of fail_to_pass`:    {Parser: "pytest"},
		`pass_to_pass: test "t.py::a" is listed twice`: {Parser: "pytest", FailToPass: []string{"t.py::a"}, PassToPass: []string{"t.py::a"}},
		`fail_to_pass: an empty test name`:             {Parser: "go-test-json", FailToPass: []string{""}},
		`test_patch: the patch names no file`:          {TestPatch: "fix things\n"},
		`test_patch: path "../x" leaves the tree`:      {TestPatch: "--- a/../x\n+++ b/../x\n"},
		`test_patch is over 8 MiB or holds a NUL byte`: {TestPatch: diff + strings.Repeat("+", MaxTestPatch)},
	} {
		v.Command = "pytest -rA"
		j := Job{ID: "swe-1", Agent: "a", Prompt: "p", Verify: &v, Source: &source.Spec{Repo: "/r", Commit: "main"}}
		err := j.Compile()
		require.Error(t, err, want)
		assert.True(t, outposterr.Is(err, outposterr.Configuration), "%v", err)
		assert.Contains(t, err.Error(), "job swe-1: verify: "+want)
	}
	j := Job{ID: "swe-1", Agent: "a", Prompt: "p", Source: &source.Spec{Repo: "/r", Commit: "main"},
		Verify: &VerifySpec{Command: "go test -json ./...", Parser: "go-test-json", FailToPass: []string{"TestA"},
			PassToPass: []string{"example.com/m.TestB/sub"}, TestPatch: diff}}
	assert.NoError(t, j.Compile())
}

// TestVerifyGradesEveryFinishedAttempt: the verifier gets each attempt's
// patch — a failed turn's too, nil when there is none — and its verdict,
// reward and run are in the record; jobs without a verifier are not graded.
func TestVerifyGradesEveryFinishedAttempt(t *testing.T) {
	src := &source.Spec{Repo: "/r", Commit: "main"}
	jobs := []Job{
		{ID: "fixed", Agent: "a", Prompt: "fix", Source: src, Verify: &VerifySpec{Command: "t"}},
		{ID: "broken", Agent: "a", Prompt: "break", Source: src, Verify: &VerifySpec{Command: "t"}},
		{ID: "nothing", Agent: "a", Prompt: "none", Source: src, Verify: &VerifySpec{Command: "t"}},
		{ID: "huge", Agent: "a", Prompt: "huge", Source: src, Verify: &VerifySpec{Command: "t"}},
		{ID: "ungraded", Agent: "a", Prompt: "fix", Source: src},
	}
	var mu sync.Mutex
	seen := map[string][]byte{}
	recs, err := Run(context.Background(), jobs, func(_ context.Context, t TurnRequest) (*harness.Result, error) {
		res := &harness.Result{Agent: t.Agent}
		switch t.Prompt {
		case "fix":
			res.Patch = &harness.Patch{Base: "abcd", Diff: []byte("good"), Bytes: 4, Files: []string{"x"}}
		case "break":
			res.Patch = &harness.Patch{Base: "abcd", Diff: []byte("bad"), Bytes: 3, Files: []string{"x"}}
			err := outposterr.New(outposterr.Process, "the agent failed")
			res.Err = err
			return res, err
		case "huge":
			res.Patch = &harness.Patch{Base: "abcd", Bytes: 1 << 30, Files: []string{"x"}, Omitted: true}
		}
		return res, nil
	}, Options{MaxRetries: -1, Verify: func(_ context.Context, j Job, patch []byte) *harness.Verification {
		mu.Lock()
		seen[j.ID] = patch
		mu.Unlock()
		if string(patch) == "good" {
			return &harness.Verification{Verdict: harness.VerdictPass, Reward: f(1)}
		}
		return &harness.Verification{Verdict: harness.VerdictFail, Reward: f(0), Error: "tests failed"}
	}})
	require.NoError(t, err)
	by := map[string]Record{}
	for _, r := range recs {
		by[r.Job] = r
	}
	assert.Equal(t, harness.VerdictPass, by["fixed"].Verdict)
	assert.Equal(t, 1.0, *by["fixed"].Reward)
	assert.Equal(t, harness.VerdictFail, by["broken"].Verdict, "a failed turn with a patch is graded")
	assert.False(t, by["broken"].Outcome.OK)
	assert.Equal(t, []byte("bad"), seen["broken"])
	assert.Equal(t, harness.VerdictFail, by["nothing"].Verdict)
	assert.Nil(t, seen["nothing"], "no patch: the untouched source")
	assert.Contains(t, seen, "nothing")
	assert.Equal(t, harness.VerdictError, by["huge"].Verdict, "a patch not kept cannot be graded")
	assert.NotContains(t, seen, "huge")
	assert.Contains(t, by["huge"].Verify.Error, "over the bound")
	assert.Empty(t, by["ungraded"].Verdict)
	assert.Nil(t, by["ungraded"].Verify)
	assert.NotContains(t, seen, "ungraded")
}

// TestVerifyCancelledGivesNoRecord: a run cancelled while a job is being
// graded writes no record for it (a resumed run grades it again).
func TestVerifyCancelledGivesNoRecord(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	src := &source.Spec{Repo: "/r", Commit: "main"}
	recs, err := Run(ctx, []Job{{ID: "j", Agent: "a", Prompt: "p", Source: src, Verify: &VerifySpec{Command: "t"}}},
		func(context.Context, TurnRequest) (*harness.Result, error) { return &harness.Result{Agent: "a"}, nil },
		Options{Verify: func(ctx context.Context, _ Job, _ []byte) *harness.Verification {
			cancel()
			<-ctx.Done()
			return &harness.Verification{Verdict: harness.VerdictError, Error: "interrupted"}
		}})
	assert.True(t, errors.Is(err, context.Canceled), "%v", err)
	assert.Empty(t, recs)
}

// TestScoresJSON pins the scores' JSON form: field names and order, and
// what is left out when empty.
func TestScoresJSON(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	pass, fail := harness.VerdictPass, harness.VerdictFail
	s := Score([]Graded{
		{Task: "a", Verdict: pass, Reward: f(1)}, {Task: "a", Verdict: fail, Reward: f(0)},
		{Task: "b", Verdict: pass, Reward: f(0.5)}, {Task: "b", Verdict: pass},
		{Task: "c", Verdict: fail}, {Task: "c", Verdict: fail},
	})
	b, err := json.Marshal(s)
	require.NoError(t, err)
	assert.Equal(t, `{"jobs":6,"not_graded":0,"passed":3,"failed":3,"errors":0,"pass_at_1":0.5,"k":2,"pass_at_k":0.6666666666666666,`+
		`"mean_reward":0.5,"reward_se":0.2886751345948129,"tasks":[`+
		`{"task":"a","n":2,"c":1,"pass_at_1":0.5,"pass_at_n":1,"mean_reward":0.5,"reward_se":0.5},`+
		`{"task":"b","n":2,"c":2,"pass_at_1":1,"pass_at_n":1,"mean_reward":0.5},`+
		`{"task":"c","n":2,"c":0,"pass_at_1":0,"pass_at_n":0}]}`, string(b))
}

func TestRewardStatsString(t *testing.T) {
	assert.Equal(t, "—", RewardStats{}.String())
	assert.Equal(t, "1.000", rewardStats([]float64{1}).String())
	assert.Equal(t, "0.500 ± 0.500", rewardStats([]float64{1, 0}).String())
}
