package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/internal/testenv"
)

// TestRunOfflineRealCopilot: `outpost run --agent copilot --offline` on the
// host lease against the in-process scripted server (Copilot in BYOK mode
// on the Chat Completions API of the same URL).
func TestRunOfflineRealCopilot(t *testing.T) {
	testenv.Short(t)
	bin := testenv.CLI(t, "copilot")
	ws := t.TempDir()
	env := map[string]string{"PATH": filepath.Dir(bin) + ":/usr/local/bin:/usr/bin:/bin"}
	r := execute(t, "", env, "run", "--no-store", "--agent", "copilot", "--sandbox", "host", "--offline", "--workspace", ws, "--json", "say MARK-cp1")
	require.Equal(t, 0, r.code, r.stdout+r.stderr)
	assert.Contains(t, r.stdout, "outpost ok: MARK-cp1.")

	r = execute(t, "", env, "run", "--no-store", "--agent", "copilot", "--sandbox", "host", "--offline", "--scenario", "tool", "--workspace", ws, "write MARK-cp3")
	require.Equal(t, 0, r.code, r.stdout+r.stderr)
	got, err := os.ReadFile(filepath.Join(ws, "outpost-MARK-cp3.txt"))
	require.NoError(t, err)
	assert.Equal(t, "MARK-cp3", string(got))

	r = execute(t, "", env, "run", "--no-store", "--agent", "copilot", "--sandbox", "host", "--offline", "--scenario", "quota",
		"--stub-quota-reset", "2h", "--workspace", ws, "MARK-cp2")
	assert.Equal(t, int(ExitQuota), r.code, r.stdout+r.stderr)
	assert.Contains(t, r.stdout, "Please try again in 2 hours")

	// Copilot cannot fork: refused before any sandbox exists.
	r = execute(t, "", env, "run", "--no-store", "--agent", "copilot", "--sandbox", "host", "--offline", "--fork", "--resume", "abc", "--workspace", ws, "MARK-cp5")
	assert.Equal(t, int(ExitConfiguration), r.code, r.stdout+r.stderr)
}

// TestRunOfflineRealCopilotDocker: the default sandbox runs the bootstrapped
// copilot in a container (its cache under /tmp/.cache, writable and executable).
func TestRunOfflineRealCopilotDocker(t *testing.T) {
	testenv.Short(t)
	bin := testenv.CLI(t, "copilot")
	requireDocker(t)
	ws := t.TempDir()
	require.NoError(t, os.Chmod(ws, 0o777))
	var out, errOut bytes.Buffer
	f := testFactory(strings.NewReader(""), &out, &errOut, func(k string) string {
		return map[string]string{"PATH": filepath.Dir(bin) + ":/usr/local/bin:/usr/bin:/bin"}[k]
	}, time.Now)
	code := Execute(context.Background(), f, []string{"run", "--no-store", "--agent", "copilot", "--offline", "--scenario", "tool",
		"--workspace", ws, "--json", "write MARK-cpdock1"})
	require.Equal(t, 0, code, out.String()+errOut.String())
	assert.Contains(t, out.String(), "outpost tool done: wrote outpost-MARK-cpdock1.txt.")
	got, err := os.ReadFile(filepath.Join(ws, "outpost-MARK-cpdock1.txt"))
	require.NoError(t, err)
	assert.Equal(t, "MARK-cpdock1", string(got))
}

// TestReplayCopilotFixtures: `outpost replay --agent copilot` reproduces
// each captured fixture's outcome (exit code by class).
func TestReplayCopilotFixtures(t *testing.T) {
	dir := filepath.Join("..", "..", "adapters", "copilot", "testdata")
	want := map[string]int{
		"ok": 0, "tool": 0, "resume": 0,
		"quota": int(ExitQuota), "quota_no_quota": int(ExitQuota), "rate_limit": int(ExitQuota),
		"unavailable": int(ExitUnavailable), "server_error": int(ExitUnavailable),
		"connection_refused": int(ExitUnavailable), "hang_sigterm": int(ExitProcess),
		"unauthorized": int(ExitAuth), "no_provider": int(ExitAuth),
		"resume_missing": int(ExitSession),
	}
	for name, code := range want {
		t.Run(name, func(t *testing.T) {
			var meta struct {
				ExitCode int    `json:"exit_code"`
				Time     string `json:"time"`
			}
			b, err := os.ReadFile(filepath.Join(dir, name, "meta.json"))
			require.NoError(t, err)
			require.NoError(t, json.Unmarshal(b, &meta))
			r := execute(t, "", nil, "replay", "--agent", "copilot",
				"--stdout", filepath.Join(dir, name, "stdout.jsonl"), "--stderr", filepath.Join(dir, name, "stderr.txt"),
				"--exit-code", strconv.Itoa(meta.ExitCode), "--time", meta.Time)
			assert.Equal(t, code, r.code, r.stdout+r.stderr)
		})
	}
}
