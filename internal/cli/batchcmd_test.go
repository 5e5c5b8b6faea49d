package cli

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/outposterr"
)

func TestParseConcurrency(t *testing.T) {
	for in, want := range map[string]struct {
		total int
		per   map[string]int
	}{
		"4":                     {4, map[string]int{}},
		"claude=4,codex=2":      {6, map[string]int{"claude": 4, "codex": 2}},
		"8, claude=4 ,codex=2 ": {8, map[string]int{"claude": 4, "codex": 2}},
	} {
		total, per, err := parseConcurrency(in)
		require.NoError(t, err, in)
		assert.Equal(t, want.total, total, in)
		assert.Equal(t, want.per, per, in)
	}
	for _, in := range []string{"", "0", "-1", "claude=0", "4,5", "claude=x", "x"} {
		_, _, err := parseConcurrency(in)
		assert.Error(t, err, in)
	}
}

func TestParsePool(t *testing.T) {
	for in, want := range map[string]int{"off": 0, "on": 6, "3": 3, "0": 0} {
		n, err := parsePool(in, 6)
		require.NoError(t, err, in)
		assert.Equal(t, want, n, in)
	}
	for _, in := range []string{"-1", "yes", "2x"} {
		_, err := parsePool(in, 6)
		assert.ErrorContains(t, err, "--pool", in)
	}
}

func TestFileSafe(t *testing.T) {
	assert.Equal(t, "r1%231", fileSafe("r1#1"))
	assert.Equal(t, "%2E.%2Fetc", fileSafe("../etc"), "no separator, no leading dot")
	assert.Equal(t, "a.b_c-d", fileSafe("a.b_c-d"))
	assert.NotEqual(t, fileSafe("a#1"), fileSafe("a_1"), "escaping keeps ids apart")
}

func TestRetryClasses(t *testing.T) {
	all, err := parseRetryClasses("all")
	require.NoError(t, err)
	assert.Nil(t, all)
	some, err := parseRetryClasses("quota,process")
	require.NoError(t, err)
	assert.True(t, some[outposterr.Quota])
	assert.False(t, some[outposterr.Timeout])
	_, err = parseRetryClasses("quota,budget")
	assert.Error(t, err)
}

func TestExitCodeBudget(t *testing.T) {
	err := outposterr.New(outposterr.Process, "stopped").With(outposterr.Details{Budget: "cost"})
	assert.Equal(t, ExitBudget, ExitCodeOf(err))
	assert.Equal(t, ExitProcess, ExitCodeOf(outposterr.New(outposterr.Process, "x")))
}
