package outposttest_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/outposttest"
)

type sseEvent struct {
	typ  string
	data map[string]any
}

// postResponses sends a Responses request and returns the status, headers,
// the SSE events (streaming) or the JSON body.
func postResponses(t *testing.T, srv *outposttest.Server, body map[string]any) (*http.Response, []sseEvent, map[string]any) {
	t.Helper()
	b, err := json.Marshal(body)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL()+"/v1/responses", strings.NewReader(string(b)))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+outposttest.PlaceholderKey)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		var m map[string]any
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&m))
		return resp, nil, m
	}
	var evs []sseEvent
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	var typ string
	for sc.Scan() {
		l := sc.Text()
		switch {
		case strings.HasPrefix(l, "event: "):
			typ = strings.TrimPrefix(l, "event: ")
		case strings.HasPrefix(l, "data: "):
			var m map[string]any
			require.NoError(t, json.Unmarshal([]byte(strings.TrimPrefix(l, "data: ")), &m))
			require.Equal(t, typ, m["type"])
			evs = append(evs, sseEvent{typ: typ, data: m})
		}
	}
	return resp, evs, nil
}

func userItem(text string) map[string]any {
	return map[string]any{"type": "message", "role": "user", "content": []any{map[string]any{"type": "input_text", "text": text}}}
}

func codexTools() []any {
	return []any{map[string]any{"type": "function", "name": "exec_command"}, map[string]any{"type": "web_search"}}
}

func TestResponsesOKStream(t *testing.T) {
	srv := newServer(t)
	resp, evs, _ := postResponses(t, srv, map[string]any{"model": "gpt-5.5", "stream": true, "tools": codexTools(),
		"input": []any{
			map[string]any{"type": "message", "role": "developer", "content": []any{map[string]any{"type": "input_text", "text": "MARK-dev"}}},
			userItem("<environment_context>\n  <cwd>/w</cwd>\n</environment_context>"),
			userItem("Remember MARK-a1"),
			map[string]any{"type": "message", "role": "assistant", "content": []any{map[string]any{"type": "output_text", "text": "ok"}}},
			userItem("<environment_context>MARK-env</environment_context>"),
			userItem("Now MARK-b2"),
		}})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var types []string
	var text strings.Builder
	for i, e := range evs {
		types = append(types, e.typ)
		assert.InDelta(t, i, e.data["sequence_number"], 0)
		if e.typ == "response.output_text.delta" {
			text.WriteString(e.data["delta"].(string))
		}
	}
	assert.Equal(t, "response.created", types[0])
	assert.Equal(t, "response.completed", types[len(types)-1])
	assert.Contains(t, types, "response.output_item.added")
	assert.Contains(t, types, "response.output_text.done")
	assert.Equal(t, "outpost ok: MARK-b2. remembered: MARK-a1", text.String(),
		"developer messages and Codex's context blocks are not user turns")

	done := evs[len(evs)-1].data["response"].(map[string]any)
	assert.Equal(t, "completed", done["status"])
	u := done["usage"].(map[string]any)
	assert.Greater(t, u["input_tokens"], 0.0)
	assert.Greater(t, u["input_tokens_details"].(map[string]any)["cached_tokens"], 0.0, "a continued conversation reads the cache")
	assert.InDelta(t, 8, u["output_tokens_details"].(map[string]any)["reasoning_tokens"], 0)
	out := done["output"].([]any)
	require.Len(t, out, 2)
	assert.Equal(t, "reasoning", out[0].(map[string]any)["type"])
	assert.Equal(t, "message", out[1].(map[string]any)["type"])

	r := srv.ModelRequests()[0]
	assert.Equal(t, "responses", r.API)
	assert.Equal(t, outposttest.ScenarioOK, r.Scenario)
	assert.Equal(t, []string{"exec_command", "web_search"}, r.Tools)
	assert.Equal(t, outposttest.Redacted, r.Header.Get("Authorization"))
}

func TestResponsesToolCall(t *testing.T) {
	srv := newServer(t, outposttest.WithScenario(outposttest.ScenarioTool))
	for _, tc := range []struct {
		name  string
		tools []any
		item  string // output item type
		tool  string
		args  string
	}{
		{"exec_command", codexTools(), "function_call", "exec_command", `{"cmd":"printf '%s' 'MARK-t1' > 'outpost-MARK-t1.txt'"}`},
		{"shell", []any{map[string]any{"type": "function", "name": "shell"}}, "function_call", "shell",
			`{"command":["bash","-lc","printf '%s' 'MARK-t1' > 'outpost-MARK-t1.txt'"]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, evs, _ := postResponses(t, srv, map[string]any{"model": "m", "stream": true, "tools": tc.tools,
				"input": []any{userItem("write MARK-t1")}})
			done := evs[len(evs)-1].data["response"].(map[string]any)["output"].([]any)
			call := done[len(done)-1].(map[string]any)
			assert.Equal(t, tc.item, call["type"])
			assert.Equal(t, tc.tool, call["name"])
			assert.JSONEq(t, tc.args, call["arguments"].(string))
			assert.NotEmpty(t, call["call_id"])
		})
	}
	// Code mode: only the exec custom tool (namespaced, in an additional_tools
	// input item) is offered; the call is JavaScript calling exec_command.
	_, evs, _ := postResponses(t, srv, map[string]any{"model": "m", "stream": true, "input": []any{
		map[string]any{"type": "additional_tools", "tools": []any{map[string]any{"type": "namespace", "name": "functions",
			"tools": []any{map[string]any{"type": "custom", "name": "exec"}}}}},
		userItem("write MARK-t2")}})
	done := evs[len(evs)-1].data["response"].(map[string]any)["output"].([]any)
	call := done[len(done)-1].(map[string]any)
	assert.Equal(t, "custom_tool_call", call["type"])
	assert.Equal(t, "exec", call["name"])
	assert.Contains(t, call["input"], `tools.exec_command({cmd: "printf '%s' 'MARK-t2' > 'outpost-MARK-t2.txt'"})`)

	// With the tool's output sent back, the turn closes.
	_, evs, _ = postResponses(t, srv, map[string]any{"model": "m", "stream": true, "tools": codexTools(), "input": []any{
		userItem("write MARK-t1"),
		map[string]any{"type": "function_call", "call_id": "call_1", "name": "exec_command", "arguments": "{}"},
		map[string]any{"type": "function_call_output", "call_id": "call_1", "output": "Process exited with code 0"},
	}})
	done = evs[len(evs)-1].data["response"].(map[string]any)["output"].([]any)
	msg := done[len(done)-1].(map[string]any)
	assert.Equal(t, "message", msg["type"])
	assert.Contains(t, msg["content"].([]any)[0].(map[string]any)["text"], "outpost tool done: wrote outpost-MARK-t1.txt.")
}

func TestResponsesErrors(t *testing.T) {
	reset := time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)
	now := reset.Add(-3 * time.Hour)
	srv := newServer(t, outposttest.WithQuotaReset(reset), outposttest.WithClock(func() time.Time { return now }),
		outposttest.WithRetryAfter(2*time.Second))
	for _, tc := range []struct {
		sc     outposttest.Scenario
		status int
		typ    string
		check  func(t *testing.T, resp *http.Response, e map[string]any)
	}{
		{outposttest.ScenarioRateLimit, 429, "rate_limit_exceeded", func(t *testing.T, resp *http.Response, _ map[string]any) {
			assert.Equal(t, "2", resp.Header.Get("retry-after"))
		}},
		{outposttest.ScenarioQuota, 429, "usage_limit_reached", func(t *testing.T, resp *http.Response, e map[string]any) {
			assert.InDelta(t, reset.Unix(), e["resets_at"], 0)
			assert.InDelta(t, 3*3600, e["resets_in_seconds"], 0)
			assert.Equal(t, "plus", e["plan_type"])
			assert.Equal(t, "100", resp.Header.Get("x-codex-primary-used-percent"))
			assert.Empty(t, resp.Header.Get("anthropic-ratelimit-unified-status"))
		}},
		{outposttest.ScenarioCredits, 429, "insufficient_quota", nil},
		{outposttest.ScenarioSpendLimit, 429, "insufficient_quota", nil},
		{outposttest.ScenarioOverloaded, 503, "server_error", nil},
		{outposttest.ScenarioUnavailable, 503, "server_error", nil},
		{outposttest.ScenarioServerError, 500, "server_error", nil},
		{outposttest.ScenarioUnauthorized, 401, "invalid_request_error", func(t *testing.T, _ *http.Response, e map[string]any) {
			assert.Equal(t, "invalid_api_key", e["code"])
		}},
		{outposttest.ScenarioInsufficientQuota, 429, "insufficient_quota", func(t *testing.T, _ *http.Response, e map[string]any) {
			assert.Equal(t, "insufficient_quota", e["code"])
			assert.Equal(t, outposttest.InsufficientQuotaText, e["message"])
		}},
		{outposttest.ScenarioOrgRateLimit, 429, "tokens", func(t *testing.T, resp *http.Response, e map[string]any) {
			assert.Equal(t, "rate_limit_exceeded", e["code"])
			assert.Equal(t, "2", resp.Header.Get("retry-after"))
			assert.Contains(t, e["message"], "Rate limit reached for m in organization org-outposttest on tokens per min (TPM)")
			assert.Contains(t, e["message"], "Please try again in 2s.")
		}},
	} {
		t.Run(string(tc.sc), func(t *testing.T) {
			resp, _, body := postResponses(t, srv, map[string]any{"model": "m", "stream": true, "tools": codexTools(),
				"input": []any{userItem("x " + outposttest.Directive(tc.sc))}})
			assert.Equal(t, tc.status, resp.StatusCode)
			e := body["error"].(map[string]any)
			assert.Equal(t, tc.typ, e["type"])
			assert.NotEmpty(t, e["message"])
			if tc.check != nil {
				tc.check(t, resp, e)
			}
		})
	}
	resp, _, body := postResponses(t, srv, map[string]any{"model": "m", "stream": true, "tools": codexTools(),
		"input": []any{userItem("x [[outpost:scenario=nope]]")}})
	assert.Equal(t, 400, resp.StatusCode)
	assert.Contains(t, body["error"].(map[string]any)["message"], "unknown scenario")
	resp, _, _ = postResponses(t, srv, map[string]any{"stream": true})
	assert.Equal(t, 400, resp.StatusCode)
}

func TestResponsesWebSocketRefused(t *testing.T) {
	srv := newServer(t)
	req, err := http.NewRequest(http.MethodGet, srv.URL()+"/v1/responses", nil)
	require.NoError(t, err)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "websocket")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	_ = resp.Body.Close()
	assert.Equal(t, http.StatusUpgradeRequired, resp.StatusCode)
	assert.Equal(t, "websocket", srv.Requests()[0].Endpoint)
}

func TestResponsesHangReleasedByClose(t *testing.T) {
	srv, err := outposttest.NewServer(outposttest.WithScenario(outposttest.ScenarioHang))
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() {
		resp, err := http.Post(srv.URL()+"/v1/responses", "application/json",
			strings.NewReader(`{"model":"m","stream":true,"input":"hi"}`))
		if err == nil {
			_ = resp.Body.Close()
		}
		done <- err
	}()
	require.Eventually(t, func() bool { return len(srv.Requests()) == 1 }, 5*time.Second, 10*time.Millisecond)
	require.NoError(t, srv.Close())
	select {
	case err := <-done:
		assert.Error(t, err, "a released hang aborts the connection")
	case <-time.After(5 * time.Second):
		t.Fatal("hang not released by Close")
	}
}

func TestCodexArgs(t *testing.T) {
	srv := newServer(t)
	args := outposttest.CodexArgs(srv, 0)
	assert.Contains(t, args, `model_providers.outposttest.base_url="`+srv.URL()+`/v1"`)
	assert.Contains(t, args, "model_providers.outposttest.stream_max_retries=0")
	assert.Equal(t, map[string]string{outposttest.CodexKeyEnv: outposttest.PlaceholderKey}, outposttest.CodexEnv(srv))
	for _, a := range args {
		assert.NotContains(t, a, outposttest.PlaceholderKey)
	}
}
