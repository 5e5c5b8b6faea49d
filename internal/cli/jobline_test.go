package cli

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestCheckJobLine(t *testing.T) {
	for line, want := range map[string]string{
		`{"id":"a","agent":"claude","prompt":"p"}`:                          "",
		`{"id":"a","id":"b"}`:                                               `key "id" given twice`,
		`{"id":"a","source":{"dir":"x","dir":"y"}}`:                         `key "dir" given twice`,
		`{"id":"a","attempts":0}`:                                           `"attempts": 0 is not a value here`,
		`{"id":"a","timeout":"0s"}`:                                         `"timeout": "0s" is not a value here`,
		`{"id":"a","idle_timeout":0}`:                                       `"idle_timeout": 0 is not a value here`,
		`{"id":"a","attempts":2,"timeout":"30m","metadata":{"attempts":0}}`: "",
		`{"id":"a","env":["X","X"],"metadata":{"list":[{"k":1},{"k":2}]}}`:  "",
	} {
		err := checkJobLine([]byte(line))
		if want == "" {
			assert.NoError(t, err, line)
			continue
		}
		if assert.Error(t, err, line) {
			assert.Contains(t, err.Error(), want, line)
		}
	}
}

// TestMistakesAreConfiguration: values that used to pass silently, or be
// reported as Outpost's own failure, are usage errors (exit 2) that say
// what is wrong before anything runs.
func TestMistakesAreConfiguration(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"frobnicate"}, `unknown command "frobnicate"`},
		{[]string{"run", "--offline", "--agent", "claude", "--timeout", "1ns", "hi"}, "--timeout must be at least 100ms, not 1ns"},
		{[]string{"run", "--offline", "--agent", "claude", "--idle-timeout", "10ms", "hi"}, "--idle-timeout must be at least 100ms"},
		{[]string{"run", "--offline", "--agent", "claude", "--memory", "99999t", "hi"}, "--memory 99999t is more than any machine has"},
		{[]string{"run", "--offline", "--agent", "claude", "--cpus", "1e9", "hi"}, "--cpus 1e+09 is more than any machine has"},
		{[]string{"gc", "--grace", "-1h"}, "--grace must be 0 or more"},
		{[]string{"replay", "--agent", "claude", "--stdout", "/dev/null", "--exit-code", "99999999999"}, "--exit-code must be a process exit code, 0 to 255"},
	} {
		r := execute(t, "", nil, c.args...)
		assert.Equal(t, int(ExitConfiguration), r.code, "%v: %s", c.args, r.stderr)
		assert.Contains(t, r.stderr, c.want, c.args)
	}
}
