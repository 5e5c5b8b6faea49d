package outposttest_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/outposttest"
)

// longAnswer is longer than one stream chunk, so it arrives in pieces.
const longAnswer = `{"city":"Paris","country":"France","population":2102650}`

// anthropicAnswer streams a primary Messages request and returns the final
// text and the number of text deltas it came in.
func anthropicAnswer(t *testing.T, srv *outposttest.Server, prompt string) (string, int) {
	t.Helper()
	resp := post(t, srv, "/v1/messages", body(true, msg("user", prompt)))
	require.Equal(t, http.StatusOK, resp.StatusCode)
	evs := readSSE(t, resp.Body)
	deltas := 0
	for _, e := range evs {
		if e.name == "content_block_delta" {
			deltas++
		}
	}
	return finalText(assemble(t, evs)), deltas
}

// responsesAnswer streams a primary Responses request and returns the
// output text and the number of output_text deltas it came in.
func responsesAnswer(t *testing.T, srv *outposttest.Server, prompt string) (string, int) {
	t.Helper()
	resp, evs, _ := postResponses(t, srv, map[string]any{"model": "gpt-5.5", "stream": true, "tools": codexTools(),
		"input": []any{userItem(prompt)}})
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var b strings.Builder
	deltas := 0
	for _, e := range evs {
		if e.typ == "response.output_text.delta" {
			b.WriteString(e.data["delta"].(string))
			deltas++
		}
	}
	return b.String(), deltas
}

// chatAnswer streams a primary Chat Completions request and returns the
// content and the number of content chunks it came in.
func chatAnswer(t *testing.T, srv *outposttest.Server, prompt string) (string, int) {
	t.Helper()
	status, chunks, _ := chatPost(t, srv, "/v1/chat/completions", map[string]any{"model": "gpt-4.1", "stream": true,
		"tools": bashTool, "messages": []any{map[string]any{"role": "user", "content": prompt}}})
	require.Equal(t, http.StatusOK, status)
	var b strings.Builder
	deltas := 0
	for _, c := range chunks {
		for _, ch := range c["choices"].([]any) {
			if s, ok := ch.(map[string]any)["delta"].(map[string]any)["content"].(string); ok && s != "" {
				b.WriteString(s)
				deltas++
			}
		}
	}
	return b.String(), deltas
}

func TestAnswersInOrderOnEveryAPI(t *testing.T) {
	for _, tc := range []struct {
		api    string
		answer func(*testing.T, *outposttest.Server, string) (string, int)
		// auxiliary sends a request the server answers outside the scenarios
		// (no tools, not streaming) and returns its text.
		auxiliary func(*testing.T, *outposttest.Server) string
	}{
		{"anthropic", anthropicAnswer, func(t *testing.T, srv *outposttest.Server) string {
			resp := post(t, srv, "/v1/messages", map[string]any{"model": "claude-haiku-4-5", "max_tokens": 32,
				"messages": []any{msg("user", "title for MARK-aux")}})
			require.Equal(t, http.StatusOK, resp.StatusCode)
			var out struct {
				Content []struct{ Text string } `json:"content"`
			}
			require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
			require.Len(t, out.Content, 1)
			return out.Content[0].Text
		}},
		{"responses", responsesAnswer, func(t *testing.T, srv *outposttest.Server) string {
			resp, _, out := postResponses(t, srv, map[string]any{"model": "gpt-5.5", "input": "title for MARK-aux"})
			require.Equal(t, http.StatusOK, resp.StatusCode)
			items := out["output"].([]any)
			msg := items[len(items)-1].(map[string]any)
			return msg["content"].([]any)[0].(map[string]any)["text"].(string)
		}},
		{"chat", chatAnswer, func(t *testing.T, srv *outposttest.Server) string {
			status, _, raw := chatPost(t, srv, "/v1/chat/completions", map[string]any{"model": "gpt-4.1",
				"messages": []any{map[string]any{"role": "user", "content": "title for MARK-aux"}}})
			require.Equal(t, http.StatusOK, status)
			var out struct {
				Choices []struct {
					Message struct{ Content string } `json:"message"`
				} `json:"choices"`
			}
			require.NoError(t, json.Unmarshal(raw, &out))
			require.Len(t, out.Choices, 1)
			return out.Choices[0].Message.Content
		}},
	} {
		t.Run(tc.api, func(t *testing.T) {
			srv := newServer(t, outposttest.WithAnswers(longAnswer, "second"))

			got, deltas := tc.answer(t, srv, "first MARK-1")
			assert.Equal(t, longAnswer, got)
			assert.Greater(t, deltas, 1, "an answer is streamed in chunks like the ok text")

			// An auxiliary request answers the ok text and consumes nothing.
			assert.Equal(t, "outpost ok: MARK-aux.", tc.auxiliary(t, srv))

			got, _ = tc.answer(t, srv, "second MARK-2")
			assert.Equal(t, "second", got)

			// The queue is used up: the ok text again.
			got, _ = tc.answer(t, srv, "third MARK-3")
			assert.Equal(t, "outpost ok: MARK-3.", got)

			reqs := srv.Requests()
			require.Len(t, reqs, 4)
			assert.True(t, reqs[1].Auxiliary)
			for _, i := range []int{0, 2, 3} {
				assert.False(t, reqs[i].Auxiliary)
				assert.Equal(t, outposttest.ScenarioOK, reqs[i].Scenario)
			}
		})
	}
}

func TestSetAnswersReplacesQueue(t *testing.T) {
	srv := newServer(t, outposttest.WithAnswers("a", "b"))
	got, _ := anthropicAnswer(t, srv, "MARK-1")
	assert.Equal(t, "a", got)

	srv.SetAnswers("c", "d")
	got, _ = responsesAnswer(t, srv, "MARK-2")
	assert.Equal(t, "c", got, `"b" was dropped by SetAnswers`)

	srv.SetAnswers()
	got, _ = chatAnswer(t, srv, "MARK-3")
	assert.Equal(t, "outpost ok: MARK-3.", got, "SetAnswers() empties the queue")

	// A server without answers gets them at run time.
	srv2 := newServer(t)
	got, _ = anthropicAnswer(t, srv2, "MARK-4")
	assert.Equal(t, "outpost ok: MARK-4.", got)
	srv2.SetAnswers("later")
	got, _ = anthropicAnswer(t, srv2, "MARK-5")
	assert.Equal(t, "later", got)
}

func TestAnswersSkipToolAndFailures(t *testing.T) {
	srv := newServer(t, outposttest.WithAnswers("scripted"))

	// A failure consumes nothing.
	resp := post(t, srv, "/v1/messages", body(true, msg("user", "x "+outposttest.Directive(outposttest.ScenarioOverloaded))))
	_, _ = io.Copy(io.Discard, resp.Body)
	require.Equal(t, 529, resp.StatusCode)

	// Neither does the tool scenario: its tool call nor its closing text.
	prompt := msg("user", "write MARK-t "+outposttest.Directive(outposttest.ScenarioTool))
	m := streamMessage(t, srv, prompt)
	require.Equal(t, "tool_use", m.stopReason)
	id := m.blocks[1]["id"].(string)
	m = streamMessage(t, srv, prompt,
		msg("assistant", []any{m.blocks[0], map[string]any{"type": "tool_use", "id": id, "name": "Bash", "input": m.blocks[1]["input"]}}),
		msg("user", []any{map[string]any{"type": "tool_result", "tool_use_id": id, "content": "done"}}))
	assert.Equal(t, "outpost tool done: wrote outpost-MARK-t.txt. outpost ok: MARK-t.", finalText(m))

	got, _ := anthropicAnswer(t, srv, "MARK-ok")
	assert.Equal(t, "scripted", got)
}

func TestAnswersNonStreamingAndSlow(t *testing.T) {
	const delay = 10 * time.Millisecond
	srv := newServer(t, outposttest.WithScenario(outposttest.ScenarioSlow), outposttest.WithChunkDelay(delay),
		outposttest.WithAnswers(longAnswer, "plain"))

	// Slow streams the answer with the chunk delay before every event.
	start := time.Now()
	resp := post(t, srv, "/v1/messages", body(true, msg("user", "MARK-s")))
	require.Equal(t, http.StatusOK, resp.StatusCode)
	evs := readSSE(t, resp.Body)
	assert.Equal(t, longAnswer, finalText(assemble(t, evs)))
	assert.GreaterOrEqual(t, time.Since(start), time.Duration(len(evs))*delay)

	// A primary request that does not stream (it declares tools) takes one too.
	require.NoError(t, srv.SetScenario(outposttest.ScenarioOK))
	resp = post(t, srv, "/v1/messages", body(false, msg("user", "MARK-n")))
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var out struct {
		Content []struct{ Text string } `json:"content"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	require.Len(t, out.Content, 1)
	assert.Equal(t, "plain", out.Content[0].Text)
}

func TestConcurrentRequestsConsumeAnswersOnce(t *testing.T) {
	const n = 40
	answers := make([]string, n/2)
	for i := range answers {
		answers[i] = fmt.Sprintf("answer-%d", i)
	}
	srv := newServer(t, outposttest.WithAnswers(answers...))
	var wg sync.WaitGroup
	var mu sync.Mutex
	count := map[string]int{}
	for i := range n {
		wg.Go(func() {
			// Not chatAnswer: require must not stop the test from another goroutine.
			raw, _ := json.Marshal(map[string]any{"model": "gpt-4.1", "stream": i%2 == 0, "tools": bashTool,
				"messages": []any{map[string]any{"role": "user", "content": fmt.Sprintf("MARK-%d", i)}}})
			resp, err := http.Post(srv.URL()+"/v1/chat/completions", "application/json", bytes.NewReader(raw))
			if !assert.NoError(t, err) {
				return
			}
			b, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			got := "other: " + string(b)
			switch {
			case bytes.Contains(b, []byte("outpost ok: MARK-")):
				got = "ok"
			default:
				for _, a := range answers {
					if bytes.Contains(b, []byte(`"`+a+`"`)) {
						got = a
					}
				}
			}
			mu.Lock()
			count[got]++
			mu.Unlock()
		})
	}
	wg.Wait()
	want := map[string]int{"ok": n / 2}
	for _, a := range answers {
		want[a] = 1
	}
	assert.Equal(t, want, count)
}

func TestOutputSchemaRecorded(t *testing.T) {
	srv := newServer(t)
	schema := map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}},
		"required": []any{"city"}, "additionalProperties": false}
	const schemaJSON = `{"type":"object","properties":{"city":{"type":"string"}},"required":["city"],"additionalProperties":false}`

	responses := func(text any) {
		b := map[string]any{"model": "gpt-5.5", "stream": true, "tools": codexTools(), "input": []any{userItem("MARK-r")}}
		if text != nil {
			b["text"] = text
		}
		resp, _, _ := postResponses(t, srv, b)
		require.Equal(t, http.StatusOK, resp.StatusCode)
	}
	responses(map[string]any{"format": map[string]any{"type": "json_schema", "name": "codex_output_schema",
		"schema": schema, "strict": true}})
	responses(map[string]any{"format": map[string]any{"type": "text"}, "verbosity": "low"})
	responses(nil)

	chat := func(format any) {
		b := map[string]any{"model": "gpt-4.1", "stream": true, "tools": bashTool,
			"messages": []any{map[string]any{"role": "user", "content": "MARK-c"}}}
		if format != nil {
			b["response_format"] = format
		}
		status, _, _ := chatPost(t, srv, "/v1/chat/completions", b)
		require.Equal(t, http.StatusOK, status)
	}
	chat(map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "city", "schema": schema, "strict": true}})
	chat(map[string]any{"type": "json_object"})
	chat(nil)

	streamMessage(t, srv, msg("user", "MARK-a"))

	reqs := srv.Requests()
	require.Len(t, reqs, 7)
	assert.JSONEq(t, schemaJSON, string(reqs[0].OutputSchema), "responses text.format json_schema")
	assert.Nil(t, reqs[1].OutputSchema, "responses text format")
	assert.Nil(t, reqs[2].OutputSchema, "responses without text")
	assert.JSONEq(t, schemaJSON, string(reqs[3].OutputSchema), "chat response_format json_schema")
	assert.Nil(t, reqs[4].OutputSchema, "chat json_object")
	assert.Nil(t, reqs[5].OutputSchema, "chat without response_format")
	assert.Nil(t, reqs[6].OutputSchema, "anthropic")

	// The log is a copy, and the field marshals under its JSON name.
	reqs[0].OutputSchema[0] = 'X'
	assert.JSONEq(t, schemaJSON, string(srv.Requests()[0].OutputSchema))
	b, err := json.Marshal(srv.Requests()[3])
	require.NoError(t, err)
	var logged map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(b, &logged))
	assert.JSONEq(t, schemaJSON, string(logged["output_schema"]))
	b, err = json.Marshal(srv.Requests()[4])
	require.NoError(t, err)
	assert.NotContains(t, string(b), "output_schema")
}

// structuredBody is a streamed Messages request that offers Claude Code's
// StructuredOutput tool (claude --json-schema).
func structuredBody(msgs ...map[string]any) map[string]any {
	b := body(true, msgs...)
	b["tools"] = []any{map[string]any{"name": "Bash", "input_schema": map[string]any{"type": "object"}},
		map[string]any{"name": "StructuredOutput", "input_schema": map[string]any{"type": "object"}}}
	return b
}

func structuredMessage(t *testing.T, srv *outposttest.Server, msgs ...map[string]any) message {
	t.Helper()
	resp := post(t, srv, "/v1/messages", structuredBody(msgs...))
	require.Equal(t, http.StatusOK, resp.StatusCode)
	return assemble(t, readSSE(t, resp.Body))
}

func TestStructuredOutputToolCall(t *testing.T) {
	srv := newServer(t, outposttest.WithAnswers(`{"verdict":5}`, `{"verdict":"pass"}`, `not json`))
	ask := msg("user", "judge MARK-so")

	// A JSON-object answer becomes a call of the structured-output tool.
	m := structuredMessage(t, srv, ask)
	assert.Equal(t, "tool_use", m.stopReason)
	require.Len(t, m.blocks, 1)
	assert.Equal(t, "StructuredOutput", m.blocks[0]["name"])
	assert.Equal(t, map[string]any{"verdict": float64(5)}, m.blocks[0]["input"])
	call := m.blocks[0]["id"]

	// The tool refused it: the retry takes the next answer.
	refused := msg("user", []any{map[string]any{"type": "tool_result", "tool_use_id": call, "is_error": true,
		"content": "Output does not match required schema: /verdict: must be string"}})
	m = structuredMessage(t, srv, ask, msg("assistant", []any{m.blocks[0]}), refused)
	require.Len(t, m.blocks, 1)
	assert.Equal(t, map[string]any{"verdict": "pass"}, m.blocks[0]["input"])

	// The tool accepted it: a further request is answered without
	// consuming the queue.
	accepted := msg("user", []any{map[string]any{"type": "tool_result", "tool_use_id": m.blocks[0]["id"],
		"content": "Structured output provided successfully"}})
	m = structuredMessage(t, srv, ask, msg("assistant", []any{m.blocks[0]}), accepted)
	assert.Equal(t, "end_turn", m.stopReason)
	assert.Equal(t, "Structured output provided.", finalText(m))

	// An answer that is not a JSON object stays text; without the tool, a
	// JSON answer is text too.
	m = structuredMessage(t, srv, msg("user", "again MARK-so2"))
	assert.Equal(t, "not json", finalText(m))
	srv.SetAnswers(`{"verdict":"fail"}`)
	text, _ := anthropicAnswer(t, srv, "plain MARK-so3")
	assert.Equal(t, `{"verdict":"fail"}`, text)
}
