package outposttest

// Anthropic Messages API (https://docs.anthropic.com/en/api/messages), as
// Claude Code uses it: POST /v1/messages (streaming and not),
// POST /v1/messages/count_tokens, GET /v1/models.

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/outpost-dev/outpost/internal/anthropicwire"
)

const apiAnthropic = "anthropic"

// maxBody bounds a decoded request body.
const maxBody = 64 << 20

func (s *Server) registerAnthropic(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/messages", s.anthropicMessages)
	mux.HandleFunc("POST /v1/messages/count_tokens", s.anthropicCountTokens)
	mux.HandleFunc("GET /v1/models", s.anthropicModels)
	mux.HandleFunc("GET /v1/models/{id}", s.anthropicModel)
}

type anthropicRequest struct {
	Model     string             `json:"model"`
	MaxTokens int                `json:"max_tokens"`
	Stream    bool               `json:"stream"`
	Messages  []anthropicMessage `json:"messages"`
	Tools     []struct {
		Name string `json:"name"`
	} `json:"tools"`
}

type anthropicMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

func decodeAnthropic(body []byte) (anthropicRequest, []Message, error) {
	var req anthropicRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return req, nil, fmt.Errorf("invalid JSON body: %w", err)
	}
	if req.Model == "" {
		return req, nil, fmt.Errorf("model: Field required")
	}
	msgs := make([]Message, 0, len(req.Messages))
	for _, m := range req.Messages {
		msg := Message{Role: m.Role}
		for _, b := range anthropicwire.Blocks(m.Content) {
			c := Content{Type: b.Type, Text: b.Text, IsError: b.IsError}
			if b.Type == "tool_result" {
				c.Text = anthropicwire.ContentText(b.Content)
			}
			switch b.Type {
			case "tool_use":
				c.ToolUseID, c.ToolName, c.ToolInput = b.ID, b.Name, string(b.Input)
			case "tool_result":
				c.ToolUseID = b.ToolUseID
			}
			msg.Content = append(msg.Content, c)
		}
		msgs = append(msgs, msg)
	}
	return req, msgs, nil
}

// conversationOf builds the API-neutral view of decoded messages.
func conversationOf(msgs []Message) conversation {
	isTurn := func(m Message) bool {
		if m.Role != "user" {
			return false
		}
		text := false
		for _, c := range m.Content {
			switch c.Type {
			case "tool_result":
				return false
			case "text":
				text = true
			}
		}
		return text
	}
	cur := -1
	for i := len(msgs) - 1; i >= 0; i-- {
		if isTurn(msgs[i]) {
			cur = i
			break
		}
	}
	var c conversation
	var earlier []string
	for i, m := range msgs {
		switch {
		case i < cur && m.Role == "user":
			earlier = append(earlier, m.Text())
		case i == cur:
			c.current = m.Text()
		case i > cur && m.Role == "user":
			for _, b := range m.Content {
				if b.Type == "tool_result" {
					c.toolResults++
					c.lastToolResult, c.lastToolError = b.Text, b.IsError
				}
			}
		}
	}
	c.earlier = strings.Join(earlier, "\n")
	return c
}

// structuredOutputTool is the tool Claude Code offers the model when it runs
// with --json-schema; the model answers by calling it.
const structuredOutputTool = "StructuredOutput"

func (s *Server) anthropicMessages(w http.ResponseWriter, r *http.Request) {
	bad := func(m string) {
		writeAnthropicError(w, failure{status: http.StatusBadRequest, kind: "invalid_request_error", message: m})
	}
	s.serveModel(w, r, apiAnthropic, bad, func(body []byte) (modelCall, error) {
		req, msgs, err := decodeAnthropic(body)
		c := modelCall{endpoint: "messages", model: req.Model, stream: req.Stream, maxTokens: req.MaxTokens,
			msgs: msgs, conv: conversationOf(msgs)}
		for _, t := range req.Tools {
			c.tools = append(c.tools, t.Name)
			if t.Name == structuredOutputTool {
				c.conv.structuredTool = t.Name
			}
		}
		if err != nil {
			return c, err
		}
		u := estimateUsage(body, req)
		c.out = wire{
			failure: func(p plan) { writeAnthropicError(w, *p.failure) },
			stream:  func(p plan) { s.streamAnthropic(w, r, req.Model, p, u) },
			json:    func(p plan) { s.writeAnthropicJSON(w, r, req.Model, p, u) },
		}
		return c, nil
	})
}

// usage is an Anthropic usage object.
type usage struct {
	Input         int `json:"input_tokens"`
	CacheCreation int `json:"cache_creation_input_tokens"`
	CacheRead     int `json:"cache_read_input_tokens"`
	Output        int `json:"output_tokens"`
}

// normalized is u in the request log's shape.
func (u usage) normalized() Usage {
	return Usage{Input: int64(u.Input), Cached: int64(u.CacheRead), CacheCreated: int64(u.CacheCreation), Output: int64(u.Output)}
}

// estimateUsage makes plausible input counters: about four bytes a token.
// With prompt caching requested (cache_control marks), everything up to the
// last marked message counts as cached (written on a conversation's first
// request, read on later ones) and only the tail as uncached input, as the
// real API reports it.
func estimateUsage(body []byte, req anthropicRequest) usage {
	total := max(len(body)/4, 1)
	mark := []byte(`"cache_control"`)
	if !bytes.Contains(body, mark) {
		return usage{Input: total}
	}
	tail, first := 0, true
	for i := len(req.Messages) - 1; i >= 0; i-- {
		m := req.Messages[i]
		if bytes.Contains(m.Content, mark) {
			break
		}
		tail += len(m.Content)
	}
	for _, m := range req.Messages {
		if m.Role == "assistant" {
			first = false
		}
	}
	input := min(tail/4+3, total)
	if first {
		return usage{Input: input, CacheCreation: total - input}
	}
	return usage{Input: input, CacheRead: total - input}
}

func outputTokens(p plan) int {
	n := len(p.preamble) + len(p.text)
	if p.tool != nil {
		n += len(p.tool.command) + len(p.tool.desc) + 40
	}
	return max(n/4, 1)
}

func randomID(prefix string, n int) string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, n)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return prefix + string(b)
}

func requestID() string { return randomID("req_011C", 20) }

func writeAnthropicError(w http.ResponseWriter, f failure) {
	id := requestID()
	writeJSON(w, f.status, f.header, "request-id", id, map[string]any{
		"type":       "error",
		"error":      map[string]string{"type": f.kind, "message": f.message},
		"request_id": id,
	})
}

// anthropicBlocks renders the content blocks of a plan.
func anthropicBlocks(p plan) []map[string]any {
	var out []map[string]any
	if p.preamble != "" {
		out = append(out, map[string]any{"type": "text", "text": p.preamble})
	}
	if p.text != "" {
		out = append(out, map[string]any{"type": "text", "text": p.text})
	}
	if p.tool != nil {
		out = append(out, map[string]any{"type": "tool_use", "id": randomID("toolu_01", 22),
			"name": p.tool.name, "input": toolInput(p.tool)})
	}
	return out
}

func toolInput(t *toolCall) map[string]any {
	if t.input != nil {
		return t.input
	}
	return map[string]any{"command": t.command, "description": t.desc}
}

func stopReason(p plan) string {
	if p.tool != nil {
		return "tool_use"
	}
	return "end_turn"
}

func (s *Server) writeAnthropicJSON(w http.ResponseWriter, r *http.Request, model string, p plan, u usage) {
	u.Output = outputTokens(p)
	s.reportUsage(r, u.normalized())
	writeJSON(w, http.StatusOK, p.header, "request-id", requestID(), map[string]any{
		"id":            randomID("msg_01", 22),
		"type":          "message",
		"role":          "assistant",
		"model":         model,
		"content":       anthropicBlocks(p),
		"stop_reason":   stopReason(p),
		"stop_sequence": nil,
		"usage":         usageJSON(u),
	})
}

func usageJSON(u usage) map[string]any {
	return map[string]any{
		"input_tokens":                u.Input,
		"cache_creation_input_tokens": u.CacheCreation,
		"cache_read_input_tokens":     u.CacheRead,
		"cache_creation": map[string]int{
			"ephemeral_5m_input_tokens": u.CacheCreation,
			"ephemeral_1h_input_tokens": 0,
		},
		"output_tokens": u.Output,
		"service_tier":  "standard",
	}
}

// send sends one Anthropic event: "event: <type>\ndata: <json>\n\n".
func (e *sse) send(typ string, data any) {
	b, err := json.Marshal(data)
	if err != nil {
		e.ok = false
		return
	}
	e.event(typ, b)
}

func (s *Server) streamAnthropic(w http.ResponseWriter, r *http.Request, model string, p plan, u usage) {
	e := s.openStream(w, r, p, p.header, "request-id")
	start := u
	start.Output = 1
	e.send("message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": randomID("msg_01", 22), "type": "message", "role": "assistant", "model": model,
		"content": []any{}, "stop_reason": nil, "stop_sequence": nil, "usage": usageJSON(start),
	}})
	e.send("ping", map[string]string{"type": "ping"})
	for i, b := range anthropicBlocks(p) {
		switch b["type"] {
		case "text":
			e.send("content_block_start", map[string]any{"type": "content_block_start", "index": i,
				"content_block": map[string]any{"type": "text", "text": ""}})
			for _, chunk := range chunks(b["text"].(string), 24) {
				e.send("content_block_delta", map[string]any{"type": "content_block_delta", "index": i,
					"delta": map[string]string{"type": "text_delta", "text": chunk}})
			}
		case "tool_use":
			e.send("content_block_start", map[string]any{"type": "content_block_start", "index": i,
				"content_block": map[string]any{"type": "tool_use", "id": b["id"], "name": b["name"], "input": map[string]any{}}})
			input, _ := json.Marshal(b["input"])
			for _, chunk := range append([]string{""}, chunks(string(input), 32)...) {
				e.send("content_block_delta", map[string]any{"type": "content_block_delta", "index": i,
					"delta": map[string]string{"type": "input_json_delta", "partial_json": chunk}})
			}
		}
		e.send("content_block_stop", map[string]any{"type": "content_block_stop", "index": i})
	}
	u.Output = outputTokens(p)
	e.send("message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": stopReason(p), "stop_sequence": nil},
		"usage": map[string]int{
			"input_tokens":                u.Input,
			"cache_creation_input_tokens": u.CacheCreation,
			"cache_read_input_tokens":     u.CacheRead,
			"output_tokens":               u.Output,
		}})
	if e.ok {
		s.reportUsage(r, u.normalized())
	}
	e.send("message_stop", map[string]string{"type": "message_stop"})
	if !e.ok {
		abort()
	}
}

// chunks splits s into pieces of about n bytes, on rune boundaries.
func chunks(s string, n int) []string {
	var out []string
	for len(s) > n {
		cut := n
		for cut < len(s) && !utf8Start(s[cut]) {
			cut++
		}
		out = append(out, s[:cut])
		s = s[cut:]
	}
	if s != "" {
		out = append(out, s)
	}
	return out
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }

func (s *Server) anthropicCountTokens(w http.ResponseWriter, r *http.Request) {
	body, err := readBody(r)
	if err != nil {
		s.annotate(r.Context(), func(e *Request) { e.API, e.Endpoint = apiAnthropic, "count_tokens" })
		if errors.Is(err, errBodyTooLarge) {
			writeTooLarge(w, apiAnthropic)
		} else {
			writeAnthropicError(w, failure{status: http.StatusBadRequest, kind: "invalid_request_error", message: "read body: " + err.Error()})
		}
		return
	}
	req, msgs, err := decodeAnthropic(body)
	s.annotate(r.Context(), func(e *Request) {
		e.API, e.Endpoint, e.Model, e.Messages = apiAnthropic, "count_tokens", req.Model, msgs
	})
	if err != nil {
		writeAnthropicError(w, failure{status: http.StatusBadRequest, kind: "invalid_request_error", message: err.Error()})
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]int{"input_tokens": max(len(body)/4, 1)})
}

// models is what GET /v1/models lists: Claude Code's defaults and two
// others, each with a list price (see [Models]).
var models = []string{"claude-opus-5-5", "claude-sonnet-5-5", "claude-sonnet-5", "claude-haiku-4-5"}

// Models lists the model ids the server announces on its model-listing
// endpoints (Anthropic's and Chat Completions'). Outpost prices each of
// them at its vendor's list price, so a cost cap holds offline too.
func Models() []string {
	return append(append([]string(nil), models...), chatModelIDs...)
}

func modelJSON(id string) map[string]any {
	return map[string]any{"type": "model", "id": id, "display_name": id, "created_at": "2026-01-01T00:00:00Z"}
}

func (s *Server) anthropicModels(w http.ResponseWriter, r *http.Request) {
	s.annotate(r.Context(), func(e *Request) { e.API, e.Endpoint = apiAnthropic, "models" })
	data := make([]map[string]any, len(models))
	for i, m := range models {
		data[i] = modelJSON(m)
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"data": data, "has_more": false,
		"first_id": models[0], "last_id": models[len(models)-1]})
}

func (s *Server) anthropicModel(w http.ResponseWriter, r *http.Request) {
	s.annotate(r.Context(), func(e *Request) { e.API, e.Endpoint = apiAnthropic, "models" })
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(modelJSON(r.PathValue("id")))
}
