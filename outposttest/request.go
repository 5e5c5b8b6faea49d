package outposttest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"time"
)

// Redacted replaces the value of every credential-bearing header in the
// request log.
const Redacted = "REDACTED"

// Request is one logged request. Model fields are set only for model
// endpoints whose body decoded.
type Request struct {
	// Time is when the request arrived (by the server's clock).
	Time time.Time
	// Method, Path and Query are the request line.
	Method, Path, Query string
	// Header holds the request headers with credential values (X-Api-Key,
	// Authorization, cookies, anything named like a key, token or secret)
	// replaced by [Redacted].
	Header http.Header
	// KeyFingerprint identifies the credential the request carried (the
	// X-Api-Key or api-key value, or the Authorization bearer token) without
	// revealing it: [KeyFingerprint] of the value, "" when there was none.
	// Compare it with KeyFingerprint(expected) to prove which key arrived.
	KeyFingerprint string
	// API names the wire API that served the request ("anthropic"), or ""
	// for probes and unknown paths.
	API string
	// Endpoint is a short name of what was served: "messages",
	// "count_tokens", "models", "probe" or "" (not found).
	Endpoint string
	// Model, Stream, MaxTokens, Tools (names) and Messages are decoded from
	// the body.
	Model     string
	Stream    bool
	MaxTokens int
	Tools     []string
	Messages  []Message
	// OutputSchema is the JSON Schema the request asks the answer to follow
	// (structured output), as sent: the Responses API's text.format.schema
	// and the Chat Completions API's response_format.json_schema.schema,
	// when the format type is "json_schema"; nil otherwise (and always for
	// the Anthropic API).
	OutputSchema json.RawMessage `json:"output_schema,omitempty"`
	// Auxiliary is true for a model request answered outside the scenario
	// machinery (no tools and not streaming: titles, topics, probes).
	Auxiliary bool
	// Directive is the scenario named by a prompt directive, if any.
	Directive Scenario
	// Scenario is the scenario that answered a model request.
	Scenario Scenario
	// Status is the HTTP status sent; 0 when the handler never answered
	// (a hang released by the client or by Close).
	Status int
	// Usage is the token usage the server reported in its answer (the final
	// figures of a stream), normalized across APIs; nil when the answer
	// carried none (failures, a Chat stream without include_usage).
	Usage *Usage
}

// Usage is the token usage of one answer, in one shape for every API:
// Input counts uncached input tokens (the OpenAI APIs' input or prompt
// tokens minus their cached part; the Anthropic API's input_tokens as
// sent), Cached the cache reads, CacheCreated the cache writes (Anthropic
// only), Output the output tokens (reasoning included) and Reasoning their
// reasoning part (OpenAI only).
type Usage struct {
	Input, Cached, CacheCreated, Output, Reasoning int64
}

// KeyFingerprint is the fingerprint [Request.KeyFingerprint] records for a
// credential value: "sha256:" and the first 16 hex digits of its SHA-256.
func KeyFingerprint(key string) string {
	sum := sha256.Sum256([]byte(key))
	return "sha256:" + hex.EncodeToString(sum[:8])
}

// keyFingerprint finds the credential of a request.
func keyFingerprint(h http.Header) string {
	for _, name := range []string{"X-Api-Key", "Api-Key"} {
		if v := h.Get(name); v != "" {
			return KeyFingerprint(v)
		}
	}
	if v := h.Get("Authorization"); v != "" {
		_, tok, _ := strings.Cut(v, " ")
		return KeyFingerprint(strings.TrimSpace(tok))
	}
	return ""
}

// reportUsage records the usage an answer carried.
func (s *Server) reportUsage(r *http.Request, u Usage) {
	s.annotate(r.Context(), func(e *Request) { e.Usage = &u })
}

// Message is one decoded conversation message.
type Message struct {
	// Role is the wire role ("user", "assistant", "system", ...).
	Role    string
	Content []Content
}

// Content is one block of a message.
type Content struct {
	// Type is the wire block type ("text", "tool_use", "tool_result", ...).
	Type string
	// Text is the text of a text block, or the text of a tool result.
	Text string
	// ToolUseID is the call id of a tool_use or tool_result block.
	ToolUseID string
	// ToolName and ToolInput (raw JSON) describe a tool_use block.
	ToolName  string
	ToolInput string
	// IsError is the error flag of a tool_result block.
	IsError bool
}

// Text returns the concatenated text blocks of m.
func (m Message) Text() string {
	var parts []string
	for _, c := range m.Content {
		if c.Type == "text" {
			parts = append(parts, c.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// UserText returns the concatenated text of the request's user messages.
func (r Request) UserText() string {
	var parts []string
	for _, m := range r.Messages {
		if m.Role == "user" {
			if t := m.Text(); t != "" {
				parts = append(parts, t)
			}
		}
	}
	return strings.Join(parts, "\n")
}

// MaxLoggedRequests bounds the request log: once it holds this many
// entries, each new request drops the oldest, so a long-running server
// keeps bounded memory.
const MaxLoggedRequests = 10000

// Requests returns a copy of the request log, oldest first: the newest
// [MaxLoggedRequests] requests.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Request, len(s.requests))
	for i, r := range s.requests {
		out[i] = r.clone()
	}
	return out
}

// ModelRequests returns the logged requests to model endpoints that were
// answered by a scenario (not auxiliary), oldest first.
func (s *Server) ModelRequests() []Request {
	var out []Request
	for _, r := range s.Requests() {
		if r.Scenario != "" {
			out = append(out, r)
		}
	}
	return out
}

// ResetRequests empties the request log.
func (s *Server) ResetRequests() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = nil
	s.logBase = 0
	s.logGen++
}

func (r Request) clone() Request {
	c := r
	c.Header = r.Header.Clone()
	c.Tools = slices.Clone(r.Tools)
	c.OutputSchema = slices.Clone(r.OutputSchema)
	if r.Usage != nil {
		u := *r.Usage
		c.Usage = &u
	}
	c.Messages = make([]Message, len(r.Messages))
	for i, m := range r.Messages {
		c.Messages[i] = Message{Role: m.Role, Content: slices.Clone(m.Content)}
	}
	if r.Messages == nil {
		c.Messages = nil
	}
	return c
}

func redact(h http.Header) http.Header {
	out := h.Clone()
	if out == nil {
		out = http.Header{}
	}
	for k, v := range out {
		lk := strings.ToLower(k)
		if lk == "authorization" || lk == "proxy-authorization" || lk == "cookie" ||
			strings.Contains(lk, "key") || strings.Contains(lk, "token") || strings.Contains(lk, "secret") {
			red := make([]string, len(v))
			for i := range red {
				red[i] = Redacted
			}
			out[k] = red
		}
	}
	return out
}

type logKey struct{}

// logged appends a log entry for every request and records its status.
func (s *Server) logged(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entry := Request{
			Time:   s.cfg.now(),
			Method: r.Method,
			Path:   r.URL.Path,
			Query:  r.URL.RawQuery,
			Header: redact(r.Header),

			KeyFingerprint: keyFingerprint(r.Header),
		}
		s.mu.Lock()
		idx := s.logBase + len(s.requests)
		s.requests = append(s.requests, entry)
		if len(s.requests) > MaxLoggedRequests {
			// Drop the oldest; clearing it frees its messages now.
			s.requests[0] = Request{}
			s.requests = s.requests[1:]
			s.logBase++
		}
		gen := s.logGen
		s.mu.Unlock()
		rec := &statusWriter{ResponseWriter: w}
		ctx := context.WithValue(r.Context(), logKey{}, logRef{idx: idx, gen: gen})
		// Deferred: an aborted response (a released hang) panics through.
		defer s.annotate(ctx, func(e *Request) { e.Status = rec.status })
		next.ServeHTTP(rec, r.WithContext(ctx))
	})
}

// logRef finds a log entry again; gen detects a ResetRequests in between.
type logRef struct {
	idx, gen int
}

// annotate updates the log entry of the request whose context is ctx.
func (s *Server) annotate(ctx context.Context, f func(*Request)) {
	ref, ok := ctx.Value(logKey{}).(logRef)
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	i := ref.idx - s.logBase
	if ref.gen != s.logGen || i < 0 || i >= len(s.requests) {
		return
	}
	f(&s.requests[i])
}

// statusWriter records the status and passes flushes through.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
