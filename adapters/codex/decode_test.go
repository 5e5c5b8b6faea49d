package codex_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/adapters/adaptertest"
	"github.com/outpost-dev/outpost/adapters/codex"
	"github.com/outpost-dev/outpost/usage"
)

func decodeAll(t *testing.T, lines ...string) []adapters.Event {
	t.Helper()
	d := codex.NewDecoder()
	var evs []adapters.Event
	for _, l := range lines {
		got := d.Decode([]byte(l))
		require.NotEmpty(t, got, l)
		for _, ev := range got {
			adaptertest.CheckEvent(t, ev)
		}
		evs = append(evs, got...)
	}
	return evs
}

func kinds(evs []adapters.Event) []adapters.Kind {
	out := make([]adapters.Kind, len(evs))
	for i, e := range evs {
		out[i] = e.Kind
	}
	return out
}

// Lines captured from codex 0.169.0 (fixture tool).
func TestDecodeTurn(t *testing.T) {
	evs := decodeAll(t,
		`{"type":"thread.started","thread_id":"01a23609-93dd-7b83-b568-93ed3eb5ee5f"}`,
		`{"type":"turn.started"}`,
		`{"type":"item.completed","item":{"id":"item_0","type":"reasoning","text":"**Answering** Following the outposttest script."}}`,
		`{"type":"item.completed","item":{"id":"item_1","type":"agent_message","text":"I will write outpost-MARK-tool1.txt."}}`,
		`{"type":"item.started","item":{"id":"item_2","type":"command_execution","command":"/bin/bash -lc \"printf x > f\"","aggregated_output":"","exit_code":null,"status":"in_progress"}}`,
		`{"type":"item.completed","item":{"id":"item_2","type":"command_execution","command":"/bin/bash -lc \"printf x > f\"","aggregated_output":"","exit_code":0,"status":"completed"}}`,
		`{"type":"item.completed","item":{"id":"item_4","type":"agent_message","text":"done"}}`,
		`{"type":"turn.completed","usage":{"input_tokens":27921,"cached_input_tokens":13988,"cache_write_input_tokens":0,"output_tokens":73,"reasoning_output_tokens":16}}`,
	)
	assert.Equal(t, []adapters.Kind{adapters.KindConversation, adapters.KindRaw, adapters.KindReasoning, adapters.KindText,
		adapters.KindTool, adapters.KindToolResult, adapters.KindText, adapters.KindUsage, adapters.KindResult, adapters.KindFinished}, kinds(evs))
	assert.Equal(t, "01a23609-93dd-7b83-b568-93ed3eb5ee5f", evs[0].Conversation)
	assert.Equal(t, "shell", evs[4].Tool.Name)
	assert.JSONEq(t, `{"command":"/bin/bash -lc \"printf x > f\""}`, string(evs[4].Tool.Input))
	assert.False(t, evs[5].ToolResult.IsError)
	assert.Equal(t, &usage.Report{Scope: usage.ScopeCumulative, Usage: usage.Usage{Input: 13933, Cached: 13988,
		Output: 73, Reasoning: 16, Complete: true}}, evs[7].Usage)
	assert.Equal(t, "done", evs[8].Text)
	assert.True(t, evs[9].Finished.OK)
}

func TestDecodeFailureAndRetries(t *testing.T) {
	evs := decodeAll(t,
		`{"type":"error","message":"Reconnecting... 1/1 (unexpected status 503 Service Unavailable: Service Unavailable, url: http://127.0.0.1:8080/v1/responses)"}`,
		`{"type":"error","message":"Reconnecting... waiting for network (Connection failed: error sending request)"}`,
		`{"type":"error","message":"unexpected status 503 Service Unavailable: Service Unavailable"}`,
		`{"type":"turn.failed","error":{"message":"unexpected status 503 Service Unavailable: Service Unavailable"}}`,
	)
	assert.Equal(t, []adapters.Kind{adapters.KindRetry, adapters.KindRetry, adapters.KindWarning, adapters.KindFailure, adapters.KindFinished}, kinds(evs))
	assert.Equal(t, &adapters.RetryNotice{Attempt: 1, MaxAttempts: 1, Status: 503,
		Reason: "unexpected status 503 Service Unavailable: Service Unavailable, url: http://127.0.0.1:8080/v1/responses"}, evs[0].Retry)
	assert.Equal(t, "waiting for network: Connection failed: error sending request", evs[1].Retry.Reason)
	assert.Equal(t, 503, evs[3].Failure.Status)
	assert.False(t, evs[4].Finished.OK)
}

func TestDecodeItems(t *testing.T) {
	evs := decodeAll(t,
		`{"type":"item.completed","item":{"id":"item_0","type":"error","message":"Model metadata for `+"`x`"+` not found."}}`,
		`{"type":"item.completed","item":{"id":"item_1","type":"file_change","changes":[{"path":"/w/a.txt","kind":"add"},{"path":"/w/b.txt","kind":"delete"}],"status":"completed"}}`,
		`{"type":"item.started","item":{"id":"item_2","type":"mcp_tool_call","server":"docs","tool":"search","arguments":{"q":"x"},"status":"in_progress"}}`,
		`{"type":"item.completed","item":{"id":"item_2","type":"mcp_tool_call","server":"docs","tool":"search","arguments":{"q":"x"},"result":{"content":[{"type":"text","text":"found"}]},"status":"completed"}}`,
		`{"type":"item.completed","item":{"id":"item_3","type":"command_execution","command":"rm -rf /","aggregated_output":"","exit_code":null,"status":"declined"}}`,
		`{"type":"item.completed","item":{"id":"item_4","type":"web_search","query":"go 1.26","action":{"type":"search"}}}`,
		`{"type":"item.updated","item":{"id":"item_5","type":"todo_list","items":[{"text":"a","completed":false}]}}`,
		`not json`,
		`{"type":"turn.completed"}`,
	)
	assert.Equal(t, []adapters.Kind{adapters.KindWarning, adapters.KindFileChange, adapters.KindFileChange,
		adapters.KindTool, adapters.KindToolResult, adapters.KindTool, adapters.KindToolResult,
		adapters.KindTool, adapters.KindToolResult, adapters.KindRaw, adapters.KindRaw, adapters.KindFinished}, kinds(evs))
	assert.Equal(t, &adapters.FileChange{Path: "/w/b.txt", Change: "delete"}, evs[2].FileChange)
	assert.Equal(t, "mcp:docs/search", evs[3].Tool.Name)
	assert.Equal(t, "found", evs[4].ToolResult.Preview)
	assert.True(t, evs[6].ToolResult.IsError, "a declined command is an error result")
	assert.Equal(t, "web_search", evs[7].Tool.Name)
	var s string
	require.NoError(t, json.Unmarshal(evs[10].Raw, &s))
	assert.Equal(t, "not json", s)
}

func TestDecodePreviewBounded(t *testing.T) {
	out := strings.Repeat("é", adapters.PreviewLimit)
	line, _ := json.Marshal(map[string]any{"type": "item.completed", "item": map[string]any{
		"id": "item_0", "type": "command_execution", "command": "x", "aggregated_output": out, "exit_code": 1, "status": "failed"}})
	evs := decodeAll(t, string(line))
	require.Len(t, evs, 2)
	r := evs[1].ToolResult
	assert.LessOrEqual(t, len(r.Preview), adapters.PreviewLimit)
	assert.Equal(t, adapters.PreviewLimit, r.Characters)
	assert.True(t, r.IsError)
}

// A line the decoder does not understand keeps only a bounded preview,
// however long it is: an unknown type, a known type without what the
// decoder reads, and a line that is not JSON.
func TestDecodeLongRawLineBounded(t *testing.T) {
	pad := strings.Repeat("x", 2*adapters.RawLimit)
	for _, line := range []string{
		`{"type":"mystery","pad":"` + pad + `"}`,
		`{"type":"item.completed","item":{"id":"item_1","type":"todo_list","text":"` + pad + `"}}`,
		`not json ` + pad,
	} {
		adaptertest.CheckLongRaw(t, codex.NewDecoder(), []byte(line))
	}
}

// An MCP tool call's outcome reads the same in exec's and the app-server's
// items: the error's message wins, else the result's text, an error when
// the status is failed.
func TestMCPToolCallOutcome(t *testing.T) {
	cases := []struct {
		name, status, rest, preview string
		isErr                       bool
	}{
		{"ok", "completed", `"result":{"content":[{"type":"text","text":"found"}]}`, "found", false},
		{"error message", "completed", `"result":{"content":[{"type":"text","text":"found"}]},"error":{"message":"boom"}`, "boom", true},
		{"failed without message", "failed", `"result":{"content":[{"type":"text","text":"partial"}]}`, "partial", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			item := `"id":"i1","server":"docs","tool":"search","status":"` + c.status + `",` + c.rest
			exec := decodeAll(t, `{"type":"item.completed","item":{"type":"mcp_tool_call",`+item+`}}`)
			_, s, err := codex.New().AppServerRequest(adapters.Input{Prompt: "hi"})
			require.NoError(t, err)
			app := s.Decode([]byte(`{"method":"item/completed","params":{"item":{"type":"mcpToolCall",` + item + `}}}`))
			for _, evs := range [][]adapters.Event{exec, app} {
				require.Equal(t, []adapters.Kind{adapters.KindTool, adapters.KindToolResult}, kinds(evs))
				assert.Equal(t, c.preview, evs[1].ToolResult.Preview)
				assert.Equal(t, c.isErr, evs[1].ToolResult.IsError)
			}
		})
	}
}
