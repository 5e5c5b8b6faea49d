package claude_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/adapters/adaptertest"
	"github.com/outpost-dev/outpost/adapters/claude"
	"github.com/outpost-dev/outpost/usage"
)

func decode(t *testing.T, d adapters.Decoder, line string) []adapters.Event {
	t.Helper()
	evs := d.Decode([]byte(line))
	require.NotEmpty(t, evs, "no event for %.200s", line)
	for _, ev := range evs {
		adaptertest.CheckEvent(t, ev)
		_, err := json.Marshal(ev)
		require.NoError(t, err, "event must marshal")
	}
	return evs
}

func one(t *testing.T, line string) adapters.Event {
	t.Helper()
	evs := decode(t, claude.NewDecoder(), line)
	require.Len(t, evs, 1, "%+v", evs)
	return evs[0]
}

func TestDecodeRealLines(t *testing.T) {
	cases := []struct {
		name string
		line string
		want []adapters.Event
	}{
		{"system/init", lineInit, []adapters.Event{{Kind: adapters.KindConversation,
			Conversation: "3bc97ec5-459a-4f43-8802-7cec38ce530c", Model: "claude-opus-5-5", Version: "2.1.328",
			Cwd: "/tmp/outpost-claude-capture/ok/work"}}},
		{"assistant text + message usage", lineAssistantText, []adapters.Event{
			{Kind: adapters.KindText, Text: "outpost ok: MARK-ok1."},
			{Kind: adapters.KindUsage, Usage: &usage.Report{Scope: usage.ScopeMessage, MessageID: "msg_01eXoGwNx3k3AmhtJ6v8g389",
				Usage: usage.Usage{Input: 2376, CacheCreated: 17035, Output: 1, Complete: true}}},
		}},
		{"result success", lineResultOK, []adapters.Event{
			{Kind: adapters.KindUsage, Usage: &usage.Report{Scope: usage.ScopeTurn,
				Usage:   usage.Usage{Input: 2376, CacheCreated: 17035, Output: 5, CostUSD: 0.094779, Complete: true, CostKnown: true},
				HasCost: true}},
			{Kind: adapters.KindResult, Text: "outpost ok: MARK-ok1."},
			{Kind: adapters.KindFinished, Finished: &adapters.FinishedDetail{OK: true, Reason: "completed"}},
		}},
		{"result of a resumed turn counts this turn only", lineResultResume, []adapters.Event{
			{Kind: adapters.KindUsage, Usage: &usage.Report{Scope: usage.ScopeTurn,
				Usage:   usage.Usage{Input: 3, Cached: 19455, Output: 12, CostUSD: 0.004143, Complete: true, CostKnown: true},
				HasCost: true}},
			{Kind: adapters.KindResult, Text: "outpost ok: MARK-resume2. remembered: MARK-resume1"},
			{Kind: adapters.KindFinished, Finished: &adapters.FinishedDetail{OK: true, Reason: "completed"}},
		}},
		{"rate_limit_event rejected", lineRateLimitRejected, []adapters.Event{{Kind: adapters.KindQuota,
			Quota: &adapters.QuotaSignal{Status: "rejected", Limit: "five_hour", ResetAt: time.Unix(1796209200, 0).UTC()}}}},
		{"rate_limit_event allowed_warning", lineAllowedWarning, []adapters.Event{{Kind: adapters.KindQuota,
			Quota: &adapters.QuotaSignal{Status: "allowed_warning", Limit: "five_hour", ResetAt: time.Unix(1796209200, 0).UTC()}}}},
		{"synthetic quota message", lineSyntheticQuota, []adapters.Event{{Kind: adapters.KindFailure,
			Text: "You've hit your 5-hour limit · resets 11am (UTC)", Failure: &adapters.FailureDetail{Status: 429, Code: "rate_limit", ProviderType: "rate_limit_error"}}}},
		{"quota result", lineResultQuota, []adapters.Event{
			{Kind: adapters.KindUsage, Usage: &usage.Report{Scope: usage.ScopeTurn, Usage: usage.Usage{Complete: true, CostKnown: true}, HasCost: true}},
			{Kind: adapters.KindFailure, Text: "You've hit your 5-hour limit · resets 11am (UTC)",
				Failure: &adapters.FailureDetail{Status: 429, Code: "api_error", ProviderType: "rate_limit_error"}},
			{Kind: adapters.KindFinished, Finished: &adapters.FinishedDetail{OK: false, Reason: "api_error"}},
		}},
		{"api_retry 429", lineRetry429, []adapters.Event{{Kind: adapters.KindRetry,
			Retry: &adapters.RetryNotice{Attempt: 1, MaxAttempts: 1, Status: 429, Reason: "rate_limit", DelayMS: 1182}}}},
		{"api_retry without status", lineRetryConn, []adapters.Event{{Kind: adapters.KindRetry,
			Retry: &adapters.RetryNotice{Attempt: 1, MaxAttempts: 1, Reason: "unknown", DelayMS: 617}}}},
		{"synthetic connection failure", lineSyntheticConn, []adapters.Event{{Kind: adapters.KindFailure,
			Text:    "API Error: Connection refused — a firewall or proxy may be blocking it (ECONNREFUSED)",
			Failure: &adapters.FailureDetail{Code: "server_error"}}}},
		{"synthetic auth failure", lineSyntheticAuth, []adapters.Event{{Kind: adapters.KindFailure,
			Text: "Failed to authenticate. API Error: 401 Invalid bearer token", Failure: &adapters.FailureDetail{Status: 401, Code: "authentication_failed", ProviderType: "authentication_error"}}}},
		{"text delta", lineTextDelta, []adapters.Event{{Kind: adapters.KindTextDelta, Text: "outpost ok: MARK-partial"}}},
		{"message_delta usage", lineMessageDelta, []adapters.Event{{Kind: adapters.KindUsage, Usage: &usage.Report{
			Scope: usage.ScopeMessage, MessageID: "msg_01faKHxr3YsAHMy3Z6WGUnHA",
			Usage: usage.Usage{Input: 2378, CacheCreated: 17041, Output: 6, Complete: true}}}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := decode(t, claude.NewDecoder(), c.line)
			assert.Equal(t, c.want, got)
		})
	}
}

func TestDecodeRawLines(t *testing.T) {
	for name, line := range map[string]string{
		"system/status":        lineStatus,
		"message_start":        lineMessageStart,
		"content_block_start":  lineBlockStart,
		"message_stop":         lineMessageStop,
		"unknown type":         `{"type":"control_request","request":{}}`,
		"unknown system":       `{"type":"system","subtype":"compact_boundary","compact_metadata":{"trigger":"auto"}}`,
		"user text only":       `{"type":"user","message":{"role":"user","content":"hello"}}`,
		"init without session": `{"type":"system","subtype":"init"}`,
		"no type":              `{}`,
		"array":                `[1,2]`,
		"null":                 `null`,
		"string":               `"x"`,
		"type of wrong type":   `{"type":3}`,
	} {
		t.Run(name, func(t *testing.T) {
			ev := one(t, line)
			assert.Equal(t, adapters.KindRaw, ev.Kind)
			assert.JSONEq(t, line, string(ev.Raw))
		})
	}
}

func TestDecodeInvalidJSON(t *testing.T) {
	for _, line := range []string{"not json", `{"type":"assistant"`, "", "  ", "\xff\xfe", `{"type":"result"}}`} {
		ev := one(t, line)
		assert.Equal(t, adapters.KindRaw, ev.Kind)
		var s string
		require.NoError(t, json.Unmarshal(ev.Raw, &s), "invalid JSON travels as a JSON string")
		if utf8.ValidString(line) {
			assert.Equal(t, line, s)
		}
	}
}

func TestDecodeCopiesLine(t *testing.T) {
	buf := []byte(`{"type":"mystery"}`)
	ev := claude.NewDecoder().Decode(buf)[0]
	copy(buf, "XXXXXXXXXXXXXXXXXX")
	assert.JSONEq(t, `{"type":"mystery"}`, string(ev.Raw))

	buf = []byte(lineToolUse)
	evs := claude.NewDecoder().Decode(buf)
	clear(buf)
	assert.JSONEq(t, `{"command":"printf '%s' 'MARK-tool1' > 'outpost-MARK-tool1.txt'","description":"Write the outpost marker file"}`,
		string(evs[0].Tool.Input))
}

func TestDecodeToolRoundTrip(t *testing.T) {
	d := claude.NewDecoder()
	evs := decode(t, d, lineToolUse)
	require.Len(t, evs, 2)
	assert.Equal(t, adapters.KindTool, evs[0].Kind)
	assert.Equal(t, "toolu_01h99zpg5rC6qQoPm16xO1MJ", evs[0].Tool.CallID)
	assert.Equal(t, "Bash", evs[0].Tool.Name)
	assert.Equal(t, adapters.KindUsage, evs[1].Kind)
	assert.Equal(t, "msg_01qSiGmNqxPZxxhpJfTCF6BC", evs[1].Usage.MessageID)

	res := decode(t, d, lineToolResult)
	assert.Equal(t, []adapters.Event{{Kind: adapters.KindToolResult, ToolResult: &adapters.ToolResult{
		CallID: "toolu_01h99zpg5rC6qQoPm16xO1MJ", Name: "Bash", Preview: "(Bash completed with no output)",
		Characters: len("(Bash completed with no output)")}}}, res)

	// Without the call, the name is unknown but the result still decodes.
	res = decode(t, claude.NewDecoder(), lineToolResult)
	assert.Empty(t, res[0].ToolResult.Name)
}

func TestDecodeToolResultShapes(t *testing.T) {
	long := strings.Repeat("é", adapters.PreviewLimit) // 2 bytes each
	block := func(content string) string {
		return `{"type":"user","message":{"role":"user","content":[{"tool_use_id":"t1","type":"tool_result","content":` +
			content + `,"is_error":true}]},"parent_tool_use_id":null}`
	}
	q, _ := json.Marshal(long)
	ev := one(t, block(string(q)))
	tr := ev.ToolResult
	require.NotNil(t, tr)
	assert.True(t, tr.IsError)
	assert.LessOrEqual(t, len(tr.Preview), adapters.PreviewLimit)
	assert.True(t, utf8.ValidString(tr.Preview), "cut at a character boundary")
	assert.Equal(t, adapters.PreviewLimit, len(tr.Preview))
	assert.Equal(t, adapters.PreviewLimit, tr.Characters)

	ev = one(t, block(`[{"type":"text","text":"line one"},{"type":"image","source":{}},{"type":"text","text":"two"}]`))
	assert.Equal(t, "line one\n[image]\ntwo", ev.ToolResult.Preview)
	assert.Equal(t, 20, ev.ToolResult.Characters)

	ev = one(t, block(`null`))
	assert.Equal(t, adapters.KindToolResult, ev.Kind)
	assert.Zero(t, ev.ToolResult.Characters)

	// Several results in one message.
	evs := decode(t, claude.NewDecoder(), `{"type":"user","message":{"content":[`+
		`{"type":"tool_result","tool_use_id":"a","content":"x"},{"type":"tool_result","tool_use_id":"b","content":"y"}]}}`)
	require.Len(t, evs, 2)
	assert.Equal(t, "b", evs[1].ToolResult.CallID)
}

func TestPreview(t *testing.T) {
	assert.Equal(t, "abc", claude.Preview("abc", 10))
	assert.Equal(t, "ab", claude.Preview("abc", 2))
	assert.Equal(t, "a", claude.Preview("a€b", 3)) // € is 3 bytes: never split it
	assert.Equal(t, "a€", claude.Preview("a€b", 4))
	assert.Equal(t, "", claude.Preview("€", 2))
}

func TestDecodeToolNameCacheIsBounded(t *testing.T) {
	d := claude.NewDecoder()
	use := func(id string) string {
		return `{"type":"assistant","message":{"id":"m","content":[{"type":"tool_use","id":"` + id + `","name":"N` + id + `","input":{}}]}}`
	}
	result := func(id string) string {
		return `{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"` + id + `","content":"ok"}]}}`
	}
	for i := range 1100 {
		decode(t, d, use("id"+strings.Repeat("x", i%7)+string(rune('a'+i%26))+itoa(i)))
	}
	last := "id" + strings.Repeat("x", 1099%7) + string(rune('a'+1099%26)) + itoa(1099)
	assert.Equal(t, "N"+last, decode(t, d, result(last))[0].ToolResult.Name)
	first := "id" + "a" + itoa(0)
	assert.Empty(t, decode(t, d, result(first))[0].ToolResult.Name, "oldest entries are evicted")
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

func TestDecodeAssistantBlocks(t *testing.T) {
	line := `{"type":"assistant","message":{"id":"msg_1","model":"claude-opus-5-5","content":[` +
		`{"type":"thinking","thinking":"let me think","signature":"sig"},` +
		`{"type":"text","text":"hello"},` +
		`{"type":"redacted_thinking","data":"xx"},` +
		`{"type":"tool_use","id":"toolu_1","name":"Read","input":{"file_path":"/a"}}],` +
		`"usage":{"input_tokens":10,"cache_read_input_tokens":5,"cache_creation_input_tokens":2,"output_tokens":7,` +
		`"cache_creation":{"ephemeral_1h_input_tokens":1,"ephemeral_5m_input_tokens":1}}},` +
		`"parent_tool_use_id":"toolu_parent","session_id":"s"}`
	evs := decode(t, claude.NewDecoder(), line)
	require.Len(t, evs, 4)
	assert.Equal(t, adapters.Event{Kind: adapters.KindReasoning, Text: "let me think", Subagent: "toolu_parent"}, evs[0])
	assert.Equal(t, adapters.Event{Kind: adapters.KindText, Text: "hello", Subagent: "toolu_parent"}, evs[1])
	assert.Equal(t, adapters.KindTool, evs[2].Kind)
	assert.Equal(t, &adapters.ToolCall{CallID: "toolu_1", Name: "Read", Input: json.RawMessage(`{"file_path":"/a"}`)}, evs[2].Tool)
	assert.Equal(t, "toolu_parent", evs[2].Subagent)
	assert.Equal(t, &usage.Report{Scope: usage.ScopeMessage, MessageID: "msg_1",
		Usage: usage.Usage{Input: 10, Cached: 5, CacheCreated: 2, CacheCreated1h: 1, Output: 7, Complete: true}}, evs[3].Usage)
	assert.Equal(t, "toolu_parent", evs[3].Subagent)

	// Thinking delta → reasoning.
	ev := one(t, `{"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hmm"}},"parent_tool_use_id":null}`)
	assert.Equal(t, adapters.Event{Kind: adapters.KindReasoning, Text: "hmm"}, ev)

	// An assistant message with no content and no usage is still not dropped.
	ev = one(t, `{"type":"assistant","message":{"id":"m","content":[]}}`)
	assert.Equal(t, adapters.KindRaw, ev.Kind)
}

func TestDecodeSyntheticWithoutError(t *testing.T) {
	ev := one(t, `{"type":"assistant","message":{"id":"x","model":"<synthetic>","content":[{"type":"text","text":"No response requested."}],"usage":{"input_tokens":0,"output_tokens":0}}}`)
	assert.Equal(t, adapters.Event{Kind: adapters.KindWarning, Text: "No response requested."}, ev)
}

func TestDecodeInitMCPWarning(t *testing.T) {
	evs := decode(t, claude.NewDecoder(), `{"type":"system","subtype":"init","session_id":"s1","model":"m","cwd":"/w",`+
		`"claude_code_version":"2.1.328","mcp_servers":[{"name":"ok","status":"connected"},{"name":"broken","status":"failed"}]}`)
	require.Len(t, evs, 2)
	assert.Equal(t, "s1", evs[0].Conversation)
	assert.Equal(t, adapters.Event{Kind: adapters.KindWarning, Text: "MCP server broken: failed"}, evs[1])
}

func TestDecodeResultVariants(t *testing.T) {
	cases := []struct {
		name string
		line string
		want []adapters.Event
	}{
		{"is_error with subtype success is a failure",
			`{"type":"result","subtype":"success","is_error":true,"result":"Not logged in · Please run /login","session_id":"s"}`,
			[]adapters.Event{
				{Kind: adapters.KindFailure, Text: "Not logged in · Please run /login", Failure: &adapters.FailureDetail{Code: ""}},
				{Kind: adapters.KindFinished, Finished: &adapters.FinishedDetail{OK: false, Reason: "success"}},
			}},
		{"error subtype with errors[] and no text",
			`{"type":"result","subtype":"error_during_execution","is_error":true,"errors":["No conversation found with session ID: abc",{"message":"second"},null],"total_cost_usd":0,"usage":{"input_tokens":0,"output_tokens":0}}`,
			[]adapters.Event{
				{Kind: adapters.KindUsage, Usage: &usage.Report{Scope: usage.ScopeTurn, Usage: usage.Usage{Complete: true, CostKnown: true}, HasCost: true}},
				{Kind: adapters.KindFailure, Text: "No conversation found with session ID: abc\nsecond",
					Failure: &adapters.FailureDetail{Code: "error_during_execution"}},
				{Kind: adapters.KindFinished, Finished: &adapters.FinishedDetail{OK: false, Reason: "error_during_execution"}},
			}},
		{"max turns without is_error",
			`{"type":"result","subtype":"error_max_turns","is_error":false,"terminal_reason":"max_turns","result":"partial"}`,
			[]adapters.Event{
				{Kind: adapters.KindFailure, Text: "partial", Failure: &adapters.FailureDetail{Code: "error_max_turns"}},
				{Kind: adapters.KindFinished, Finished: &adapters.FinishedDetail{OK: false, Reason: "max_turns"}},
			}},
		{"older result without model_usage_since_last_result uses result.usage and total_cost_usd",
			`{"type":"result","subtype":"success","is_error":false,"result":"ok","total_cost_usd":0.5,` +
				`"usage":{"input_tokens":1,"cache_read_input_tokens":2,"cache_creation_input_tokens":3,"output_tokens":4},` +
				`"modelUsage":{"a":{"inputTokens":100,"outputTokens":100,"costUSD":9}}}`,
			[]adapters.Event{
				{Kind: adapters.KindUsage, Usage: &usage.Report{Scope: usage.ScopeTurn,
					Usage: usage.Usage{Input: 1, Cached: 2, CacheCreated: 3, Output: 4, CostUSD: 0.5, Complete: true, CostKnown: true}, HasCost: true}},
				{Kind: adapters.KindResult, Text: "ok"},
				{Kind: adapters.KindFinished, Finished: &adapters.FinishedDetail{OK: true, Reason: "success"}},
			}},
		{"modelUsage only: summed over models (side calls included)",
			`{"type":"result","subtype":"success","is_error":false,"result":"ok",` +
				`"modelUsage":{"opus":{"inputTokens":10,"outputTokens":20,"cacheReadInputTokens":1,"cacheCreationInputTokens":2,"cacheCreationEphemeral1hInputTokens":2,"costUSD":0.25},` +
				`"haiku":{"inputTokens":5,"outputTokens":1,"costUSD":0.01}}}`,
			[]adapters.Event{
				{Kind: adapters.KindUsage, Usage: &usage.Report{Scope: usage.ScopeTurn,
					Usage: usage.Usage{Input: 15, Cached: 1, CacheCreated: 2, CacheCreated1h: 2, Output: 21, CostUSD: 0.26, Complete: true, CostKnown: true}, HasCost: true}},
				{Kind: adapters.KindResult, Text: "ok"},
				{Kind: adapters.KindFinished, Finished: &adapters.FinishedDetail{OK: true, Reason: "success"}},
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := decode(t, claude.NewDecoder(), c.line)
			if len(got) > 0 && got[0].Usage != nil && len(c.want) > 0 && c.want[0].Usage != nil {
				assert.InDelta(t, c.want[0].Usage.CostUSD, got[0].Usage.CostUSD, 1e-9)
				got[0].Usage.CostUSD = c.want[0].Usage.CostUSD
			}
			assert.Equal(t, c.want, got)
		})
	}
}

// TestDecodeFixtures runs every captured stream through one decoder and checks
// what a turn needs: the id, the verdict, and usage that adds up.
func TestDecodeFixtures(t *testing.T) {
	cases, err := adaptertest.Load("testdata")
	require.NoError(t, err)
	require.NotEmpty(t, cases)
	wantOK := map[string]bool{"ok": true, "ok_partial": true, "tool": true, "resume": true, "fork": true, "quota_warning": true}
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			d := claude.NewDecoder()
			var conv string
			var fin *adapters.FinishedDetail
			var ledger usage.Ledger
			kinds := map[adapters.Kind]int{}
			for _, l := range bytes.Split(c.Stdout, []byte("\n")) {
				if len(l) == 0 {
					continue
				}
				for _, ev := range decode(t, d, string(l)) {
					kinds[ev.Kind]++
					switch ev.Kind {
					case adapters.KindConversation:
						conv = ev.Conversation
					case adapters.KindFinished:
						fin = ev.Finished
					case adapters.KindUsage:
						ledger.Add(*ev.Usage)
					}
				}
			}
			if c.Name == "resume_missing" {
				assert.Empty(t, conv, "a failed resume prints no init line")
			} else {
				assert.True(t, adapters.ValidID(conv), "conversation id %q", conv)
			}
			require.NotNil(t, fin)
			assert.Equal(t, wantOK[c.Name], fin.OK)
			assert.True(t, ledger.Total().Complete)
			if fin.OK {
				assert.Positive(t, ledger.Total().Output)
				assert.Positive(t, ledger.Total().CostUSD)
				assert.Equal(t, 1, kinds[adapters.KindResult])
			} else {
				assert.NotZero(t, kinds[adapters.KindFailure])
			}
			assert.Zero(t, kinds[adapters.KindRaw]-rawExpected(c.Name))
		})
	}
}

// rawExpected counts the lines of a fixture the decoder has no event for.
func rawExpected(name string) int {
	if name == "ok_partial" {
		return 5 // status, message_start, content_block_start, content_block_stop, message_stop
	}
	return 0
}

func TestFixtureMeta(t *testing.T) {
	cases, err := adaptertest.Load("testdata")
	require.NoError(t, err)
	for _, c := range cases {
		assert.Equal(t, claude.Version, c.Meta.CLIVersion, c.Name)
		assert.False(t, c.Meta.Time.IsZero(), c.Name)
		assert.Contains(t, c.Meta.Source, "captured from claude "+claude.Version, c.Name)
		_, err := os.Stat(filepath.Join("testdata", c.Dir, "stderr.txt"))
		assert.NoError(t, err, c.Name)
	}
}

func FuzzDecode(f *testing.F) {
	for _, l := range []string{lineInit, lineAssistantText, lineToolUse, lineToolResult, lineResultOK, lineSyntheticQuota,
		lineRateLimitRejected, lineRetry429, lineTextDelta, lineMessageDelta, lineResultResume,
		`{"type":"user","message":{"content":[{"type":"tool_result","content":[{"type":"text","text":"x"}]}]}}`,
		`{"type":"result","errors":[1,"a",{"message":"b"}],"modelUsage":{"m":{}}}`,
		`{"type":"assistant","message":{"content":"str"},"error":{"x":1}}`,
		`{"type":"assistant","parent_tool_use_id":"p","message":{"content":[{"type":"tool_use","input":1}]}}`,
	} {
		f.Add([]byte(l))
	}
	adaptertest.FuzzDecode(f, func() adapters.Adapter { return claude.New() }, "testdata")
}

func mustRead(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(b)
}

// A line the decoder does not understand keeps only a bounded preview,
// however long it is: an unknown type, a known type without what the
// decoder reads, and a line that is not JSON.
func TestDecodeLongRawLineBounded(t *testing.T) {
	pad := strings.Repeat("x", 2*adapters.RawLimit)
	for _, line := range []string{
		`{"type":"mystery","pad":"` + pad + `"}`,
		`{"type":"system","subtype":"hook_response","output":"` + pad + `"}`,
		`{"type":"user","message":{"content":"` + pad + `"}}`,
		`not json ` + pad,
	} {
		adaptertest.CheckLongRaw(t, claude.NewDecoder(), []byte(line))
	}
}
