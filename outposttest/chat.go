package outposttest

// OpenAI Chat Completions API, as GitHub Copilot CLI 1.0.102 uses it in BYOK
// mode (COPILOT_PROVIDER_TYPE=openai, wire API "completions"): POST
// /v1/chat/completions (also /chat/completions, for a base URL given
// without /v1), always streaming with stream_options.include_usage, tools as
// {"type":"function","function":{name,description,parameters}}. Copilot's
// shell tool is "bash" with arguments {"command","description"}.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

const apiChat = "chat"

func (s *Server) registerChat(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/chat/completions", s.chatCompletions)
	mux.HandleFunc("POST /chat/completions", s.chatCompletions)
	mux.HandleFunc("GET /models", s.chatModels)
}

type chatRequest struct {
	Model               string        `json:"model"`
	Stream              bool          `json:"stream"`
	Messages            []chatMessage `json:"messages"`
	Tools               []chatTool    `json:"tools"`
	MaxTokens           int           `json:"max_tokens"`
	MaxCompletionTokens int           `json:"max_completion_tokens"`
	StreamOptions       *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	// ResponseFormat carries the structured-output format (see [outputSchema]).
	ResponseFormat json.RawMessage `json:"response_format"`
}

type chatTool struct {
	Type     string `json:"type"`
	Function struct {
		Name string `json:"name"`
	} `json:"function"`
}

type chatMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCallID string          `json:"tool_call_id"`
	ToolCalls  []struct {
		ID       string `json:"id"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls"`
}

// decodeChat decodes a request body into the request and its log view.
func decodeChat(body []byte) (chatRequest, []Message, error) {
	var req chatRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return req, nil, fmt.Errorf("invalid JSON body: %w", err)
	}
	if req.Model == "" {
		return req, nil, fmt.Errorf("you must provide a model parameter")
	}
	var msgs []Message
	for _, m := range req.Messages {
		switch m.Role {
		case "tool":
			msgs = append(msgs, Message{Role: "user", Content: []Content{{Type: "tool_result",
				ToolUseID: m.ToolCallID, Text: responsesText(m.Content)}}})
		default:
			var content []Content
			if t := responsesText(m.Content); t != "" {
				content = append(content, Content{Type: "text", Text: t})
			}
			for _, tc := range m.ToolCalls {
				content = append(content, Content{Type: "tool_use", ToolUseID: tc.ID,
					ToolName: tc.Function.Name, ToolInput: tc.Function.Arguments})
			}
			msgs = append(msgs, Message{Role: m.Role, Content: content})
		}
	}
	return req, msgs, nil
}

// chatConversation builds the API-neutral view: system and developer
// messages are left out, and Copilot's <current_datetime> preamble (and
// other leading context tags) stay in the text, which is harmless because
// scenarios only read markers and directives.
func chatConversation(msgs []Message) conversation {
	var turn []Message
	for _, m := range msgs {
		if m.Role == "system" || m.Role == "developer" {
			continue
		}
		turn = append(turn, m)
	}
	return conversationOf(turn)
}

func (s *Server) chatModels(w http.ResponseWriter, r *http.Request) {
	s.annotate(r.Context(), func(e *Request) { e.API, e.Endpoint = apiChat, "models" })
	data := make([]map[string]any, 0, len(chatModelIDs))
	for _, id := range chatModelIDs {
		data = append(data, map[string]any{"id": id, "object": "model", "created": 1700000000, "owned_by": "outposttest"})
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"object": "list", "data": data})
}

var chatModelIDs = []string{"gpt-4.1", "gpt-6.1-sol"}

func (s *Server) chatCompletions(w http.ResponseWriter, r *http.Request) {
	bad := func(m string) {
		writeChatError(w, responsesError{status: http.StatusBadRequest, typ: "invalid_request_error", message: m})
	}
	s.serveModel(w, r, apiChat, bad, func(body []byte) (modelCall, error) {
		req, msgs, err := decodeChat(body)
		c := modelCall{endpoint: "chat.completions", model: req.Model, stream: req.Stream,
			maxTokens: max(req.MaxTokens, req.MaxCompletionTokens), msgs: msgs,
			schema: outputSchema(req.ResponseFormat, true), conv: chatConversation(msgs)}
		for _, t := range req.Tools {
			c.tools = append(c.tools, t.Function.Name)
		}
		if err != nil {
			return c, err
		}
		u := estimateChatUsage(body, msgs)
		c.out = wire{
			failure: func(p plan) { writeChatError(w, s.chatFailure(p)) },
			stream:  func(p plan) { s.streamChat(w, r, req, p, u) },
			json:    func(p plan) { s.writeChatJSON(w, r, req.Model, p, req.Tools, u) },
		}
		return c, nil
	})
}

// estimateChatUsage: about four bytes a token; a continued conversation
// reports all but the last user turn's tail as cached (prompt_tokens
// includes the cached part, as the API reports it).
func estimateChatUsage(body []byte, msgs []Message) responsesUsage {
	return estimateResponsesUsage(body, msgs)
}

func chatUsageJSON(u responsesUsage) map[string]any {
	return map[string]any{
		"prompt_tokens":             u.Input,
		"completion_tokens":         u.Output,
		"total_tokens":              u.Input + u.Output,
		"prompt_tokens_details":     map[string]int{"cached_tokens": u.Cached},
		"completion_tokens_details": map[string]int{"reasoning_tokens": u.Reasoning},
	}
}

// chatShellTool picks the tool name and arguments for the scenario's shell
// command from the tools the request declares: Copilot's "bash"
// {command, description}, or a generic "shell"/"exec_command".
func chatShellTool(tools []chatTool, t *toolCall) (string, string) {
	has := func(n string) bool {
		for _, x := range tools {
			if x.Function.Name == n {
				return true
			}
		}
		return false
	}
	var name string
	var args map[string]any
	switch {
	case has("bash"):
		name, args = "bash", map[string]any{"command": t.command, "description": t.desc}
	case has("Bash"):
		name, args = "Bash", map[string]any{"command": t.command, "description": t.desc}
	case has("shell"):
		name, args = "shell", map[string]any{"command": []string{"bash", "-lc", t.command}}
	default:
		name, args = "bash", map[string]any{"command": t.command, "description": t.desc}
	}
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(args)
	return name, strings.TrimSuffix(b.String(), "\n")
}

func (s *Server) writeChatJSON(w http.ResponseWriter, r *http.Request, model string, p plan, tools []chatTool, u responsesUsage) {
	u.Output = outputTokens(p)
	s.reportUsage(r, u.normalized())
	msg := map[string]any{"role": "assistant", "content": strings.TrimSpace(p.preamble + " " + p.text)}
	finish := "stop"
	if p.tool != nil {
		name, args := chatShellTool(tools, p.tool)
		msg["tool_calls"] = []any{map[string]any{"id": randomID("call_", 24), "type": "function",
			"function": map[string]any{"name": name, "arguments": args}}}
		finish = "tool_calls"
	}
	writeJSON(w, http.StatusOK, nil, "x-request-id", requestID(), map[string]any{
		"id": randomID("chatcmpl-", 24), "object": "chat.completion", "created": s.cfg.now().Unix(),
		"model": model, "choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}},
		"usage": chatUsageJSON(u),
	})
}

// streamChat writes the answer as Chat Completions streams it: "data:"
// chunks with choices[0].delta (role, then content pieces, then tool_calls
// with the arguments in pieces), a chunk with finish_reason, a usage chunk
// with empty choices when stream_options.include_usage is set, then
// "data: [DONE]".
func (s *Server) streamChat(w http.ResponseWriter, r *http.Request, req chatRequest, p plan, u responsesUsage) {
	e := s.openStream(w, r, p, openAIHeader(p.header), "x-request-id")
	id := randomID("chatcmpl-", 24)
	created := s.cfg.now().Unix()
	send := func(choices []any, usage any) {
		c := map[string]any{"id": id, "object": "chat.completion.chunk", "created": created,
			"model": req.Model, "choices": choices}
		if usage != nil {
			c["usage"] = usage
		}
		e.data(c)
	}
	choice := func(delta map[string]any, finish any) []any {
		return []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}
	}
	send(choice(map[string]any{"role": "assistant", "content": ""}, nil), nil)
	text := p.preamble
	if p.text != "" {
		if text != "" {
			text += "\n\n"
		}
		text += p.text
	}
	for _, c := range chunks(text, 24) {
		send(choice(map[string]any{"content": c}, nil), nil)
	}
	finish := "stop"
	if p.tool != nil {
		name, args := chatShellTool(req.Tools, p.tool)
		call := randomID("call_", 24)
		send(choice(map[string]any{"tool_calls": []any{map[string]any{"index": 0, "id": call, "type": "function",
			"function": map[string]any{"name": name, "arguments": ""}}}}, nil), nil)
		for _, c := range chunks(args, 32) {
			send(choice(map[string]any{"tool_calls": []any{map[string]any{"index": 0,
				"function": map[string]any{"arguments": c}}}}, nil), nil)
		}
		finish = "tool_calls"
	}
	send(choice(map[string]any{}, finish), nil)
	if req.StreamOptions != nil && req.StreamOptions.IncludeUsage {
		u.Output = outputTokens(p)
		send([]any{}, chatUsageJSON(u))
		if e.ok {
			s.reportUsage(r, u.normalized())
		}
	}
	e.done()
	if !e.ok {
		abort()
	}
}

// data sends one "data: <json>" event (Chat Completions has no event names).
func (e *sse) data(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		e.ok = false
		return
	}
	e.event("", b)
}

// done sends the terminating "data: [DONE]".
func (e *sse) done() { e.event("", []byte("[DONE]")) }

func writeChatError(w http.ResponseWriter, e responsesError) { writeResponsesError(w, e) }

// CopilotRateLimitText is the rate-limit refusal GitHub's Copilot service
// words for an exhausted allowance; [ScenarioQuota] sends it through the
// Chat Completions API with the hours until the reset.
func CopilotRateLimitText(in time.Duration) string {
	return "Sorry, you've hit a rate limit that restricts the number of Copilot model requests you can make within a specific time period. " +
		"Please try again in " + hoursText(in) + ". Please review our Terms of Service (https://docs.github.com/site-policy/github-terms/github-terms-of-service)."
}

// hoursText words a duration the way the Copilot service does: "2 hours",
// "15 hours 23 minutes", "1 hour", "5 minutes".
func hoursText(d time.Duration) string {
	d = d.Round(time.Minute)
	h, m := int(d/time.Hour), int(d%time.Hour/time.Minute)
	unit := func(n int, s string) string {
		if n == 1 {
			return "1 " + s
		}
		return fmt.Sprintf("%d %ss", n, s)
	}
	switch {
	case h > 0 && m > 0:
		return unit(h, "hour") + " " + unit(m, "minute")
	case h > 0:
		return unit(h, "hour")
	default:
		return unit(max(m, 1), "minute")
	}
}

// chatFailure renders a scenario's failure for Chat Completions clients
// (Copilot in BYOK mode): OpenAI error bodies, with the Copilot service's
// own quota wordings.
func (s *Server) chatFailure(p plan) responsesError {
	f := *p.failure
	e := responsesError{status: f.status, message: f.message, header: openAIHeader(f.header)}
	now := s.cfg.now()
	switch p.scenario {
	case ScenarioRateLimit:
		e.typ, e.code = "rate_limit_exceeded", "rate_limited"
		e.message = "rate limit exceeded"
	case ScenarioQuota:
		reset := s.quotaReset(now)
		e.typ, e.code = "rate_limit_exceeded", "rate_limited"
		e.message = CopilotRateLimitText(reset.Sub(now))
	case ScenarioSpendLimit, ScenarioCredits:
		e.status = http.StatusPaymentRequired
		e.typ, e.code = "insufficient_quota", "quota_exceeded"
		e.message = "You have no quota"
	case ScenarioServerError:
		e.typ = "server_error"
		e.message = "Internal Server Error"
	default:
		e.openAICommon(p)
	}
	return e
}
