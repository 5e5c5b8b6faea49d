package cli

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A value given to --allow-env (NAME=value, as with docker -e) is refused
// like one given to --env, and never echoed: the error names the flag and
// the name only.
func TestAllowEnvValueNotEchoed(t *testing.T) {
	dir := t.TempDir()
	jobs := filepath.Join(dir, "jobs.jsonl")
	require.NoError(t, os.WriteFile(jobs, []byte(`{"id":"a","prompt":"hi"}`+"\n"), 0o600))
	r := execute(t, "", nil, "batch", "--agent", "fake", "--auth", "none", "--sandbox", "host", "--workspace", dir,
		"--allow-env", "DEPLOY_TOKEN=s3cr3t-allow-value", jobs)
	assert.Equal(t, int(ExitConfiguration), r.code, "%s", r.stderr)
	assert.Contains(t, r.stderr, "--allow-env")
	assert.NotContains(t, r.stderr+r.stdout, "s3cr3t-allow-value")
}
