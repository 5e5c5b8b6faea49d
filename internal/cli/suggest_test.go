package cli

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestUnknownFlagSuggestsTheClosest(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"run", "--agnet", "claude", "hi"}, "unknown flag: --agnet (did you mean --agent?)"},
		{[]string{"run", "--agent", "claude", "--sandbx=host", "hi"}, "unknown flag: --sandbx (did you mean --sandbox?)"},
		{[]string{"batch", "--concurency", "3", "jobs.jsonl"}, "(did you mean --concurrency?)"},
		{[]string{"batch", "--concurr", "3", "jobs.jsonl"}, "(did you mean --concurrency?)"},
		{[]string{"run", "--agent", "claude", "--timeout", "5", "hi"}, `missing unit in duration "5" (durations take a unit: 90s, 30m, 1h30m)`},
	}
	for _, tc := range tests {
		t.Run(tc.args[1], func(t *testing.T) {
			r := execute(t, "", nil, tc.args...)
			assert.Equal(t, int(ExitConfiguration), r.code)
			assert.Contains(t, r.stderr, tc.want)
		})
	}
	// Nothing close: no guess, and a value given with the flag is never echoed.
	r := execute(t, "", nil, "run", "--agent", "claude", "--zzzzzzzz=s3cr3t-value", "hi")
	assert.Equal(t, int(ExitConfiguration), r.code)
	assert.Contains(t, r.stderr, "unknown flag: --zzzzzzzz")
	assert.NotContains(t, r.stderr, "did you mean")
	assert.NotContains(t, r.stderr+r.stdout, "s3cr3t-value")
}

func TestEditDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"agent", "agent", 0}, {"agnet", "agent", 2}, {"sandbx", "sandbox", 1},
		{"", "abc", 3}, {"kitten", "sitting", 3},
	} {
		assert.Equal(t, tc.want, editDistance(tc.a, tc.b), "%q %q", tc.a, tc.b)
		assert.Equal(t, tc.want, editDistance(tc.b, tc.a), "%q %q", tc.b, tc.a)
	}
}
