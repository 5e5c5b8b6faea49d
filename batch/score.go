package batch

import (
	"fmt"
	"math"
	"sort"

	"github.com/outpost-dev/outpost/harness"
)

// PassAtK is the unbiased estimator of pass@k for a task of n graded
// attempts of which c passed: 1 − C(n−c, k) / C(n, k), the chance that at
// least one of k attempts drawn without replacement passes. It is 0 when
// k < 1 or k > n.
func PassAtK(n, c, k int) float64 {
	if k < 1 || k > n || n <= 0 {
		return 0
	}
	if c <= 0 {
		return 0
	}
	if n-c < k {
		return 1
	}
	// C(n−c, k)/C(n, k) = Π_{i=n−c+1}^{n} (1 − k/i), stable for large n.
	q := 1.0
	for i := n - c + 1; i <= n; i++ {
		q *= 1 - float64(k)/float64(i)
	}
	return 1 - q
}

// Graded is one finished job's grade, as [Score] reads it.
type Graded struct {
	// Task is the task the job is an attempt of (Record.Task, or its id
	// for a job without attempts).
	Task string
	// Verdict is empty for a job without a verifier (not graded).
	Verdict harness.Verdict
	Reward  *float64
}

// Scores summarize the grades of a batch's jobs.
type Scores struct {
	// Jobs counts the jobs scored; NotGraded those without a verdict.
	Jobs      int `json:"jobs"`
	NotGraded int `json:"not_graded"`
	// Passed, Failed and Errors count verdicts; an error is neither a
	// pass nor a fail and counts in no pass@k.
	Passed int `json:"passed"`
	Failed int `json:"failed"`
	Errors int `json:"errors"`
	// PassAt1 is the mean of the tasks' pass@1; PassAtK the mean of their
	// pass@K, for K the fewest attempts graded pass or fail of any task
	// with one, when K > 1.
	PassAt1 float64 `json:"pass_at_1"`
	K       int     `json:"k,omitempty"`
	PassAtK float64 `json:"pass_at_k,omitempty"`
	// RewardStats are over every reward.
	RewardStats
	// Tasks are the graded tasks, by id.
	Tasks []TaskScore `json:"tasks,omitempty"`
}

// TaskScore is one task's score over its attempts.
type TaskScore struct {
	Task string `json:"task"`
	// N counts attempts graded pass or fail, C those that passed; Errors
	// the attempts whose verifier could not run.
	N      int `json:"n"`
	C      int `json:"c"`
	Errors int `json:"errors,omitempty"`
	// PassAt1 and PassAtN are pass@1 and pass@n of the task.
	PassAt1 float64 `json:"pass_at_1"`
	PassAtN float64 `json:"pass_at_n"`
	// RewardStats are over the task's rewards.
	RewardStats
}

// RewardStats are the mean of a set of rewards and its standard error.
type RewardStats struct {
	// MeanReward is nil when there is no reward, RewardSE when there are
	// fewer than two.
	MeanReward *float64 `json:"mean_reward,omitempty"`
	RewardSE   *float64 `json:"reward_se,omitempty"`
}

// String is "0.583 ± 0.201", "1.000" (one reward), or "—" (none).
func (r RewardStats) String() string {
	switch {
	case r.MeanReward == nil:
		return "—"
	case r.RewardSE == nil:
		return fmt.Sprintf("%.3f", *r.MeanReward)
	}
	return fmt.Sprintf("%.3f ± %.3f", *r.MeanReward, *r.RewardSE)
}

// Score summarizes grades: counts, per-task pass@1 and pass@n, the
// batch's mean pass@1 and pass@K, and mean rewards with their standard
// errors. Tasks without a graded attempt count in no pass@k.
func Score(grades []Graded) Scores {
	var s Scores
	type acc struct {
		n, c, errs int
		rewards    []float64
	}
	tasks := map[string]*acc{}
	var all []float64
	for _, g := range grades {
		s.Jobs++
		if g.Verdict == "" {
			s.NotGraded++
			continue
		}
		a := tasks[g.Task]
		if a == nil {
			a = &acc{}
			tasks[g.Task] = a
		}
		switch g.Verdict {
		case harness.VerdictPass:
			s.Passed++
			a.n++
			a.c++
		case harness.VerdictFail:
			s.Failed++
			a.n++
		default:
			s.Errors++
			a.errs++
			continue
		}
		if g.Reward != nil {
			a.rewards = append(a.rewards, *g.Reward)
			all = append(all, *g.Reward)
		}
	}
	s.RewardStats = rewardStats(all)
	names := make([]string, 0, len(tasks))
	for name := range tasks {
		names = append(names, name)
	}
	sort.Strings(names)
	k := 0
	scored := 0
	for _, name := range names {
		a := tasks[name]
		ts := TaskScore{Task: name, N: a.n, C: a.c, Errors: a.errs,
			PassAt1: PassAtK(a.n, a.c, 1), PassAtN: PassAtK(a.n, a.c, a.n), RewardStats: rewardStats(a.rewards)}
		s.Tasks = append(s.Tasks, ts)
		if a.n == 0 {
			continue
		}
		if scored == 0 || a.n < k {
			k = a.n
		}
		scored++
		s.PassAt1 += ts.PassAt1
	}
	if scored > 0 {
		s.PassAt1 /= float64(scored)
	}
	if k > 1 {
		s.K = k
		for _, name := range names {
			if a := tasks[name]; a.n > 0 {
				s.PassAtK += PassAtK(a.n, a.c, k)
			}
		}
		s.PassAtK /= float64(scored)
	}
	return s
}

// rewardStats returns the mean of xs and its standard error (the sample
// standard deviation over √n); nil when xs is empty, the error nil below
// two values.
func rewardStats(xs []float64) RewardStats {
	if len(xs) == 0 {
		return RewardStats{}
	}
	var sum float64
	for _, x := range xs {
		sum += x
	}
	mean := sum / float64(len(xs))
	if len(xs) < 2 {
		return RewardStats{MeanReward: &mean}
	}
	var ss float64
	for _, x := range xs {
		ss += (x - mean) * (x - mean)
	}
	se := math.Sqrt(ss/float64(len(xs)-1)) / math.Sqrt(float64(len(xs)))
	return RewardStats{MeanReward: &mean, RewardSE: &se}
}
