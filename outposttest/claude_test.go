package outposttest_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/internal/testenv"
	"github.com/outpost-dev/outpost/outposttest"
)

// claudeRun is one headless run of the real Claude Code CLI.
type claudeRun struct {
	lines  []map[string]any
	exit   int
	stderr string
}

func (r claudeRun) result(t *testing.T) map[string]any {
	t.Helper()
	require.NotEmpty(t, r.lines, "no stdout; stderr: %s", r.stderr)
	last := r.lines[len(r.lines)-1]
	require.Equal(t, "result", last["type"], "last line is the result; stderr: %s", r.stderr)
	return last
}

func (r claudeRun) find(typ, subtype string) []map[string]any {
	var out []map[string]any
	for _, l := range r.lines {
		if l["type"] == typ && (subtype == "" || l["subtype"] == subtype) {
			out = append(out, l)
		}
	}
	return out
}

// runClaude runs `claude --print --verbose --output-format stream-json
// --dangerously-skip-permissions [args]` in dir with a private home, the
// prompt on stdin (then closed) and env on top of a cleaned environment.
func runClaude(t *testing.T, bin, dir, home string, env map[string]string, prompt string, args ...string) claudeRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	argv := append([]string{"--print", "--verbose", "--output-format", "stream-json", "--dangerously-skip-permissions"}, args...)
	cmd := exec.CommandContext(ctx, bin, argv...)
	cmd.Dir = dir
	cmd.WaitDelay = 2 * time.Second
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "ANTHROPIC_") || strings.HasPrefix(k, "CLAUDE_") || k == "HOME" {
			continue
		}
		cmd.Env = append(cmd.Env, kv)
	}
	// IS_SANDBOX=1: bypass mode is refused as root without it.
	cmd.Env = append(cmd.Env, "HOME="+home, "IS_SANDBOX=1", "CLAUDE_CODE_MAX_RETRIES=0")
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stdin = strings.NewReader(prompt)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	run := claudeRun{stderr: stderr.String(), exit: cmd.ProcessState.ExitCode()}
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) {
		t.Fatalf("run claude: %v; stderr: %s", err, stderr.String())
	}
	sc := bufio.NewScanner(&stdout)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var m map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &m), "stdout line %q", sc.Text())
		run.lines = append(run.lines, m)
	}
	return run
}

func claudeSetup(t *testing.T, opts ...outposttest.Option) (bin string, srv *outposttest.Server, dir, home string) {
	t.Helper()
	bin = testenv.CLI(t, "claude")
	testenv.Short(t)
	return bin, newServer(t, opts...), t.TempDir(), t.TempDir()
}

func TestRealClaudeOKAndResume(t *testing.T) {
	bin, srv, dir, home := claudeSetup(t)
	env := outposttest.ClaudeEnv(srv)

	run := runClaude(t, bin, dir, home, env, "Reply with the marker MARK-first1")
	require.Equal(t, 0, run.exit, run.stderr)
	init := run.find("system", "init")
	require.Len(t, init, 1)
	session, _ := init[0]["session_id"].(string)
	require.NotEmpty(t, session)
	assert.Equal(t, "ANTHROPIC_API_KEY", init[0]["apiKeySource"])
	res := run.result(t)
	assert.Equal(t, false, res["is_error"])
	assert.Equal(t, "completed", res["terminal_reason"])
	assert.Equal(t, "outpost ok: MARK-first1.", res["result"])
	assert.Greater(t, res["total_cost_usd"], 0.0, "Claude prices the reported usage")
	u := res["usage"].(map[string]any)
	assert.Greater(t, u["cache_creation_input_tokens"], 1000.0)
	assert.Greater(t, u["output_tokens"], 0.0)

	reqs := srv.ModelRequests()
	require.Len(t, reqs, 1)
	r := reqs[0]
	assert.Equal(t, "/v1/messages", r.Path)
	assert.Equal(t, "beta=true", r.Query)
	assert.True(t, r.Stream)
	assert.NotEmpty(t, r.Model)
	assert.Contains(t, r.Tools, "Bash")
	assert.Equal(t, outposttest.Redacted, r.Header.Get("X-Api-Key"))
	assert.Contains(t, r.Header.Get("User-Agent"), "claude-cli/")
	assert.Contains(t, r.UserText(), "MARK-first1")

	// A resumed conversation sends the earlier turn back: visible in the answer.
	run = runClaude(t, bin, dir, home, env, "Now MARK-second2", "--resume", session)
	require.Equal(t, 0, run.exit, run.stderr)
	assert.Equal(t, "outpost ok: MARK-second2. remembered: MARK-first1", run.result(t)["result"])
}

func TestRealClaudeTool(t *testing.T) {
	bin, srv, dir, home := claudeSetup(t)
	prompt := "Create the file. " + outposttest.Directive(outposttest.ScenarioTool) + " MARK-tool7"
	run := runClaude(t, bin, dir, home, outposttest.ClaudeEnv(srv), prompt)
	require.Equal(t, 0, run.exit, run.stderr)
	res := run.result(t)
	assert.Equal(t, false, res["is_error"])
	assert.InDelta(t, 2, res["num_turns"], 0)
	assert.Contains(t, res["result"], "outpost tool done: wrote outpost-MARK-tool7.txt.")

	name, content := outposttest.ToolFile("MARK-tool7")
	got, err := os.ReadFile(filepath.Join(dir, name))
	require.NoError(t, err)
	assert.Equal(t, content, string(got))

	reqs := srv.ModelRequests()
	require.Len(t, reqs, 2)
	last := reqs[1].Messages
	var results []outposttest.Content
	for _, m := range last {
		for _, c := range m.Content {
			if c.Type == "tool_result" {
				results = append(results, c)
			}
		}
	}
	require.Len(t, results, 1)
	assert.False(t, results[0].IsError)
}

// TestRealClaudeFailures pins what Claude Code prints for each failure
// scenario (see the package documentation). CLAUDE_CODE_MAX_RETRIES=0.
func TestRealClaudeFailures(t *testing.T) {
	bin := testenv.CLI(t, "claude")
	testenv.Short(t)
	reset := time.Now().UTC().Truncate(24 * time.Hour).Add(24 * time.Hour)
	cases := []struct {
		scenario  outposttest.Scenario
		oauth     bool
		status    float64
		errorType string // result.api_error_type
		result    string // substring of result.result
	}{
		{outposttest.ScenarioRateLimit, false, 429, "rate_limit_error",
			"API Error: Request rejected (429) · This request would exceed your account's rate limit."},
		{outposttest.ScenarioQuota, true, 429, "rate_limit_error", "You've hit your 5-hour limit · resets"},
		{outposttest.ScenarioSpendLimit, false, 400, "invalid_request_error",
			"API Error: 400 You have reached your specified API usage limits. You will regain access on " + reset.Format("2006-01-02") + " at 00:00 UTC."},
		{outposttest.ScenarioCredits, false, 400, "invalid_request_error", "Credit balance is too low"},
		{outposttest.ScenarioOverloaded, false, 529, "overloaded_error", "API Error: 529 Overloaded."},
		{outposttest.ScenarioUnauthorized, false, 401, "authentication_error", "Failed to authenticate. API Error: 401 Invalid bearer token"},
	}
	for _, tc := range cases {
		t.Run(string(tc.scenario), func(t *testing.T) {
			t.Parallel()
			srv := newServer(t, outposttest.WithScenario(tc.scenario), outposttest.WithQuotaReset(reset))
			env := outposttest.ClaudeEnv(srv)
			if tc.oauth {
				env = outposttest.ClaudeOAuthEnv(srv)
			}
			run := runClaude(t, bin, t.TempDir(), t.TempDir(), env, "hi MARK-fail")
			assert.Equal(t, 1, run.exit)
			res := run.result(t)
			assert.Equal(t, true, res["is_error"])
			assert.Equal(t, "api_error", res["terminal_reason"])
			assert.InDelta(t, tc.status, res["api_error_status"], 0)
			assert.Equal(t, tc.errorType, res["api_error_type"])
			assert.Contains(t, res["result"], tc.result)
			if tc.oauth {
				ev := run.find("rate_limit_event", "")
				require.Len(t, ev, 1)
				info := ev[0]["rate_limit_info"].(map[string]any)
				assert.Equal(t, "rejected", info["status"])
				assert.InDelta(t, float64(reset.Unix()), info["resetsAt"], 0)
				assert.Equal(t, "usage_limit_reached", res["api_error"])
			}
		})
	}
}

func TestRealClaudeRecoversAfterOutage(t *testing.T) {
	bin, srv, dir, home := claudeSetup(t,
		outposttest.WithSequence(outposttest.ScenarioOverloaded, outposttest.ScenarioUnavailable))
	env := outposttest.ClaudeEnv(srv)
	env["CLAUDE_CODE_MAX_RETRIES"] = "2"
	run := runClaude(t, bin, dir, home, env, "hi MARK-back")
	require.Equal(t, 0, run.exit, run.stderr)
	retries := run.find("system", "api_retry")
	require.Len(t, retries, 2)
	assert.InDelta(t, 529, retries[0]["error_status"], 0)
	assert.Equal(t, "overloaded", retries[0]["error"])
	assert.InDelta(t, 1, retries[0]["attempt"], 0)
	assert.InDelta(t, 2, retries[0]["max_retries"], 0)
	assert.InDelta(t, 503, retries[1]["error_status"], 0)
	assert.Equal(t, "outpost ok: MARK-back.", run.result(t)["result"])
	assert.Len(t, srv.ModelRequests(), 3)
}
