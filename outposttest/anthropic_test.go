package outposttest_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/outposttest"
)

func newServer(t *testing.T, opts ...outposttest.Option) *outposttest.Server {
	t.Helper()
	srv, err := outposttest.NewServer(opts...)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, srv.Close()) })
	return srv
}

// msg builds a request message; content is a string or a block list.
func msg(role string, content any) map[string]any {
	return map[string]any{"role": role, "content": content}
}

func text(s string) map[string]any { return map[string]any{"type": "text", "text": s} }

func body(stream bool, msgs ...map[string]any) map[string]any {
	return map[string]any{
		"model":      "claude-opus-5-5",
		"max_tokens": 1024,
		"stream":     stream,
		"tools":      []any{map[string]any{"name": "Bash", "input_schema": map[string]any{"type": "object"}}},
		"messages":   msgs,
	}
}

func post(t *testing.T, srv *outposttest.Server, path string, b any) *http.Response {
	t.Helper()
	return postCtx(t, context.Background(), srv.URL()+path, b)
}

func postCtx(t *testing.T, ctx context.Context, url string, b any) *http.Response {
	t.Helper()
	raw, err := json.Marshal(b)
	require.NoError(t, err)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(raw))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Api-Key", "sk-secret-value")
	req.Header.Set("Authorization", "Bearer secret-token")
	req.Header.Set("Anthropic-Version", "2023-06-01")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	t.Cleanup(func() { _ = resp.Body.Close() })
	return resp
}

// event is one decoded SSE event.
type event struct {
	name string
	data map[string]any
}

// readSSE parses a stream strictly: every event has one "event:" and one
// "data:" line, a blank line after, and data.type equal to the event name.
func readSSE(t *testing.T, r io.Reader) []event {
	t.Helper()
	var out []event
	sc := bufio.NewScanner(r)
	var cur event
	var haveData bool
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			require.Empty(t, cur.name, "two event lines")
			cur.name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			require.False(t, haveData, "two data lines")
			require.NoError(t, json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &cur.data))
			haveData = true
		case line == "":
			require.NotEmpty(t, cur.name)
			require.True(t, haveData)
			require.Equal(t, cur.name, cur.data["type"])
			out = append(out, cur)
			cur, haveData = event{}, false
		default:
			t.Fatalf("unexpected SSE line %q", line)
		}
	}
	require.NoError(t, sc.Err())
	require.Empty(t, cur.name, "unterminated event")
	return out
}

// message is an assistant message rebuilt from a stream.
type message struct {
	id         string
	blocks     []map[string]any // text blocks get "text"; tool_use blocks "input" (parsed)
	stopReason string
	usageStart map[string]any
	usageEnd   map[string]any
}

// assemble checks the event grammar of a Messages stream and rebuilds the message.
func assemble(t *testing.T, evs []event) message {
	t.Helper()
	require.GreaterOrEqual(t, len(evs), 4)
	require.Equal(t, "message_start", evs[0].name)
	require.Equal(t, "message_delta", evs[len(evs)-2].name)
	require.Equal(t, "message_stop", evs[len(evs)-1].name)
	start := evs[0].data["message"].(map[string]any)
	m := message{id: start["id"].(string), usageStart: start["usage"].(map[string]any)}
	assert.Equal(t, "assistant", start["role"])
	assert.Empty(t, start["content"])
	var partial []string
	open := -1
	for _, e := range evs[1 : len(evs)-2] {
		switch e.name {
		case "ping":
		case "content_block_start":
			require.Equal(t, -1, open, "block started inside a block")
			idx := int(e.data["index"].(float64))
			require.Equal(t, len(m.blocks), idx)
			open = idx
			cb := e.data["content_block"].(map[string]any)
			m.blocks = append(m.blocks, cb)
			partial = append(partial, "")
		case "content_block_delta":
			require.Equal(t, open, int(e.data["index"].(float64)))
			d := e.data["delta"].(map[string]any)
			switch d["type"] {
			case "text_delta":
				require.Equal(t, "text", m.blocks[open]["type"])
				m.blocks[open]["text"] = m.blocks[open]["text"].(string) + d["text"].(string)
			case "input_json_delta":
				require.Equal(t, "tool_use", m.blocks[open]["type"])
				partial[open] += d["partial_json"].(string)
			default:
				t.Fatalf("unknown delta %v", d["type"])
			}
		case "content_block_stop":
			require.Equal(t, open, int(e.data["index"].(float64)))
			if m.blocks[open]["type"] == "tool_use" {
				var in map[string]any
				require.NoError(t, json.Unmarshal([]byte(partial[open]), &in))
				m.blocks[open]["input"] = in
			}
			open = -1
		default:
			t.Fatalf("unexpected event %q", e.name)
		}
	}
	require.Equal(t, -1, open, "unclosed block")
	delta := evs[len(evs)-2].data
	m.stopReason = delta["delta"].(map[string]any)["stop_reason"].(string)
	m.usageEnd = delta["usage"].(map[string]any)
	return m
}

func streamMessage(t *testing.T, srv *outposttest.Server, msgs ...map[string]any) message {
	t.Helper()
	resp := post(t, srv, "/v1/messages", body(true, msgs...))
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "text/event-stream; charset=utf-8", resp.Header.Get("Content-Type"))
	assert.NotEmpty(t, resp.Header.Get("request-id"))
	return assemble(t, readSSE(t, resp.Body))
}

func finalText(m message) string {
	var parts []string
	for _, b := range m.blocks {
		if b["type"] == "text" {
			parts = append(parts, b["text"].(string))
		}
	}
	return strings.Join(parts, "")
}

func TestOKEchoesMarkersAndRemembersEarlierTurns(t *testing.T) {
	srv := newServer(t)
	m := streamMessage(t, srv, msg("user", "please reply MARK-abc123"))
	assert.Equal(t, "end_turn", m.stopReason)
	assert.Equal(t, "outpost ok: MARK-abc123.", finalText(m))

	m = streamMessage(t, srv,
		msg("user", []any{text("<system-reminder>x</system-reminder>"), text("first MARK-1")}),
		msg("assistant", []any{text("outpost ok: MARK-1.")}),
		msg("user", []any{text("second MARK-2 and MARK-3")}),
		msg("assistant", []any{text("outpost ok: MARK-2 MARK-3.")}),
		msg("user", []any{text("third MARK-4")}),
		msg("system", []any{text("# Environment MARK-ignored")}),
	)
	assert.Equal(t, "outpost ok: MARK-4. remembered: MARK-1 MARK-2 MARK-3", finalText(m))

	m = streamMessage(t, srv, msg("user", "no marker"))
	assert.Equal(t, "outpost ok.", finalText(m))
}

func TestStreamUsageIsRealistic(t *testing.T) {
	srv := newServer(t)
	cached := func(s string) map[string]any {
		return map[string]any{"type": "text", "text": s, "cache_control": map[string]any{"type": "ephemeral"}}
	}
	m := streamMessage(t, srv, msg("user", []any{text(strings.Repeat("x", 4000) + " MARK-u")}), msg("system", []any{cached("env")}))
	for _, k := range []string{"input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "output_tokens"} {
		require.Contains(t, m.usageStart, k)
		require.Contains(t, m.usageEnd, k)
	}
	assert.InDelta(t, 3, m.usageStart["input_tokens"], 0)
	assert.Greater(t, m.usageStart["cache_creation_input_tokens"], 900.0)
	assert.InDelta(t, 0, m.usageStart["cache_read_input_tokens"], 0)
	assert.InDelta(t, 1, m.usageStart["output_tokens"], 0)
	assert.Greater(t, m.usageEnd["output_tokens"], 1.0)
	assert.Contains(t, m.usageStart, "cache_creation")
	assert.Equal(t, "standard", m.usageStart["service_tier"])

	m = streamMessage(t, srv,
		msg("user", []any{text(strings.Repeat("x", 4000) + " MARK-u")}),
		msg("assistant", []any{cached("outpost ok")}),
		msg("user", "again"))
	assert.Greater(t, m.usageEnd["cache_read_input_tokens"], 900.0)
	assert.InDelta(t, 0, m.usageEnd["cache_creation_input_tokens"], 0)
}

func TestToolCallThenFinalText(t *testing.T) {
	srv := newServer(t, outposttest.WithScenario(outposttest.ScenarioTool))
	prompt := msg("user", "write MARK-t1 please")
	m := streamMessage(t, srv, prompt)
	require.Equal(t, "tool_use", m.stopReason)
	require.Len(t, m.blocks, 2)
	assert.Equal(t, "text", m.blocks[0]["type"])
	tool := m.blocks[1]
	assert.Equal(t, "Bash", tool["name"])
	id, _ := tool["id"].(string)
	assert.True(t, strings.HasPrefix(id, "toolu_"))
	input := tool["input"].(map[string]any)
	assert.Equal(t, "printf '%s' 'MARK-t1' > 'outpost-MARK-t1.txt'", input["command"])
	assert.Equal(t, outposttest.ToolCommand("MARK-t1"), input["command"])
	name, content := outposttest.ToolFile("MARK-t1")
	assert.Equal(t, "outpost-MARK-t1.txt", name)
	assert.Equal(t, "MARK-t1", content)

	m = streamMessage(t, srv, prompt,
		msg("assistant", []any{m.blocks[0], map[string]any{"type": "tool_use", "id": id, "name": "Bash", "input": input}}),
		msg("user", []any{map[string]any{"type": "tool_result", "tool_use_id": id, "content": "(Bash completed with no output)"},
			text("<system-reminder>noise</system-reminder>")}),
	)
	assert.Equal(t, "end_turn", m.stopReason)
	assert.Contains(t, finalText(m), "outpost tool done: wrote outpost-MARK-t1.txt.")
	assert.Contains(t, finalText(m), "MARK-t1")

	name, content = outposttest.ToolFile("")
	assert.Equal(t, "outpost-tool.txt", name)
	assert.Equal(t, "outpost", content)
}

type apiError struct {
	Type  string `json:"type"`
	Error struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
	RequestID string `json:"request_id"`
}

func decodeError(t *testing.T, resp *http.Response) apiError {
	t.Helper()
	assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	var e apiError
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&e))
	assert.Equal(t, "error", e.Type)
	assert.True(t, strings.HasPrefix(e.RequestID, "req_"))
	assert.Equal(t, e.RequestID, resp.Header.Get("request-id"))
	return e
}

func TestErrorScenarios(t *testing.T) {
	reset := time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)
	cases := []struct {
		scenario outposttest.Scenario
		status   int
		kind     string
		message  string
		header   map[string]string
	}{
		{outposttest.ScenarioRateLimit, 429, "rate_limit_error", "This request would exceed your account's rate limit. Please try again later.",
			map[string]string{"retry-after": "3"}},
		{outposttest.ScenarioQuota, 429, "rate_limit_error", "This request would exceed your account's rate limit. Please try again later.",
			map[string]string{
				"anthropic-ratelimit-unified-status":               "rejected",
				"anthropic-ratelimit-unified-reset":                fmt.Sprint(reset.Unix()),
				"anthropic-ratelimit-unified-representative-claim": "five_hour",
				"anthropic-ratelimit-unified-5h-status":            "rejected",
			}},
		{outposttest.ScenarioSpendLimit, 400, "invalid_request_error",
			"You have reached your specified API usage limits. You will regain access on 2026-04-01 at 00:00 UTC.", nil},
		{outposttest.ScenarioCredits, 400, "invalid_request_error",
			"Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits.", nil},
		{outposttest.ScenarioInsufficientQuota, 400, "invalid_request_error",
			"Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits.", nil},
		{outposttest.ScenarioOrgRateLimit, 429, "rate_limit_error",
			"This request would exceed your organization's rate limit of 30,000 input tokens per minute (org: 5d0c4b8e-7a43-4f1e-9d6b-2f8a1c3e0b71, model: claude-opus-5-5). " +
				"For details, refer to: https://docs.claude.com/en/api/rate-limits. You can see the response headers for current usage. " +
				"Please reduce the prompt length or the maximum tokens requested, or try again later. " +
				"You may also contact sales at https://claude.com/contact-sales to discuss your options for a rate limit increase.",
			map[string]string{"retry-after": "3", "anthropic-ratelimit-input-tokens-limit": "30000",
				"anthropic-ratelimit-input-tokens-remaining": "0"}},
		{outposttest.ScenarioOverloaded, 529, "overloaded_error", "Overloaded", nil},
		{outposttest.ScenarioUnavailable, 503, "api_error", "Service Unavailable", nil},
		{outposttest.ScenarioServerError, 500, "api_error", "Internal server error", nil},
		{outposttest.ScenarioUnauthorized, 401, "authentication_error", "Invalid bearer token", nil},
	}
	for _, tc := range cases {
		t.Run(string(tc.scenario), func(t *testing.T) {
			t.Parallel()
			srv := newServer(t, outposttest.WithScenario(tc.scenario),
				outposttest.WithRetryAfter(2500*time.Millisecond), outposttest.WithQuotaReset(reset))
			for _, stream := range []bool{true, false} {
				resp := post(t, srv, "/v1/messages", body(stream, msg("user", "hi MARK-e")))
				require.Equal(t, tc.status, resp.StatusCode)
				e := decodeError(t, resp)
				assert.Equal(t, tc.kind, e.Error.Type)
				assert.Equal(t, tc.message, e.Error.Message)
				for k, v := range tc.header {
					assert.Equal(t, v, resp.Header.Get(k), k)
				}
			}
			reqs := srv.ModelRequests()
			require.Len(t, reqs, 2)
			assert.Equal(t, tc.scenario, reqs[0].Scenario)
			assert.Equal(t, tc.status, reqs[0].Status)
		})
	}
}

func TestQuotaWindowAndWarningHeaders(t *testing.T) {
	reset := time.Now().Add(3 * time.Hour).Truncate(time.Second)
	srv := newServer(t, outposttest.WithScenario(outposttest.ScenarioQuota),
		outposttest.WithQuotaWindow("seven_day"), outposttest.WithQuotaReset(reset))
	resp := post(t, srv, "/v1/messages", body(true, msg("user", "hi")))
	require.Equal(t, 429, resp.StatusCode)
	assert.Equal(t, "seven_day", resp.Header.Get("anthropic-ratelimit-unified-representative-claim"))
	assert.Equal(t, "rejected", resp.Header.Get("anthropic-ratelimit-unified-7d-status"))
	assert.Equal(t, fmt.Sprint(reset.Unix()), resp.Header.Get("anthropic-ratelimit-unified-7d-reset"))
	assert.InDelta(t, 3*3600, atoi(t, resp.Header.Get("retry-after")), 5)

	require.NoError(t, srv.SetScenario(outposttest.ScenarioQuotaWarning))
	resp = post(t, srv, "/v1/messages", body(true, msg("user", "hi MARK-w")))
	require.Equal(t, 200, resp.StatusCode)
	assert.Equal(t, "allowed_warning", resp.Header.Get("anthropic-ratelimit-unified-status"))
	assert.Equal(t, "outpost ok: MARK-w.", finalText(assemble(t, readSSE(t, resp.Body))))

	require.NoError(t, srv.SetScenario(outposttest.ScenarioOK))
	resp = post(t, srv, "/v1/messages", body(true, msg("user", "hi")))
	assert.Equal(t, "allowed", resp.Header.Get("anthropic-ratelimit-unified-status"))
}

func atoi(t *testing.T, s string) float64 {
	t.Helper()
	var n int
	_, err := fmt.Sscan(s, &n)
	require.NoError(t, err)
	return float64(n)
}

func TestDefaultQuotaResetIsNextMidnightUTC(t *testing.T) {
	now := time.Date(2026, 3, 14, 15, 9, 26, 0, time.UTC)
	srv := newServer(t, outposttest.WithScenario(outposttest.ScenarioSpendLimit),
		outposttest.WithClock(func() time.Time { return now }))
	resp := post(t, srv, "/v1/messages", body(true, msg("user", "hi")))
	e := decodeError(t, resp)
	assert.Contains(t, e.Error.Message, "You will regain access on 2026-03-15 at 00:00 UTC.")
	assert.Equal(t, now, srv.Requests()[0].Time)
}

func TestDirectiveOverridesScenario(t *testing.T) {
	srv := newServer(t)
	resp := post(t, srv, "/v1/messages", body(true, msg("user", "hi "+outposttest.Directive(outposttest.ScenarioRateLimit)+" MARK-d")))
	require.Equal(t, 429, resp.StatusCode)
	assert.Equal(t, "1", resp.Header.Get("retry-after"))

	// Only the current user turn counts: an old directive does not stick.
	m := streamMessage(t, srv,
		msg("user", "[[outpost:scenario=overloaded]] MARK-1"),
		msg("assistant", "failed"),
		msg("user", "MARK-2"))
	assert.Equal(t, "outpost ok: MARK-2. remembered: MARK-1", finalText(m))

	// The directive of the prompt still applies after tool results.
	m = streamMessage(t, srv, msg("user", "[[outpost:scenario=tool]] MARK-x"))
	assert.Equal(t, "tool_use", m.stopReason)

	resp = post(t, srv, "/v1/messages", body(true, msg("user", "[[outpost:scenario=bogus]]")))
	require.Equal(t, 400, resp.StatusCode)
	e := decodeError(t, resp)
	assert.Equal(t, "invalid_request_error", e.Error.Type)
	assert.Contains(t, e.Error.Message, `unknown scenario "bogus"`)

	reqs := srv.Requests()
	require.Len(t, reqs, 4)
	assert.Equal(t, outposttest.ScenarioRateLimit, reqs[0].Directive)
	assert.Equal(t, outposttest.ScenarioRateLimit, reqs[0].Scenario)
	assert.Empty(t, reqs[1].Directive)
	assert.Equal(t, outposttest.ScenarioOK, reqs[1].Scenario)
}

func TestSequenceThenFallback(t *testing.T) {
	srv := newServer(t, outposttest.WithSequence(outposttest.ScenarioOverloaded, outposttest.ScenarioUnavailable))
	// A directive request and an auxiliary request consume nothing.
	m := streamMessage(t, srv, msg("user", "[[outpost:scenario=ok]] MARK-a"))
	assert.Equal(t, "outpost ok: MARK-a.", finalText(m))
	aux := map[string]any{"model": "claude-haiku-4-5", "max_tokens": 32, "messages": []any{msg("user", "title for MARK-a")}}
	resp := post(t, srv, "/v1/messages", aux)
	require.Equal(t, 200, resp.StatusCode)

	var statuses []int
	for range 4 {
		resp := post(t, srv, "/v1/messages", body(true, msg("user", "hi")))
		_, _ = io.Copy(io.Discard, resp.Body)
		statuses = append(statuses, resp.StatusCode)
	}
	assert.Equal(t, []int{529, 503, 200, 200}, statuses)

	require.NoError(t, srv.SetSequence(outposttest.ScenarioUnauthorized))
	require.NoError(t, srv.SetScenario(outposttest.ScenarioRateLimit))
	assert.Equal(t, outposttest.ScenarioRateLimit, srv.Scenario())
	resp = post(t, srv, "/v1/messages", body(true, msg("user", "hi")))
	assert.Equal(t, 401, resp.StatusCode)
	resp = post(t, srv, "/v1/messages", body(true, msg("user", "hi")))
	assert.Equal(t, 429, resp.StatusCode)

	assert.Error(t, srv.SetScenario("nope"))
	assert.Error(t, srv.SetSequence("nope"))
}

func TestAuxiliaryRequestsIgnoreScenario(t *testing.T) {
	srv := newServer(t, outposttest.WithScenario(outposttest.ScenarioRateLimit))
	aux := map[string]any{"model": "claude-haiku-4-5", "max_tokens": 32,
		"messages": []any{msg("user", "[[outpost:scenario=overloaded]] title for MARK-a")}}
	resp := post(t, srv, "/v1/messages", aux)
	require.Equal(t, 200, resp.StatusCode)
	var out struct {
		Type       string `json:"type"`
		Role       string `json:"role"`
		Model      string `json:"model"`
		StopReason string `json:"stop_reason"`
		Content    []struct {
			Type, Text string
		} `json:"content"`
		Usage map[string]any `json:"usage"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	assert.Equal(t, "message", out.Type)
	assert.Equal(t, "claude-haiku-4-5", out.Model)
	assert.Equal(t, "end_turn", out.StopReason)
	require.Len(t, out.Content, 1)
	assert.Equal(t, "outpost ok: MARK-a.", out.Content[0].Text)
	assert.Contains(t, out.Usage, "output_tokens")
	reqs := srv.Requests()
	require.Len(t, reqs, 1)
	assert.True(t, reqs[0].Auxiliary)
	assert.Empty(t, reqs[0].Scenario)
	assert.Empty(t, srv.ModelRequests())
}

func TestNonStreamingToolAndOK(t *testing.T) {
	srv := newServer(t, outposttest.WithScenario(outposttest.ScenarioTool))
	resp := post(t, srv, "/v1/messages", body(false, msg("user", "MARK-n")))
	require.Equal(t, 200, resp.StatusCode)
	var out struct {
		StopReason string           `json:"stop_reason"`
		Content    []map[string]any `json:"content"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	assert.Equal(t, "tool_use", out.StopReason)
	require.Len(t, out.Content, 2)
	assert.Equal(t, "Bash", out.Content[1]["name"])
	assert.Equal(t, outposttest.ToolCommand("MARK-n"), out.Content[1]["input"].(map[string]any)["command"])
}

func TestRequestLog(t *testing.T) {
	srv := newServer(t)
	streamMessage(t, srv,
		msg("user", []any{text("first MARK-1")}),
		msg("assistant", []any{text("ok"), map[string]any{"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": map[string]any{"command": "ls"}}}),
		msg("user", []any{map[string]any{"type": "tool_result", "tool_use_id": "toolu_1", "is_error": true,
			"content": []any{text("boom")}}}),
	)
	reqs := srv.Requests()
	require.Len(t, reqs, 1)
	r := reqs[0]
	assert.Equal(t, http.MethodPost, r.Method)
	assert.Equal(t, "/v1/messages", r.Path)
	assert.Equal(t, "anthropic", r.API)
	assert.Equal(t, "messages", r.Endpoint)
	assert.Equal(t, "claude-opus-5-5", r.Model)
	assert.True(t, r.Stream)
	assert.Equal(t, 1024, r.MaxTokens)
	assert.Equal(t, []string{"Bash"}, r.Tools)
	assert.Equal(t, 200, r.Status)
	assert.Equal(t, outposttest.Redacted, r.Header.Get("X-Api-Key"))
	assert.Equal(t, outposttest.Redacted, r.Header.Get("Authorization"))
	assert.Equal(t, "2023-06-01", r.Header.Get("Anthropic-Version"))
	require.Len(t, r.Messages, 3)
	assert.Equal(t, "user", r.Messages[0].Role)
	assert.Equal(t, "first MARK-1", r.Messages[0].Text())
	assert.Equal(t, outposttest.Content{Type: "tool_use", ToolUseID: "toolu_1", ToolName: "Bash", ToolInput: `{"command":"ls"}`},
		r.Messages[1].Content[1])
	assert.Equal(t, outposttest.Content{Type: "tool_result", ToolUseID: "toolu_1", Text: "boom", IsError: true},
		r.Messages[2].Content[0])
	assert.Equal(t, "first MARK-1", r.UserText())

	// The log is a copy.
	reqs[0].Messages[0].Content[0].Text = "changed"
	reqs[0].Header.Set("X-Api-Key", "x")
	assert.Equal(t, "first MARK-1", srv.Requests()[0].Messages[0].Text())
	assert.Equal(t, outposttest.Redacted, srv.Requests()[0].Header.Get("X-Api-Key"))

	srv.ResetRequests()
	assert.Empty(t, srv.Requests())
}

func TestOtherEndpoints(t *testing.T) {
	srv := newServer(t)
	resp := post(t, srv, "/v1/messages/count_tokens", body(false, msg("user", strings.Repeat("y", 400))))
	require.Equal(t, 200, resp.StatusCode)
	var ct struct {
		InputTokens int `json:"input_tokens"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&ct))
	assert.Greater(t, ct.InputTokens, 100)

	for _, tc := range []struct {
		method, path string
		status       int
	}{
		{http.MethodHead, "/api/hello", 200},
		{http.MethodGet, "/", 200},
		{http.MethodGet, "/v1/models", 200},
		{http.MethodGet, "/v1/models/claude-opus-5-5", 200},
		{http.MethodGet, "/v1/nothing", 404},
		{http.MethodGet, "/elsewhere", 404},
		{http.MethodGet, "/v1/messages", 404},
	} {
		req, err := http.NewRequest(tc.method, srv.URL()+tc.path, nil)
		require.NoError(t, err)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		_ = resp.Body.Close()
		assert.Equal(t, tc.status, resp.StatusCode, tc.path)
	}

	resp = post(t, srv, "/v1/messages", map[string]any{"messages": "not a list"})
	require.Equal(t, 400, resp.StatusCode)
	assert.Equal(t, "invalid_request_error", decodeError(t, resp).Error.Type)

	reqs := srv.Requests()
	assert.Equal(t, "count_tokens", reqs[0].Endpoint)
	assert.Empty(t, srv.ModelRequests())
}

func TestHangReleasedByClientAndClose(t *testing.T) {
	srv := newServer(t, outposttest.WithScenario(outposttest.ScenarioHang))

	// Released by the client going away.
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	raw, _ := json.Marshal(body(true, msg("user", "hi")))
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL()+"/v1/messages", bytes.NewReader(raw))
	require.NoError(t, err)
	_, err = http.DefaultClient.Do(req)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Eventually(t, func() bool { return len(srv.Requests()) == 1 }, 2*time.Second, 10*time.Millisecond)

	// Released by Close.
	errc := make(chan error, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, srv.URL()+"/v1/messages", bytes.NewReader(raw))
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			_ = resp.Body.Close()
		}
		errc <- err
	}()
	require.Eventually(t, func() bool { return len(srv.Requests()) == 2 }, 2*time.Second, 5*time.Millisecond)
	select {
	case <-errc:
		t.Fatal("hang answered before Close")
	case <-time.After(50 * time.Millisecond):
	}
	require.NoError(t, srv.Close())
	select {
	case err := <-errc:
		require.Error(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not release the hanging request")
	}
	require.NoError(t, srv.Close(), "Close is idempotent")
	assert.Equal(t, 0, srv.Requests()[1].Status)
}

func TestHandlerHangReleasedByCancelAndClose(t *testing.T) {
	srv, err := outposttest.NewUnstartedServer(outposttest.WithScenario(outposttest.ScenarioHang))
	require.NoError(t, err)
	assert.Empty(t, srv.URL())
	raw, _ := json.Marshal(body(true, msg("user", "hi")))

	serve := func(ctx context.Context) chan struct{} {
		done := make(chan struct{})
		go func() {
			defer close(done)
			defer func() {
				assert.Equal(t, http.ErrAbortHandler, recover(), "a released hang aborts the response")
			}()
			req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/v1/messages", bytes.NewReader(raw))
			srv.Handler().ServeHTTP(httptest.NewRecorder(), req)
		}()
		return done
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := serve(ctx)
	time.Sleep(20 * time.Millisecond)
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("client cancel did not release the handler")
	}

	done = serve(context.Background())
	time.Sleep(20 * time.Millisecond)
	require.NoError(t, srv.Close())
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not release the handler")
	}
	assert.Error(t, srv.Start(), "a closed server does not start")
}

func TestSlowStreamsWithDelay(t *testing.T) {
	const delay = 30 * time.Millisecond
	srv := newServer(t, outposttest.WithScenario(outposttest.ScenarioSlow), outposttest.WithChunkDelay(delay))
	start := time.Now()
	resp := post(t, srv, "/v1/messages", body(true, msg("user", "MARK-slow")))
	require.Equal(t, 200, resp.StatusCode)
	evs := readSSE(t, resp.Body)
	elapsed := time.Since(start)
	assert.Equal(t, "outpost ok: MARK-slow.", finalText(assemble(t, evs)))
	assert.GreaterOrEqual(t, elapsed, time.Duration(len(evs))*delay)

	// A client that goes away mid-stream releases the handler.
	srv2 := newServer(t, outposttest.WithScenario(outposttest.ScenarioSlow), outposttest.WithChunkDelay(time.Hour))
	ctx, cancel := context.WithCancel(context.Background())
	resp = postCtx(t, ctx, srv2.URL()+"/v1/messages", body(true, msg("user", "x")))
	require.Equal(t, 200, resp.StatusCode, "headers come at once")
	cancel()
	_, err := io.ReadAll(resp.Body)
	require.Error(t, err)
}

func TestConcurrentRequestsConsumeSequenceOnce(t *testing.T) {
	const n = 40
	steps := make([]outposttest.Scenario, n/2)
	for i := range steps {
		steps[i] = outposttest.ScenarioOverloaded
	}
	srv := newServer(t, outposttest.WithSequence(steps...))
	var wg sync.WaitGroup
	var mu sync.Mutex
	count := map[int]int{}
	for i := range n {
		wg.Go(func() {
			raw, _ := json.Marshal(body(i%2 == 0, msg("user", fmt.Sprintf("MARK-%d", i))))
			resp, err := http.Post(srv.URL()+"/v1/messages", "application/json", bytes.NewReader(raw))
			if !assert.NoError(t, err) {
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			mu.Lock()
			count[resp.StatusCode]++
			mu.Unlock()
			_ = srv.Requests()
			_ = srv.SetScenario(outposttest.ScenarioOK)
		})
	}
	wg.Wait()
	assert.Equal(t, map[int]int{529: n / 2, 200: n / 2}, count)
	assert.Len(t, srv.Requests(), n)
}

func TestOptionsValidate(t *testing.T) {
	for name, opt := range map[string]outposttest.Option{
		"scenario":    outposttest.WithScenario("nope"),
		"sequence":    outposttest.WithSequence(outposttest.ScenarioOK, "nope"),
		"addr":        outposttest.WithAddr("0.0.0.0:0"),
		"addr format": outposttest.WithAddr("nonsense"),
		"delay":       outposttest.WithChunkDelay(-1),
		"retry after": outposttest.WithRetryAfter(-1),
		"clock":       outposttest.WithClock(nil),
		"window":      outposttest.WithQuotaWindow(""),
	} {
		_, err := outposttest.NewServer(opt)
		assert.Error(t, err, name)
	}
	srv := newServer(t, outposttest.WithAddr("127.0.0.1:0"))
	assert.True(t, strings.HasPrefix(srv.URL(), "http://127.0.0.1:"))
	assert.Error(t, srv.Start(), "already started")

	s, err := outposttest.ParseScenario(" Tool ")
	require.NoError(t, err)
	assert.Equal(t, outposttest.ScenarioTool, s)
	for _, sc := range outposttest.Scenarios {
		assert.True(t, sc.Valid())
	}
}

func TestClaudeEnv(t *testing.T) {
	srv := newServer(t)
	env := outposttest.ClaudeEnv(srv)
	assert.Equal(t, srv.URL(), env["ANTHROPIC_BASE_URL"])
	assert.Equal(t, outposttest.PlaceholderKey, env["ANTHROPIC_API_KEY"])
	assert.Equal(t, "1", env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"])
	assert.Equal(t, "1", env["DISABLE_AUTOUPDATER"])
	assert.NotContains(t, env, "HOME")

	oauth := outposttest.ClaudeOAuthEnv(srv)
	assert.NotContains(t, oauth, "ANTHROPIC_API_KEY")
	assert.Equal(t, outposttest.PlaceholderOAuthToken, oauth["CLAUDE_CODE_OAUTH_TOKEN"])
}

func TestDirectiveTimesRecovers(t *testing.T) {
	srv := newServer(t)
	prompt := "retry me [[outpost:scenario=unavailable;times=2]] MARK-t"
	for range 2 {
		resp := post(t, srv, "/v1/messages", body(true, msg("user", prompt)))
		require.Equal(t, 503, resp.StatusCode)
		resp.Body.Close()
	}
	m := streamMessage(t, srv, msg("user", prompt))
	assert.Equal(t, "outpost ok: MARK-t.", finalText(m), "after two failures the outage has passed")
	// Another turn text has its own count.
	resp := post(t, srv, "/v1/messages", body(true, msg("user", "other [[outpost:scenario=unavailable;times=1]] MARK-u")))
	assert.Equal(t, 503, resp.StatusCode)
	resp.Body.Close()
}

func TestQuotaResetIn(t *testing.T) {
	var mu sync.Mutex
	now := time.Date(2026, 12, 2, 10, 0, 0, 300e6, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	srv := newServer(t, outposttest.WithScenario(outposttest.ScenarioQuota), outposttest.WithClock(clock),
		outposttest.WithQuotaReset(now.Add(time.Hour)), outposttest.WithQuotaResetIn(20*time.Second))
	resp := post(t, srv, "/v1/messages", body(true, msg("user", "hi")))
	require.Equal(t, 429, resp.StatusCode)
	// 20 s after the answer, rounded up to the header's whole second.
	assert.Equal(t, fmt.Sprint(now.Add(21*time.Second).Truncate(time.Second).Unix()), resp.Header.Get("anthropic-ratelimit-unified-reset"))
	mu.Lock()
	now = now.Add(time.Minute)
	mu.Unlock()
	resp = post(t, srv, "/v1/messages", body(true, msg("user", "again")))
	assert.Equal(t, fmt.Sprint(now.Add(21*time.Second).Truncate(time.Second).Unix()), resp.Header.Get("anthropic-ratelimit-unified-reset"),
		"each answer's reset is its own")
	_, err := outposttest.NewServer(outposttest.WithQuotaResetIn(0))
	assert.Error(t, err)
}

// TestRunDirective: the prompt scripts the shell command the agent runs,
// any text included; after the tool result the turn closes.
func TestRunDirective(t *testing.T) {
	srv := newServer(t)
	cmd := "printf '%s\\n' \"a b\" > 'out.txt' && echo ]] [[done"
	prompt := msg("user", "MARK-run "+outposttest.RunDirective(cmd))
	m := streamMessage(t, srv, prompt)
	require.Equal(t, "tool_use", m.stopReason)
	require.Len(t, m.blocks, 2)
	tool := m.blocks[1]
	assert.Equal(t, "Bash", tool["name"])
	input := tool["input"].(map[string]any)
	assert.Equal(t, cmd, input["command"])
	id, _ := tool["id"].(string)
	m = streamMessage(t, srv, prompt,
		msg("assistant", []any{m.blocks[0], map[string]any{"type": "tool_use", "id": id, "name": "Bash", "input": input}}),
		msg("user", []any{map[string]any{"type": "tool_result", "tool_use_id": id, "content": "ok"}}))
	assert.Equal(t, "end_turn", m.stopReason)
	assert.Contains(t, finalText(m), "outpost tool done: ran the command.")
}

// TestRunEachDirective: each conversation carrying the directive runs the
// next command, cycling; the follow-up after a tool result takes none.
func TestRunEachDirective(t *testing.T) {
	srv := newServer(t)
	prompt := msg("user", "MARK-each "+outposttest.RunEachDirective("echo a", "echo b"))
	var got []string
	for range 3 {
		m := streamMessage(t, srv, prompt)
		require.Equal(t, "tool_use", m.stopReason)
		tool := m.blocks[1]
		input := tool["input"].(map[string]any)
		got = append(got, input["command"].(string))
		id, _ := tool["id"].(string)
		m = streamMessage(t, srv, prompt,
			msg("assistant", []any{m.blocks[0], map[string]any{"type": "tool_use", "id": id, "name": "Bash", "input": input}}),
			msg("user", []any{map[string]any{"type": "tool_result", "tool_use_id": id, "content": "ok"}}))
		assert.Equal(t, "end_turn", m.stopReason)
		assert.Contains(t, finalText(m), "outpost tool done: ran the command.")
	}
	assert.Equal(t, []string{"echo a", "echo b", "echo a"}, got)
	// Another directive counts on its own.
	m := streamMessage(t, srv, msg("user", outposttest.RunEachDirective("echo c", "echo d")))
	assert.Equal(t, "echo c", m.blocks[1]["input"].(map[string]any)["command"])
}

// TestWriteCommand: the command writes any content to the path, making
// its directory.
func TestWriteCommand(t *testing.T) {
	dir := t.TempDir()
	content := "it's \"quoted\" $HOME `x`\nline 2\n"
	cmd := exec.Command("sh", "-c", outposttest.WriteCommand("sub dir/f'.txt", content))
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, string(out))
	b, err := os.ReadFile(filepath.Join(dir, "sub dir", "f'.txt"))
	require.NoError(t, err)
	assert.Equal(t, content, string(b))
	assert.Contains(t, outposttest.WriteDirective("a", "b"), "[[outpost:run=")
}
