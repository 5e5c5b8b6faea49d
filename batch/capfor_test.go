package batch

import "testing"

func TestCapFor(t *testing.T) {
	cases := []struct {
		name        string
		job         Job
		opts        Options
		spent       float64 // the batch's
		tokens      int64   // the batch's
		jobSpent    float64
		jobTokens   int64
		cost        float64
		tok         int64
		spentReason string
	}{
		{name: "no caps"},
		{name: "job cap left", job: Job{MaxCostUSD: 2, MaxTokens: 100}, jobSpent: 0.5, jobTokens: 40, cost: 1.5, tok: 60},
		{name: "per-job default", opts: Options{MaxJobCostUSD: 3, MaxJobTokens: 10}, jobSpent: 1, jobTokens: 4, cost: 2, tok: 6},
		{name: "job's own cap wins", job: Job{MaxCostUSD: 1}, opts: Options{MaxJobCostUSD: 3}, cost: 1},
		{name: "job cost spent", job: Job{MaxCostUSD: 1}, jobSpent: 1, spentReason: "cost"},
		{name: "job tokens spent", job: Job{MaxTokens: 5}, jobTokens: 7, spentReason: "tokens"},
		{name: "batch cap tighter", job: Job{MaxCostUSD: 5, MaxTokens: 100}, opts: Options{MaxCostUSD: 10, MaxTokens: 1000},
			spent: 8, tokens: 950, cost: 2, tok: 50},
		{name: "job cap tighter", job: Job{MaxCostUSD: 1, MaxTokens: 10}, opts: Options{MaxCostUSD: 10, MaxTokens: 1000}, cost: 1, tok: 10},
		{name: "batch cap only", opts: Options{MaxCostUSD: 10, MaxTokens: 1000}, spent: 4, tokens: 100, cost: 6, tok: 900},
		{name: "batch cost spent", opts: Options{MaxCostUSD: 10}, spent: 10, spentReason: "cost"},
		{name: "batch tokens spent", opts: Options{MaxTokens: 10}, tokens: 11, spentReason: "tokens"},
		// The job's caps are checked before the batch's.
		{name: "job tokens before batch cost", job: Job{MaxTokens: 5}, opts: Options{MaxCostUSD: 1}, spent: 2, jobTokens: 5, spentReason: "tokens"},
	}
	for _, c := range cases {
		r := &runner{opts: c.opts, spent: c.spent, tokens: c.tokens}
		cost, tok, spent := r.capFor(c.job, c.jobSpent, c.jobTokens)
		if cost != c.cost || tok != c.tok || spent != c.spentReason {
			t.Errorf("%s: capFor = %v, %v, %q; want %v, %v, %q", c.name, cost, tok, spent, c.cost, c.tok, c.spentReason)
		}
	}
}
