package outposttest

// OpenAI Responses API, as Codex CLI 0.169.0 uses it through a custom model
// provider (wire_api = "responses"): POST /v1/responses, always streaming
// (Server-Sent Events). A WebSocket upgrade of GET /v1/responses is refused
// with 426, so a client that prefers WebSockets falls back to HTTP.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

const apiResponses = "responses"

func (s *Server) registerResponses(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/responses", s.responses)
	mux.HandleFunc("GET /v1/responses", s.responsesUpgrade)
}

type responsesRequest struct {
	Model           string          `json:"model"`
	Stream          bool            `json:"stream"`
	Input           json.RawMessage `json:"input"`
	Tools           []responsesTool `json:"tools"`
	MaxOutputTokens int             `json:"max_output_tokens"`
	PromptCacheKey  string          `json:"prompt_cache_key"`
	// Text carries the structured-output format (see [outputSchema]).
	Text json.RawMessage `json:"text"`
}

// outputSchema returns the JSON Schema of a structured-output format, or
// nil: raw is the Responses API's "text" ({"format":{"type":"json_schema",
// "schema":…}}) or, with nested, the Chat Completions API's
// "response_format" ({"type":"json_schema","json_schema":{"schema":…}}).
// A shape it does not know is not an error: the request just has no schema.
func outputSchema(raw json.RawMessage, nested bool) json.RawMessage {
	type format struct {
		Type       string          `json:"type"`
		Schema     json.RawMessage `json:"schema"`
		JSONSchema struct {
			Schema json.RawMessage `json:"schema"`
		} `json:"json_schema"`
	}
	var f format
	if nested {
		if json.Unmarshal(raw, &f) != nil {
			return nil
		}
		f.Schema = f.JSONSchema.Schema
	} else {
		var text struct {
			Format format `json:"format"`
		}
		if json.Unmarshal(raw, &text) != nil {
			return nil
		}
		f = text.Format
	}
	if f.Type != "json_schema" || len(f.Schema) == 0 || string(f.Schema) == "null" {
		return nil
	}
	return f.Schema
}

// responsesTool is a tool declaration; namespaces nest tools.
type responsesTool struct {
	Type  string          `json:"type"`
	Name  string          `json:"name"`
	Tools []responsesTool `json:"tools"`
}

// responsesItem is the union of the input item shapes Codex sends.
type responsesItem struct {
	Type      string          `json:"type"`
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	CallID    string          `json:"call_id"`
	Name      string          `json:"name"`
	Arguments string          `json:"arguments"`
	Input     string          `json:"input"`
	Output    json.RawMessage `json:"output"`
	Tools     []responsesTool `json:"tools"`
}

// responsesText flattens a content or output field: a string, or a list of
// parts whose text fields are joined by newlines.
func responsesText(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var str string
	if json.Unmarshal(raw, &str) == nil {
		return str
	}
	var parts []struct {
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) == nil {
		var out []string
		for _, p := range parts {
			if p.Text != "" {
				out = append(out, p.Text)
			}
		}
		return strings.Join(out, "\n")
	}
	var obj struct {
		Output string `json:"output"`
		Text   string `json:"text"`
	}
	if json.Unmarshal(raw, &obj) == nil {
		return obj.Output + obj.Text
	}
	return ""
}

// decodeResponses decodes a request body into the request, the log view of
// its input and every tool it declares (top level and additional_tools
// items, namespaces flattened as "namespace.name").
func decodeResponses(body []byte) (responsesRequest, []Message, []responsesTool, error) {
	var req responsesRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return req, nil, nil, fmt.Errorf("invalid JSON body: %w", err)
	}
	if req.Model == "" {
		return req, nil, nil, fmt.Errorf("missing required parameter: 'model'")
	}
	var items []responsesItem
	if len(req.Input) > 0 {
		var str string
		if json.Unmarshal(req.Input, &str) == nil {
			items = []responsesItem{{Type: "message", Role: "user", Content: req.Input}}
		} else if err := json.Unmarshal(req.Input, &items); err != nil {
			return req, nil, nil, fmt.Errorf("invalid 'input': %w", err)
		}
	}
	tools := flattenTools(nil, "", req.Tools)
	var msgs []Message
	for _, it := range items {
		switch it.Type {
		case "", "message":
			msgs = append(msgs, Message{Role: it.Role, Content: []Content{{Type: "text", Text: responsesText(it.Content)}}})
		case "function_call":
			msgs = append(msgs, Message{Role: "assistant", Content: []Content{{Type: "tool_use",
				ToolUseID: it.CallID, ToolName: it.Name, ToolInput: it.Arguments}}})
		case "custom_tool_call":
			in, _ := json.Marshal(it.Input)
			msgs = append(msgs, Message{Role: "assistant", Content: []Content{{Type: "tool_use",
				ToolUseID: it.CallID, ToolName: it.Name, ToolInput: string(in)}}})
		case "function_call_output", "custom_tool_call_output":
			msgs = append(msgs, Message{Role: "user", Content: []Content{{Type: "tool_result",
				ToolUseID: it.CallID, Text: responsesText(it.Output)}}})
		case "additional_tools":
			tools = flattenTools(tools, "", it.Tools)
		}
	}
	return req, msgs, tools, nil
}

func flattenTools(dst []responsesTool, prefix string, ts []responsesTool) []responsesTool {
	for _, t := range ts {
		if t.Type == "namespace" {
			dst = flattenTools(dst, prefix+t.Name+".", t.Tools)
			continue
		}
		name := t.Name
		if name == "" {
			name = t.Type // web_search, tool_search, ...
		}
		dst = append(dst, responsesTool{Type: t.Type, Name: prefix + name})
	}
	return dst
}

// contextBlock reports whether a user message is context Codex adds itself
// (<environment_context>, AGENTS.md instructions), not a user turn.
func contextBlock(text string) bool {
	t := strings.TrimSpace(text)
	return strings.HasPrefix(t, "<environment_context>") || strings.HasPrefix(t, "<user_instructions>") ||
		strings.HasPrefix(t, "# AGENTS.md") || strings.HasPrefix(t, "<turn_aborted>")
}

// responsesConversation builds the API-neutral view: developer and system
// messages and Codex's own context blocks are left out.
func responsesConversation(msgs []Message) conversation {
	var turn []Message
	for _, m := range msgs {
		if m.Role == "developer" || m.Role == "system" {
			continue
		}
		if m.Role == "user" && len(m.Content) == 1 && m.Content[0].Type == "text" && contextBlock(m.Content[0].Text) {
			continue
		}
		turn = append(turn, m)
	}
	return conversationOf(turn)
}

// responsesUpgrade refuses a WebSocket upgrade of the Responses endpoint:
// Codex then falls back to HTTP streaming.
func (s *Server) responsesUpgrade(w http.ResponseWriter, r *http.Request) {
	s.annotate(r.Context(), func(e *Request) { e.API, e.Endpoint = apiResponses, "websocket" })
	writeResponsesError(w, responsesError{status: http.StatusUpgradeRequired, typ: "invalid_request_error",
		code: "websocket_not_supported", message: "outposttest: WebSocket is not supported; use HTTP streaming"})
}

func (s *Server) responses(w http.ResponseWriter, r *http.Request) {
	bad := func(m string) {
		writeResponsesError(w, responsesError{status: http.StatusBadRequest, typ: "invalid_request_error", message: m})
	}
	s.serveModel(w, r, apiResponses, bad, func(body []byte) (modelCall, error) {
		req, msgs, tools, err := decodeResponses(body)
		c := modelCall{endpoint: "responses", model: req.Model, stream: req.Stream, maxTokens: req.MaxOutputTokens,
			msgs: msgs, schema: outputSchema(req.Text, false), conv: responsesConversation(msgs)}
		for _, t := range tools {
			c.tools = append(c.tools, t.Name)
		}
		if err != nil {
			return c, err
		}
		u := estimateResponsesUsage(body, msgs)
		c.out = wire{
			failure: func(p plan) { writeResponsesError(w, s.responsesFailure(p)) },
			stream:  func(p plan) { s.streamResponses(w, r, req.Model, p, tools, u) },
			json:    func(p plan) { s.writeResponsesJSON(w, r, req.Model, p, tools, u) },
		}
		return c, nil
	})
}

// responsesUsage is a Responses API usage object.
type responsesUsage struct {
	Input, Cached, Output, Reasoning int
}

func (u responsesUsage) json() map[string]any {
	return map[string]any{
		"input_tokens":          u.Input,
		"input_tokens_details":  map[string]int{"cached_tokens": u.Cached},
		"output_tokens":         u.Output,
		"output_tokens_details": map[string]int{"reasoning_tokens": u.Reasoning},
		"total_tokens":          u.Input + u.Output,
	}
}

// normalized is u in the request log's shape (Input without the cached part).
func (u responsesUsage) normalized() Usage {
	return Usage{Input: int64(u.Input - u.Cached), Cached: int64(u.Cached), Output: int64(u.Output), Reasoning: int64(u.Reasoning)}
}

// estimateResponsesUsage makes plausible counters: about four bytes a
// token; a request that continues a conversation (it carries an earlier
// answer or tool call) reports everything before the last user turn's tail
// as cached, as the prompt cache would. Input includes the cached part, as
// the API reports it.
func estimateResponsesUsage(body []byte, msgs []Message) responsesUsage {
	total := max(len(body)/4, 1)
	continued := false
	tail := 0
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == "assistant" {
			continued = true
			break
		}
		for _, c := range msgs[i].Content {
			tail += len(c.Text) + len(c.ToolInput)
		}
	}
	u := responsesUsage{Input: total}
	if continued {
		u.Cached = max(total-tail/4-64, 0)
	}
	return u
}

// reasoningSummary is the reasoning summary every successful answer carries.
const reasoningSummary = "**Answering** Following the outposttest script."

func (s *Server) writeResponsesJSON(w http.ResponseWriter, r *http.Request, model string, p plan, tools []responsesTool, u responsesUsage) {
	// Output includes the reasoning part, as in the stream.
	u.Output = outputTokens(p) + reasoningTokens
	u.Reasoning = reasoningTokens
	s.reportUsage(r, u.normalized())
	items := responsesItems(p, tools)
	out := make([]map[string]any, len(items))
	for i, it := range items {
		out[i] = it.done
	}
	writeJSON(w, http.StatusOK, openAIHeader(p.header), "x-request-id", requestID(), map[string]any{
		"id": randomID("resp_", 24), "object": "response", "status": "completed",
		"model": model, "output": out, "usage": u.json(),
	})
}

// reasoningTokens is the reasoning part of every answer's output tokens.
const reasoningTokens = 8

// responsesOutput is one output item: its added and done forms and the
// argument or text stream between them.
type responsesOutput struct {
	added, done map[string]any
	// kind selects the delta events: "text", "function", "custom", "".
	kind  string
	text  string
	itemI string
}

// shellTool picks how to ask the client for a shell command, from the
// tools the request declares: exec_command (unified exec, {"cmd": …}),
// shell ({"command": ["bash","-lc", …]}) or, in code mode, the exec custom
// tool running JavaScript that calls tools.exec_command.
func shellTool(tools []responsesTool) (name, kind string) {
	has := func(n string) bool {
		for _, t := range tools {
			if t.Name == n {
				return true
			}
		}
		return false
	}
	switch {
	case has("exec_command"):
		return "exec_command", "function"
	case has("shell"):
		return "shell", "function"
	case has("functions.exec"):
		return "exec", "custom"
	case has("exec"):
		return "exec", "custom"
	}
	return "exec_command", "function"
}

func responsesItems(p plan, tools []responsesTool) []responsesOutput {
	var out []responsesOutput
	rs := randomID("rs_", 24)
	summary := []map[string]any{{"type": "summary_text", "text": reasoningSummary}}
	out = append(out, responsesOutput{
		added: map[string]any{"type": "reasoning", "id": rs, "summary": []any{}},
		done:  map[string]any{"type": "reasoning", "id": rs, "summary": summary},
	})
	message := func(text string) {
		id := randomID("msg_", 24)
		part := map[string]any{"type": "output_text", "text": text, "annotations": []any{}}
		out = append(out, responsesOutput{
			added: map[string]any{"type": "message", "id": id, "role": "assistant", "status": "in_progress", "content": []any{}},
			done: map[string]any{"type": "message", "id": id, "role": "assistant", "status": "completed",
				"content": []any{part}},
			kind: "text", text: text, itemI: id,
		})
	}
	if p.preamble != "" {
		message(p.preamble)
	}
	if p.text != "" {
		message(p.text)
	}
	if p.tool != nil {
		name, kind := shellTool(tools)
		id, call := randomID("fc_", 24), randomID("call_", 24)
		var args string
		switch {
		case kind == "custom":
			args = "const r = await tools.exec_command({cmd: " + jsString(p.tool.command) + "});\ntext(JSON.stringify(r));\n"
			id = randomID("ctc_", 24)
			out = append(out, responsesOutput{
				added: map[string]any{"type": "custom_tool_call", "id": id, "call_id": call, "name": name, "input": "", "status": "in_progress"},
				done:  map[string]any{"type": "custom_tool_call", "id": id, "call_id": call, "name": name, "input": args, "status": "completed"},
				kind:  "custom", text: args, itemI: id,
			})
			return out
		case name == "shell":
			b, _ := json.Marshal(map[string]any{"command": []string{"bash", "-lc", p.tool.command}})
			args = string(b)
		default:
			b, _ := json.Marshal(map[string]any{"cmd": p.tool.command})
			args = string(b)
		}
		out = append(out, responsesOutput{
			added: map[string]any{"type": "function_call", "id": id, "call_id": call, "name": name, "arguments": "", "status": "in_progress"},
			done:  map[string]any{"type": "function_call", "id": id, "call_id": call, "name": name, "arguments": args, "status": "completed"},
			kind:  "function", text: args, itemI: id,
		})
	}
	return out
}

// jsString quotes s as a JavaScript string literal (JSON, without HTML escapes).
func jsString(s string) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return strings.TrimSuffix(b.String(), "\n")
}

// streamResponses writes the answer as the Responses API streams it:
// response.created, response.in_progress, then per output item
// response.output_item.added, its deltas (output_text, function call
// arguments or custom tool input) and response.output_item.done, then
// response.completed with usage. Every event carries a sequence_number.
func (s *Server) streamResponses(w http.ResponseWriter, r *http.Request, model string, p plan, tools []responsesTool, u responsesUsage) {
	e := s.openStream(w, r, p, openAIHeader(p.header), "x-request-id")
	seq := 0
	send := func(typ string, data map[string]any) {
		data["type"] = typ
		data["sequence_number"] = seq
		seq++
		e.send(typ, data)
	}
	id := randomID("resp_", 24)
	resp := func(status string, output []any, usage any) map[string]any {
		return map[string]any{"id": id, "object": "response", "created_at": s.cfg.now().Unix(),
			"status": status, "model": model, "output": output, "usage": usage}
	}
	send("response.created", map[string]any{"response": resp("in_progress", []any{}, nil)})
	send("response.in_progress", map[string]any{"response": resp("in_progress", []any{}, nil)})
	var done []any
	for i, it := range responsesItems(p, tools) {
		send("response.output_item.added", map[string]any{"output_index": i, "item": it.added})
		switch it.kind {
		case "text":
			part := map[string]any{"type": "output_text", "text": "", "annotations": []any{}}
			send("response.content_part.added", map[string]any{"item_id": it.itemI, "output_index": i, "content_index": 0, "part": part})
			for _, c := range chunks(it.text, 24) {
				send("response.output_text.delta", map[string]any{"item_id": it.itemI, "output_index": i, "content_index": 0, "delta": c})
			}
			send("response.output_text.done", map[string]any{"item_id": it.itemI, "output_index": i, "content_index": 0, "text": it.text})
			part = map[string]any{"type": "output_text", "text": it.text, "annotations": []any{}}
			send("response.content_part.done", map[string]any{"item_id": it.itemI, "output_index": i, "content_index": 0, "part": part})
		case "function":
			for _, c := range chunks(it.text, 32) {
				send("response.function_call_arguments.delta", map[string]any{"item_id": it.itemI, "output_index": i, "delta": c})
			}
			send("response.function_call_arguments.done", map[string]any{"item_id": it.itemI, "output_index": i, "arguments": it.text})
		case "custom":
			for _, c := range chunks(it.text, 32) {
				send("response.custom_tool_call_input.delta", map[string]any{"item_id": it.itemI, "output_index": i, "delta": c})
			}
			send("response.custom_tool_call_input.done", map[string]any{"item_id": it.itemI, "output_index": i, "input": it.text})
		}
		send("response.output_item.done", map[string]any{"output_index": i, "item": it.done})
		done = append(done, it.done)
	}
	u.Output = outputTokens(p) + reasoningTokens
	u.Reasoning = reasoningTokens
	send("response.completed", map[string]any{"response": resp("completed", done, u.json())})
	if e.ok {
		s.reportUsage(r, u.normalized())
	}
	if !e.ok {
		abort()
	}
}

// responsesError is an OpenAI API error body:
// {"error":{"message","type","param","code", extra…}}.
type responsesError struct {
	status  int
	typ     string
	code    string
	message string
	extra   map[string]any
	header  map[string]string
}

func writeResponsesError(w http.ResponseWriter, e responsesError) {
	body := map[string]any{"message": e.message, "type": e.typ, "param": nil, "code": nil}
	if e.code != "" {
		body["code"] = e.code
	}
	for k, v := range e.extra {
		body[k] = v
	}
	writeJSON(w, e.status, e.header, "x-request-id", requestID(), map[string]any{"error": body})
}

// responsesFailure renders a scenario's failure the way the OpenAI
// (and Codex backend) API words it.
func (s *Server) responsesFailure(p plan) responsesError {
	f := *p.failure
	e := responsesError{status: f.status, message: f.message, header: openAIHeader(f.header)}
	now := s.cfg.now()
	switch p.scenario {
	case ScenarioRateLimit:
		e.typ, e.code = "rate_limit_exceeded", "rate_limit_exceeded"
		e.message = "Rate limit reached for requests. Please try again in " + f.header["retry-after"] + "s."
	case ScenarioQuota:
		// The Codex backend's plan usage limit: Codex turns it into
		// "You've hit your usage limit. … try again at <time>."
		reset := s.quotaReset(now)
		secs := max(int(reset.Sub(now).Round(time.Second)/time.Second), 0)
		e.typ = "usage_limit_reached"
		e.message = "The usage limit has been reached"
		e.extra = map[string]any{"plan_type": "plus", "resets_at": reset.Unix(), "resets_in_seconds": secs}
		e.header["x-codex-primary-used-percent"] = "100"
		e.header["x-codex-primary-window-minutes"] = "300"
		e.header["x-codex-primary-reset-at"] = fmt.Sprint(reset.Unix())
		e.header["x-codex-primary-reset-after-seconds"] = fmt.Sprint(secs)
		e.header["x-codex-rate-limit-reached-type"] = "primary"
	case ScenarioSpendLimit, ScenarioCredits:
		e.status = http.StatusTooManyRequests
		e.typ, e.code = "insufficient_quota", "insufficient_quota"
		e.message = "You exceeded your current quota, please check your plan and billing details."
	case ScenarioServerError:
		e.typ = "server_error"
		e.message = "The server had an error while processing your request. Sorry about that!"
	default:
		e.openAICommon(p)
	}
	return e
}

// InsufficientQuotaText is the OpenAI APIs' refusal of a project without
// quota (429 insufficient_quota), which [ScenarioInsufficientQuota] sends.
const InsufficientQuotaText = "You exceeded your current quota, please check your plan and billing details. " +
	"For more information on this error, read the docs: https://platform.openai.com/docs/guides/error-codes/api-errors."

// openAICommon fills the error bodies both OpenAI wire APIs share.
func (e *responsesError) openAICommon(p plan) {
	switch p.scenario {
	case ScenarioInsufficientQuota:
		e.status = http.StatusTooManyRequests
		e.typ, e.code = "insufficient_quota", "insufficient_quota"
		e.message = InsufficientQuotaText
	case ScenarioOrgRateLimit:
		e.typ, e.code = "tokens", "rate_limit_exceeded"
		e.message = fmt.Sprintf("Rate limit reached for %s in organization org-outposttest on tokens per min (TPM): "+
			"Limit %d, Used %d, Requested 1200. Please try again in %ss. "+
			"Visit https://platform.openai.com/account/rate-limits to learn more.",
			p.model, orgInputTokensPerMinute, orgInputTokensPerMinute-400, e.header["retry-after"])
		e.header["x-ratelimit-limit-tokens"] = fmt.Sprint(orgInputTokensPerMinute)
		e.header["x-ratelimit-remaining-tokens"] = "400"
	case ScenarioOverloaded:
		e.status = http.StatusServiceUnavailable
		e.typ, e.code = "server_error", "server_is_overloaded"
		e.message = "The server is overloaded. Please try again later."
	case ScenarioUnavailable:
		e.typ = "server_error"
		e.message = "Service Unavailable"
	case ScenarioUnauthorized:
		e.typ, e.code = "invalid_request_error", "invalid_api_key"
		e.message = "Incorrect API key provided: sk-test-****lder."
	default:
		e.typ = "invalid_request_error"
	}
}
