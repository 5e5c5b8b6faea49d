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

// TestRunOfflineRealCodex: `outpost run --agent codex --offline` on the
// host lease against the in-process scripted server (both APIs on one URL).
func TestRunOfflineRealCodex(t *testing.T) {
	testenv.Short(t)
	bin := testenv.CLI(t, "codex")
	ws := t.TempDir()
	env := map[string]string{"PATH": filepath.Dir(bin) + ":/usr/local/bin:/usr/bin:/bin"}
	r := execute(t, "", env, "run", "--agent", "codex", "--sandbox", "host", "--offline", "--no-store", "--workspace", ws, "--json", "say MARK-cli1")
	require.Equal(t, 0, r.code, r.stdout+r.stderr)
	assert.Contains(t, r.stdout, "outpost ok: MARK-cli1.")

	r = execute(t, "", env, "run", "--agent", "codex", "--sandbox", "host", "--offline", "--no-store", "--scenario", "tool", "--workspace", ws, "write MARK-cli3")
	require.Equal(t, 0, r.code, r.stdout+r.stderr)
	got, err := os.ReadFile(filepath.Join(ws, "outpost-MARK-cli3.txt"))
	require.NoError(t, err)
	assert.Equal(t, "MARK-cli3", string(got))

	r = execute(t, "", env, "run", "--agent", "codex", "--sandbox", "host", "--offline", "--no-store", "--scenario", "quota", "--workspace", ws, "MARK-cli2")
	assert.Equal(t, int(ExitQuota), r.code, r.stdout+r.stderr)
	assert.Contains(t, r.stdout, "try again at ")

	r = execute(t, "", env, "run", "--agent", "codex", "--sandbox", "host", "--offline", "--no-store", "--scenario", "unavailable", "--workspace", ws, "MARK-cli4")
	assert.Equal(t, int(ExitUnavailable), r.code, r.stdout+r.stderr)
}

// TestRunOfflineRealCodexDocker: the default sandbox mounts Codex's whole
// platform tree (binary and helpers) into the container.
func TestRunOfflineRealCodexDocker(t *testing.T) {
	testenv.Short(t)
	bin := testenv.CLI(t, "codex")
	requireDocker(t)
	ws := t.TempDir()
	require.NoError(t, os.Chmod(ws, 0o777))
	var out, errOut bytes.Buffer
	f := testFactory(strings.NewReader(""), &out, &errOut, func(k string) string {
		return map[string]string{"PATH": filepath.Dir(bin) + ":/usr/local/bin:/usr/bin:/bin"}[k]
	}, time.Now)
	code := Execute(context.Background(), f, []string{"run", "--agent", "codex", "--offline", "--no-store", "--scenario", "tool",
		"--workspace", ws, "--json", "write MARK-dock1"})
	require.Equal(t, 0, code, out.String()+errOut.String())
	assert.Contains(t, out.String(), "outpost tool done: wrote outpost-MARK-dock1.txt.")
	got, err := os.ReadFile(filepath.Join(ws, "outpost-MARK-dock1.txt"))
	require.NoError(t, err)
	assert.Equal(t, "MARK-dock1", string(got))
}

// TestReplayCodexFixtures: `outpost replay --agent codex` reproduces each
// captured fixture's outcome (exit code by class).
func TestReplayCodexFixtures(t *testing.T) {
	dir := filepath.Join("..", "..", "adapters", "codex", "testdata")
	want := map[string]int{
		"ok": 0, "tool": 0, "resume": 0, "fork": 0,
		"quota": int(ExitQuota), "quota_tomorrow": int(ExitQuota), "quota_insufficient": int(ExitQuota), "rate_limit": int(ExitQuota),
		"unavailable": int(ExitUnavailable), "overloaded": int(ExitUnavailable),
		"unauthorized": int(ExitAuth), "missing_key": int(ExitAuth),
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
			r := execute(t, "", nil, "replay", "--agent", "codex",
				"--stdout", filepath.Join(dir, name, "stdout.jsonl"), "--stderr", filepath.Join(dir, name, "stderr.txt"),
				"--exit-code", strconv.Itoa(meta.ExitCode), "--time", meta.Time)
			assert.Equal(t, code, r.code, r.stdout+r.stderr)
		})
	}
}

// TestRunLiveRealCodex: `outpost run --live` delivers each line of standard
// input into the running Codex turn (app-server, turn/steer).
func TestRunLiveRealCodex(t *testing.T) {
	testenv.Short(t)
	bin := testenv.CLI(t, "codex")
	ws := t.TempDir()
	env := map[string]string{"PATH": filepath.Dir(bin) + ":/usr/local/bin:/usr/bin:/bin"}
	r := execute(t, "also MARK-live2\n", env, "run", "--agent", "codex", "--sandbox", "host", "--offline", "--no-store",
		"--scenario", "slow", "--workspace", ws, "--live", "--json", "first MARK-live1")
	require.Equal(t, 0, r.code, r.stdout+r.stderr)
	assert.Contains(t, r.stdout, `"kind":"input","text":"also MARK-live2"`)
	assert.Contains(t, r.stdout, "outpost ok: MARK-live2. remembered: MARK-live1", "the message reached the running turn")

	r = execute(t, "", env, "run", "--agent", "antigravity", "--sandbox", "host", "--offline", "--no-store", "--workspace", ws, "--live", "hi")
	assert.Equal(t, int(ExitConfiguration), r.code, r.stdout+r.stderr)
	// Antigravity takes live input by interrupt-and-resume; only its lack
	// of an endpoint override keeps it from --offline.
	assert.Contains(t, r.stderr, "agy has no documented model endpoint override")
	assert.NotContains(t, r.stderr, "live input")

	r = execute(t, "", env, "run", "--agent", "codex", "--live", "-")
	assert.Equal(t, int(ExitConfiguration), r.code)
	assert.Contains(t, r.stderr, "give the prompt as the argument")
}

// TestRunTypedRealCodex: `outpost run --schema` with the real Codex against
// the offline server's scripted answers: a repaired answer is the outcome's
// value; an answer that fails twice is a protocol error (exit 10).
func TestRunTypedRealCodex(t *testing.T) {
	testenv.Short(t)
	bin := testenv.CLI(t, "codex")
	ws := t.TempDir()
	schema := filepath.Join(t.TempDir(), "verdict.json")
	require.NoError(t, os.WriteFile(schema, []byte(`{"type":"object","properties":{"verdict":{"type":"string","enum":["pass","fail"]}},`+
		`"required":["verdict"],"additionalProperties":false}`), 0o644))
	env := map[string]string{"PATH": filepath.Dir(bin) + ":/usr/local/bin:/usr/bin:/bin"}
	base := []string{"run", "--agent", "codex", "--sandbox", "host", "--offline", "--no-store", "--workspace", ws, "--json", "--schema", schema}

	r := execute(t, "", env, append(base, "--stub-answer", "I think it passes", "--stub-answer", `{"verdict":"pass"}`, "judge MARK-cli-ty1")...)
	require.Equal(t, 0, r.code, r.stdout+r.stderr)
	assert.Contains(t, r.stdout, `"value":{"verdict":"pass"},"repaired":true`)

	r = execute(t, "", env, append(base, "--stub-answer", `{"verdict":"maybe"}`, "--stub-answer", `{}`, "judge MARK-cli-ty2")...)
	assert.Equal(t, int(ExitProtocol), r.code, r.stdout+r.stderr)
	assert.Contains(t, r.stdout, `"class":"protocol"`)
	assert.Contains(t, r.stdout, "missing property 'verdict'")

	r = execute(t, "", env, "run", "--agent", "codex", "--offline", "--schema", filepath.Join(ws, "missing.json"), "x")
	assert.Equal(t, int(ExitConfiguration), r.code)
	r = execute(t, "", env, "run", "--agent", "codex", "--stub-answer", "x", "--auth", "none", "x")
	assert.Equal(t, int(ExitConfiguration), r.code)
	assert.Contains(t, r.stderr, "--stub-answer needs --offline")
}
