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

	"github.com/outpost-dev/outpost/adapters/reset"
	"github.com/outpost-dev/outpost/internal/testenv"
	"github.com/outpost-dev/outpost/outposttest"
)

// codexRun is one `codex exec --json` run of the real Codex CLI.
type codexRun struct {
	lines  []map[string]any
	exit   int
	stderr string
}

func (r codexRun) find(typ string) []map[string]any {
	var out []map[string]any
	for _, l := range r.lines {
		if l["type"] == typ {
			out = append(out, l)
		}
	}
	return out
}

func (r codexRun) thread(t *testing.T) string {
	t.Helper()
	s := r.find("thread.started")
	require.Len(t, s, 1, "stderr: %s", r.stderr)
	id, _ := s[0]["thread_id"].(string)
	require.NotEmpty(t, id)
	return id
}

// lastMessage is the text of the last agent_message item.
func (r codexRun) lastMessage() string {
	var text string
	for _, l := range r.find("item.completed") {
		if it, ok := l["item"].(map[string]any); ok && it["type"] == "agent_message" {
			text, _ = it["text"].(string)
		}
	}
	return text
}

// runCodex runs `codex <CodexArgs> exec --json --skip-git-repo-check
// --dangerously-bypass-approvals-and-sandbox [sub…] -` in dir with a private
// home, the prompt on stdin (then closed).
func runCodex(t *testing.T, bin string, srv *outposttest.Server, dir, home string, retries int, prompt string, sub ...string) codexRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	argv := append(outposttest.CodexArgs(srv, retries), "exec", "--json", "--skip-git-repo-check",
		"--dangerously-bypass-approvals-and-sandbox")
	argv = append(append(argv, sub...), "-")
	cmd := exec.CommandContext(ctx, bin, argv...)
	cmd.Dir = dir
	cmd.WaitDelay = 2 * time.Second
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "TZ=UTC"}
	for k, v := range outposttest.CodexEnv(srv) {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stdin = strings.NewReader(prompt)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	run := codexRun{stderr: stderr.String(), exit: cmd.ProcessState.ExitCode()}
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) {
		t.Fatalf("run codex: %v; stderr: %s", err, stderr.String())
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

func codexSetup(t *testing.T, opts ...outposttest.Option) (bin string, srv *outposttest.Server, dir, home string) {
	t.Helper()
	bin = testenv.CLI(t, "codex")
	testenv.Short(t)
	// Not under /tmp: Codex warns about a home there on every start.
	home, err := os.MkdirTemp("/var/tmp", "outposttest-codex-home-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(home) })
	return bin, newServer(t, opts...), t.TempDir(), home
}

func TestRealCodexOKAndResume(t *testing.T) {
	bin, srv, dir, home := codexSetup(t)
	run := runCodex(t, bin, srv, dir, home, 0, "Reply with the marker MARK-first1")
	require.Equal(t, 0, run.exit, run.stderr)
	thread := run.thread(t)
	assert.Equal(t, "outpost ok: MARK-first1.", run.lastMessage())
	done := run.find("turn.completed")
	require.Len(t, done, 1)
	u := done[0]["usage"].(map[string]any)
	assert.Greater(t, u["input_tokens"], 1000.0)
	assert.InDelta(t, 8, u["reasoning_output_tokens"], 0)
	_, err := os.Stat(filepath.Join(home, ".codex", "sessions"))
	assert.NoError(t, err, "codex creates $HOME/.codex itself")

	reqs := srv.ModelRequests()
	require.Len(t, reqs, 1)
	r := reqs[0]
	assert.Equal(t, "/v1/responses", r.Path)
	assert.Equal(t, "responses", r.API)
	assert.True(t, r.Stream)
	assert.NotEmpty(t, r.Model)
	assert.NotEmpty(t, r.Tools)
	assert.Equal(t, outposttest.Redacted, r.Header.Get("Authorization"))
	assert.Contains(t, r.Header.Get("User-Agent"), "codex_exec/")
	assert.Contains(t, r.UserText(), "MARK-first1")

	// Resume sends the earlier turn back; usage is thread-cumulative.
	run2 := runCodex(t, bin, srv, dir, home, 0, "Now MARK-second2", "resume", thread)
	require.Equal(t, 0, run2.exit, run2.stderr)
	assert.Equal(t, thread, run2.thread(t))
	assert.Equal(t, "outpost ok: MARK-second2. remembered: MARK-first1", run2.lastMessage())
	u2 := run2.find("turn.completed")[0]["usage"].(map[string]any)
	assert.InDelta(t, 16, u2["reasoning_output_tokens"], 0, "the second turn's total includes the first")
	assert.Greater(t, u2["input_tokens"], u["input_tokens"].(float64)*1.5)
}

func TestRealCodexTool(t *testing.T) {
	bin, srv, dir, home := codexSetup(t)
	prompt := "Create the file. " + outposttest.Directive(outposttest.ScenarioTool) + " MARK-tool7"
	run := runCodex(t, bin, srv, dir, home, 0, prompt)
	require.Equal(t, 0, run.exit, run.stderr)
	assert.Contains(t, run.lastMessage(), "outpost tool done: wrote outpost-MARK-tool7.txt.")
	name, content := outposttest.ToolFile("MARK-tool7")
	got, err := os.ReadFile(filepath.Join(dir, name))
	require.NoError(t, err)
	assert.Equal(t, content, string(got))

	var cmds []map[string]any
	for _, l := range run.find("item.completed") {
		if it := l["item"].(map[string]any); it["type"] == "command_execution" {
			cmds = append(cmds, it)
		}
	}
	require.Len(t, cmds, 1)
	assert.InDelta(t, 0, cmds[0]["exit_code"], 0)
	assert.Equal(t, "completed", cmds[0]["status"])
	require.Len(t, srv.ModelRequests(), 2)
}

// TestRealCodexFailures pins what Codex prints for each failure scenario
// with retries off (see README.md).
func TestRealCodexFailures(t *testing.T) {
	bin := testenv.CLI(t, "codex")
	testenv.Short(t)
	resetAt := time.Now().UTC().Truncate(time.Hour).Add(3 * time.Hour)
	cases := []struct {
		scenario outposttest.Scenario
		message  string // substring of turn.failed.error.message
	}{
		{outposttest.ScenarioRateLimit, "exceeded retry limit, last status: 429 Too Many Requests"},
		{outposttest.ScenarioQuota, "hit your usage limit."},
		{outposttest.ScenarioCredits, "Quota exceeded. Check your plan and billing details."},
		{outposttest.ScenarioOverloaded, "Selected model is at capacity."},
		{outposttest.ScenarioUnavailable, "unexpected status 503 Service Unavailable"},
		{outposttest.ScenarioUnauthorized, "unexpected status 401 Unauthorized: Incorrect API key provided"},
	}
	for _, tc := range cases {
		t.Run(string(tc.scenario), func(t *testing.T) {
			t.Parallel()
			srv := newServer(t, outposttest.WithScenario(tc.scenario), outposttest.WithQuotaReset(resetAt))
			home, err := os.MkdirTemp("/var/tmp", "outposttest-codex-home-")
			require.NoError(t, err)
			t.Cleanup(func() { _ = os.RemoveAll(home) })
			run := runCodex(t, bin, srv, t.TempDir(), home, 0, "hi MARK-fail")
			assert.Equal(t, 1, run.exit)
			failed := run.find("turn.failed")
			require.Len(t, failed, 1, "stderr: %s", run.stderr)
			msg := failed[0]["error"].(map[string]any)["message"].(string)
			assert.Contains(t, msg, tc.message)
			if tc.scenario == outposttest.ScenarioQuota {
				// Codex names the clock time alone on the same day, else
				// the date too ("try again at Dec 3rd, 2026 1:00 AM."):
				// whichever it printed must read back as the reset.
				assert.Contains(t, msg, "try again at ")
				got, ok := reset.Parse(msg, time.Now())
				require.True(t, ok, "reset not read from %q", msg)
				assert.True(t, got.Equal(resetAt), "reset read as %v from %q, want %v", got, msg, resetAt)
			}
			assert.Empty(t, run.find("turn.completed"))
		})
	}
}

// TestRealCodexRecoversAfterOutage: a 5xx is first retried silently at the
// HTTP level (request_max_retries), a 429 through the visible stream retry
// loop (stream_max_retries), one "Reconnecting... n/N (…)" notice each.
func TestRealCodexRecoversAfterOutage(t *testing.T) {
	bin, srv, dir, home := codexSetup(t, outposttest.WithSequence(outposttest.ScenarioUnavailable,
		outposttest.ScenarioRateLimit, outposttest.ScenarioRateLimit))
	run := runCodex(t, bin, srv, dir, home, 2, "hi MARK-back")
	require.Equal(t, 0, run.exit, run.stderr)
	var notices []string
	for _, l := range run.find("error") {
		notices = append(notices, l["message"].(string))
	}
	require.Len(t, notices, 2, "one Reconnecting notice per failed stream attempt: %q", notices)
	assert.True(t, strings.HasPrefix(notices[0], "Reconnecting... 1/2 (exceeded retry limit, last status: 429"), notices[0])
	assert.True(t, strings.HasPrefix(notices[1], "Reconnecting... 2/2 ("), notices[1])
	assert.Empty(t, run.find("turn.failed"))
	assert.Equal(t, "outpost ok: MARK-back.", run.lastMessage())
	assert.Len(t, srv.ModelRequests(), 4)
}
