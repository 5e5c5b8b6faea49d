package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/internal/testenv"
)

// TestRunLiveRealClaude: `outpost run --agent claude --live` delivers each
// line of standard input into the running Claude Code turn (stream-json
// input), on the host and in the default Docker sandbox.
func TestRunLiveRealClaude(t *testing.T) {
	testenv.Short(t)
	bin := testenv.CLI(t, "claude")
	path := filepath.Dir(bin) + ":/usr/local/bin:/usr/bin:/bin"
	args := func(sandbox, ws string) []string {
		return []string{"run", "--agent", "claude", "--sandbox", sandbox, "--offline", "--no-store",
			"--scenario", "slow", "--workspace", ws, "--live", "--json", "first MARK-live1"}
	}
	check := func(t *testing.T, code int, stdout, stderr string) {
		t.Helper()
		require.Equal(t, 0, code, stdout+stderr)
		assert.Contains(t, stdout, `"kind":"input","text":"also MARK-live2"`)
		assert.Contains(t, stdout, `"text":"outpost ok: MARK-live2. remembered: MARK-live1"`,
			"the message reached the running turn's conversation and the answer is its")
		assert.NotContains(t, stdout+stderr, "not delivered")
	}
	t.Run("host", func(t *testing.T) {
		r := execute(t, "also MARK-live2\n", map[string]string{"PATH": path}, args("host", t.TempDir())...)
		check(t, r.code, r.stdout, r.stderr)
	})
	t.Run("docker", func(t *testing.T) {
		requireDocker(t)
		ws := t.TempDir()
		require.NoError(t, os.Chmod(ws, 0o777))
		var out, errOut bytes.Buffer
		f := testFactory(strings.NewReader("also MARK-live2\n"), &out, &errOut, func(k string) string { return map[string]string{"PATH": path}[k] }, time.Now)
		code := Execute(context.Background(), f, args("docker", ws))
		check(t, code, out.String(), errOut.String())
	})
}

// TestRunLiveRealCopilot: `outpost run --agent copilot --live` delivers a
// line of standard input into the running Copilot turn (ACP).
func TestRunLiveRealCopilot(t *testing.T) {
	testenv.Short(t)
	bin := testenv.CLI(t, "copilot")
	env := map[string]string{"PATH": filepath.Dir(bin) + ":/usr/local/bin:/usr/bin:/bin"}
	r := execute(t, "also MARK-cplive2\n", env, "run", "--agent", "copilot", "--sandbox", "host", "--offline", "--no-store",
		"--scenario", "slow", "--workspace", t.TempDir(), "--live", "--json", "first MARK-cplive1")
	require.Equal(t, 0, r.code, r.stdout+r.stderr)
	assert.Contains(t, r.stdout, `"kind":"input","text":"also MARK-cplive2"`)
	assert.Contains(t, r.stdout, `"text":"outpost ok: MARK-cplive2. remembered: MARK-cplive1"`,
		"the message replaced the prompt in the same session")
}
