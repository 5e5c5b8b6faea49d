package cli

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestEmptyInputs: a jobs file or a predictions file with no line to run
// (blank lines, a jobs file's comments) is a configuration error naming it,
// read from a file or from standard input, before anything runs.
func TestEmptyInputs(t *testing.T) {
	dir := t.TempDir()
	jobs := filepath.Join(dir, "jobs.jsonl")
	require.NoError(t, os.WriteFile(jobs, []byte("\n# nothing yet\n   \n"), 0o600))
	preds := filepath.Join(dir, "preds.jsonl")
	require.NoError(t, os.WriteFile(preds, []byte("\n\n"), 0o600))
	tests := []struct {
		name, stdin string
		args        []string
		want        string
	}{
		{"jobs file", "", []string{"batch", jobs, "--sandbox", "host"}, jobs + " holds no jobs"},
		{"jobs on stdin", "# only a comment\n", []string{"batch", "-", "--results", filepath.Join(dir, "r.jsonl"), "--sandbox", "host"},
			"standard input holds no jobs"},
		{"predictions file", "", []string{"grade", preds, "--tasks", jobs, "--sandbox", "host"}, preds + " holds no predictions"},
		{"predictions on stdin", "\n", []string{"grade", "-", "--tasks", jobs, "--out", filepath.Join(dir, "g"), "--sandbox", "host"},
			"standard input holds no predictions"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := execute(t, tc.stdin, nil, tc.args...)
			assert.Equal(t, int(ExitConfiguration), r.code, r.stderr)
			assert.Contains(t, r.stderr, tc.want)
		})
	}
	_, err := os.Stat(filepath.Join(dir, "g"))
	assert.ErrorIs(t, err, os.ErrNotExist, "nothing ran")
}
