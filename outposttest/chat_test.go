package outposttest_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
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

// chatPost sends a Chat Completions request and returns the status, the
// decoded data chunks (for a stream) or body.
func chatPost(t *testing.T, srv *outposttest.Server, path string, body map[string]any) (int, []map[string]any, []byte) {
	t.Helper()
	b, err := json.Marshal(body)
	require.NoError(t, err)
	resp, err := http.Post(srv.URL()+path, "application/json", bytes.NewReader(b))
	require.NoError(t, err)
	defer resp.Body.Close()
	var chunks []map[string]any
	var raw bytes.Buffer
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	done := false
	for sc.Scan() {
		l := sc.Text()
		raw.WriteString(l + "\n")
		d, ok := strings.CutPrefix(l, "data: ")
		if !ok {
			continue
		}
		if d == "[DONE]" {
			done = true
			continue
		}
		var c map[string]any
		require.NoError(t, json.Unmarshal([]byte(d), &c))
		chunks = append(chunks, c)
	}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		assert.True(t, done, "stream without [DONE]")
	}
	return resp.StatusCode, chunks, raw.Bytes()
}

var bashTool = []any{map[string]any{"type": "function", "function": map[string]any{"name": "bash",
	"parameters": map[string]any{"type": "object"}}}}

func TestChatStreamOK(t *testing.T) {
	srv, err := outposttest.NewServer()
	require.NoError(t, err)
	defer srv.Close()
	status, chunks, _ := chatPost(t, srv, "/v1/chat/completions", map[string]any{
		"model": "gpt-4.1", "stream": true, "stream_options": map[string]any{"include_usage": true}, "tools": bashTool,
		"messages": []any{
			map[string]any{"role": "system", "content": "sys MARK-sys"},
			map[string]any{"role": "user", "content": "Remember MARK-a"},
			map[string]any{"role": "assistant", "content": "ok"},
			map[string]any{"role": "user", "content": "<current_datetime>x</current_datetime>\n\nNow MARK-b"},
		}})
	require.Equal(t, 200, status)
	var text strings.Builder
	var usage map[string]any
	for _, c := range chunks {
		if u, ok := c["usage"].(map[string]any); ok {
			usage = u
		}
		for _, ch := range c["choices"].([]any) {
			if s, ok := ch.(map[string]any)["delta"].(map[string]any)["content"].(string); ok {
				text.WriteString(s)
			}
		}
	}
	assert.Equal(t, "outpost ok: MARK-b. remembered: MARK-a", text.String())
	require.NotNil(t, usage)
	assert.Greater(t, usage["prompt_tokens"].(float64), 0.0)
	reqs := srv.ModelRequests()
	require.Len(t, reqs, 1)
	assert.Equal(t, "chat", reqs[0].API)
	assert.Equal(t, []string{"bash"}, reqs[0].Tools)
}

func TestChatStreamTool(t *testing.T) {
	srv, err := outposttest.NewServer(outposttest.WithScenario(outposttest.ScenarioTool))
	require.NoError(t, err)
	defer srv.Close()
	// Without /v1, as a base URL given without it would send.
	status, chunks, _ := chatPost(t, srv, "/chat/completions", map[string]any{
		"model": "gpt-4.1", "stream": true, "tools": bashTool,
		"messages": []any{map[string]any{"role": "user", "content": "Write MARK-t"}}})
	require.Equal(t, 200, status)
	var args, name, finish string
	for _, c := range chunks {
		assert.Nil(t, c["usage"], "usage chunk without include_usage")
		for _, ch := range c["choices"].([]any) {
			m := ch.(map[string]any)
			if f, ok := m["finish_reason"].(string); ok {
				finish = f
			}
			calls, _ := m["delta"].(map[string]any)["tool_calls"].([]any)
			for _, tc := range calls {
				fn := tc.(map[string]any)["function"].(map[string]any)
				if n, ok := fn["name"].(string); ok {
					name = n
				}
				a, _ := fn["arguments"].(string)
				args += a
			}
		}
	}
	assert.Equal(t, "tool_calls", finish)
	assert.Equal(t, "bash", name)
	var in map[string]string
	require.NoError(t, json.Unmarshal([]byte(args), &in))
	assert.Equal(t, outposttest.ToolCommand("MARK-t"), in["command"])
	assert.NotEmpty(t, in["description"])

	// The tool result comes back: the final answer.
	status, chunks, _ = chatPost(t, srv, "/v1/chat/completions", map[string]any{
		"model": "gpt-4.1", "stream": true, "tools": bashTool,
		"messages": []any{
			map[string]any{"role": "user", "content": "Write MARK-t"},
			map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{"id": "c1", "type": "function",
				"function": map[string]any{"name": "bash", "arguments": args}}}},
			map[string]any{"role": "tool", "tool_call_id": "c1", "content": "done"},
		}})
	require.Equal(t, 200, status)
	var text strings.Builder
	for _, c := range chunks {
		for _, ch := range c["choices"].([]any) {
			if s, ok := ch.(map[string]any)["delta"].(map[string]any)["content"].(string); ok {
				text.WriteString(s)
			}
		}
	}
	assert.Contains(t, text.String(), "outpost tool done: wrote outpost-MARK-t.txt.")
}

func TestChatFailures(t *testing.T) {
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	srv, err := outposttest.NewServer(outposttest.WithClock(func() time.Time { return now }),
		outposttest.WithQuotaReset(now.Add(14*time.Hour+23*time.Minute)))
	require.NoError(t, err)
	defer srv.Close()
	for sc, want := range map[outposttest.Scenario]struct {
		status int
		code   string
		msg    string
	}{
		outposttest.ScenarioRateLimit:    {429, "rate_limited", "rate limit exceeded"},
		outposttest.ScenarioQuota:        {429, "rate_limited", "Please try again in 14 hours 23 minutes."},
		outposttest.ScenarioCredits:      {402, "quota_exceeded", "You have no quota"},
		outposttest.ScenarioSpendLimit:   {402, "quota_exceeded", "You have no quota"},
		outposttest.ScenarioUnavailable:  {503, "", "Service Unavailable"},
		outposttest.ScenarioServerError:  {500, "", "Internal Server Error"},
		outposttest.ScenarioOverloaded:   {503, "server_is_overloaded", "overloaded"},
		outposttest.ScenarioUnauthorized: {401, "invalid_api_key", "Incorrect API key"},
		outposttest.ScenarioInsufficientQuota: {429, "insufficient_quota",
			"You exceeded your current quota, please check your plan and billing details."},
		outposttest.ScenarioOrgRateLimit: {429, "rate_limit_exceeded",
			"Rate limit reached for gpt-4.1 in organization org-outposttest on tokens per min (TPM): Limit 30000"},
	} {
		status, _, body := chatPost(t, srv, "/v1/chat/completions", map[string]any{
			"model": "gpt-4.1", "stream": true, "tools": bashTool,
			"messages": []any{map[string]any{"role": "user", "content": "x " + outposttest.Directive(sc)}}})
		assert.Equal(t, want.status, status, sc)
		var e struct {
			Error struct {
				Message string `json:"message"`
				Code    *string
			} `json:"error"`
		}
		require.NoError(t, json.Unmarshal(body, &e), "%s: %s", sc, body)
		assert.Contains(t, e.Error.Message, want.msg, sc)
		if want.code != "" {
			require.NotNil(t, e.Error.Code, sc)
			assert.Equal(t, want.code, *e.Error.Code, sc)
		}
	}
	assert.Equal(t, "Sorry, you've hit a rate limit that restricts the number of Copilot model requests you can make within a specific time period. Please try again in 2 hours. Please review our Terms of Service (https://docs.github.com/site-policy/github-terms/github-terms-of-service).",
		outposttest.CopilotRateLimitText(2*time.Hour))
}

func TestChatHang(t *testing.T) {
	srv, err := outposttest.NewServer(outposttest.WithScenario(outposttest.ScenarioHang))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL()+"/v1/chat/completions",
		strings.NewReader(`{"model":"m","stream":true,"tools":[{"type":"function","function":{"name":"bash"}}],"messages":[{"role":"user","content":"x"}]}`))
	_, err = http.DefaultClient.Do(req)
	require.Error(t, err)
	require.NoError(t, srv.Close())
}

// TestRealCopilot runs the real copilot CLI against the server in BYOK
// mode (CopilotEnv): ok with a tool call writes the marker file, and resume
// remembers the earlier turn.
func TestRealCopilot(t *testing.T) {
	bin := testenv.CLI(t, "copilot")
	testenv.Short(t)
	srv, err := outposttest.NewServer()
	require.NoError(t, err)
	defer srv.Close()
	home, work := t.TempDir(), t.TempDir()
	run := func(prompt string, args ...string) (string, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, append([]string{"--output-format", "json", "--allow-all", "--no-ask-user"}, args...)...)
		cmd.Dir = work
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home}
		for k, v := range outposttest.CopilotEnv(srv) {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		cmd.Stdin = strings.NewReader(prompt)
		out, err := cmd.Output()
		require.NoError(t, err, "%s", out)
		var id, text string
		for _, l := range bytes.Split(out, []byte("\n")) {
			var ev struct {
				Type      string `json:"type"`
				SessionID string `json:"sessionId"`
				Data      struct {
					Content string `json:"content"`
				} `json:"data"`
			}
			if json.Unmarshal(l, &ev) != nil {
				continue
			}
			switch ev.Type {
			case "result":
				id = ev.SessionID
			case "assistant.message":
				if ev.Data.Content != "" {
					text = ev.Data.Content
				}
			}
		}
		return id, text
	}
	id, text := run("Write the marker file for MARK-c1. " + outposttest.Directive(outposttest.ScenarioTool))
	require.NotEmpty(t, id)
	assert.Contains(t, text, "outpost tool done")
	b, err := os.ReadFile(filepath.Join(work, "outpost-MARK-c1.txt"))
	require.NoError(t, err)
	assert.Equal(t, "MARK-c1", string(b))
	id2, text := run("What was it? MARK-c2", "--resume", id)
	assert.Equal(t, id, id2)
	assert.Equal(t, "outpost ok: MARK-c2. remembered: MARK-c1", text)
	for _, r := range srv.ModelRequests() {
		assert.Equal(t, "chat", r.API)
		assert.Equal(t, "/v1/chat/completions", r.Path)
	}
}
