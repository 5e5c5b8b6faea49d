package claude

import (
	"encoding/json"
	"strings"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/adapters/reset"
	"github.com/outpost-dev/outpost/internal/anthropicwire"
	"github.com/outpost-dev/outpost/usage"
)

// synthetic is the model name of messages Claude Code writes itself.
const synthetic = "<synthetic>"

// toolCacheSize bounds the call-id → tool-name cache of a decoder.
const toolCacheSize = 1024

// Decoder decodes one turn of Claude Code stream-json output. It keeps the
// names of recent tool calls (a bounded cache) so tool results can be named.
// It is not safe for concurrent use; each turn gets its own.
//
// Mapping (every line yields at least one event):
//
//	system/init            conversation (session_id, model, claude_code_version, cwd);
//	                       a warning per MCP server that failed or needs auth
//	system/api_retry       retry (attempt, max_retries, error_status, error, retry_delay_ms)
//	system/<other>         raw
//	assistant              text / reasoning / tool per content block, then a
//	                       message-scoped usage report keyed by message.id;
//	                       a synthetic error message (an "error" field, model
//	                       "<synthetic>") is one failure event instead
//	user                   tool-result per tool_result block; otherwise raw
//	stream_event           text_delta → text-delta, thinking_delta → reasoning,
//	                       message_delta → message-scoped usage (exact output
//	                       tokens, keyed by api_message_id); otherwise raw
//	rate_limit_event       quota (status, rateLimitType, resetsAt)
//	result                 usage (turn scope), then result (success) or failure,
//	                       then finished
//	anything else          raw (invalid JSON travels as a JSON string)
//
// A failure event's detail carries api_error_status as Status and
// api_error_type (the API body's error type) as ProviderType.
//
// Events of a sub-agent carry Subagent = parent_tool_use_id.
type Decoder struct {
	names map[string]string
	order []string // FIFO of ids in names
	next  int
}

// NewDecoder returns a decoder for one turn.
func NewDecoder() *Decoder { return &Decoder{} }

// line is the union of every stream-json line shape the decoder reads.
// Polymorphic fields stay raw so one Unmarshal serves every type.
type line struct {
	Type    string `json:"type"`
	Subtype string `json:"subtype"`

	SessionID       string  `json:"session_id"`
	ParentToolUseID *string `json:"parent_tool_use_id"`

	// system/init
	Model      string      `json:"model"`
	Cwd        string      `json:"cwd"`
	Version    string      `json:"claude_code_version"`
	MCPServers []mcpServer `json:"mcp_servers"`

	// assistant, user
	Message *message `json:"message"`
	// Error is a string on synthetic assistant messages and api_retry lines.
	Error             json.RawMessage `json:"error"`
	IsAPIErrorMessage bool            `json:"is_api_error_message"`

	// stream_event
	Event        *streamEvent `json:"event"`
	APIMessageID string       `json:"api_message_id"`

	// system/api_retry
	Attempt      int   `json:"attempt"`
	MaxRetries   int   `json:"max_retries"`
	RetryDelayMS int64 `json:"retry_delay_ms"`
	ErrorStatus  *int  `json:"error_status"`

	// rate_limit_event
	RateLimitInfo *rateLimitInfo `json:"rate_limit_info"`

	// result
	IsError                   bool                  `json:"is_error"`
	Result                    json.RawMessage       `json:"result"`
	TotalCostUSD              *float64              `json:"total_cost_usd"`
	Usage                     *usage.Anthropic      `json:"usage"`
	ModelUsage                map[string]modelUsage `json:"modelUsage"`
	ModelUsageSinceLastResult map[string]modelUsage `json:"model_usage_since_last_result"`
	TerminalReason            string                `json:"terminal_reason"`
	APIErrorStatus            *int                  `json:"api_error_status"`
	APIErrorType              string                `json:"api_error_type"`
	APIError                  json.RawMessage       `json:"api_error"`
	Errors                    json.RawMessage       `json:"errors"`
}

type mcpServer struct {
	Name   string `json:"name"`
	Status string `json:"status"`
}

type message struct {
	ID      string           `json:"id"`
	Model   string           `json:"model"`
	Content json.RawMessage  `json:"content"`
	Usage   *usage.Anthropic `json:"usage"`
}

type modelUsage struct {
	InputTokens              int64   `json:"inputTokens"`
	OutputTokens             int64   `json:"outputTokens"`
	CacheReadInputTokens     int64   `json:"cacheReadInputTokens"`
	CacheCreationInputTokens int64   `json:"cacheCreationInputTokens"`
	CacheCreation1h          int64   `json:"cacheCreationEphemeral1hInputTokens"`
	CostUSD                  float64 `json:"costUSD"`
}

type streamEvent struct {
	Type  string           `json:"type"`
	Usage *usage.Anthropic `json:"usage"`
	Delta *struct {
		Type     string `json:"type"`
		Text     string `json:"text"`
		Thinking string `json:"thinking"`
	} `json:"delta"`
}

type rateLimitInfo struct {
	Status        string `json:"status"`
	ResetsAt      *int64 `json:"resetsAt"`
	RateLimitType string `json:"rateLimitType"`
}

// Decode turns one stdout line into events. It never panics and never returns
// an empty slice.
func (d *Decoder) Decode(b []byte) []adapters.Event { return adapters.DecodeJSON(b, d.decode) }

// raw wraps a line the decoder did not understand. A line that is not JSON
// is carried as a JSON string, so the event always marshals.
func raw(b []byte) []adapters.Event { return []adapters.Event{adapters.RawEvent(b)} }

// lineDecoders maps a line's type to its decoder; other types have none.
var lineDecoders = map[string]func(*Decoder, *line) []adapters.Event{
	"system":           (*Decoder).system,
	"assistant":        (*Decoder).assistant,
	"user":             (*Decoder).user,
	"stream_event":     (*Decoder).stream,
	"rate_limit_event": (*Decoder).rateLimit,
	"result":           (*Decoder).result,
}

// decode maps one parsed line; no event makes the line a raw event.
func (d *Decoder) decode(l *line) []adapters.Event {
	var evs []adapters.Event
	if f := lineDecoders[l.Type]; f != nil {
		evs = f(d, l)
	}
	if p := l.ParentToolUseID; p != nil && *p != "" {
		for i := range evs {
			evs[i].Subagent = *p
		}
	}
	return evs
}

func (d *Decoder) system(l *line) []adapters.Event {
	switch l.Subtype {
	case "init":
		if l.SessionID == "" {
			return nil
		}
		evs := []adapters.Event{{Kind: adapters.KindConversation, Conversation: l.SessionID,
			Model: l.Model, Version: l.Version, Cwd: l.Cwd}}
		for _, s := range l.MCPServers {
			switch s.Status {
			case "failed", "needs-auth":
				evs = append(evs, adapters.Event{Kind: adapters.KindWarning,
					Text: "MCP server " + s.Name + ": " + s.Status})
			}
		}
		return evs
	case "api_retry":
		r := &adapters.RetryNotice{Attempt: l.Attempt, MaxAttempts: l.MaxRetries,
			Reason: adapters.JSONString(l.Error), DelayMS: l.RetryDelayMS}
		if l.ErrorStatus != nil {
			r.Status = *l.ErrorStatus
		}
		return []adapters.Event{{Kind: adapters.KindRetry, Retry: r}}
	}
	return nil
}

// blocks are a message's content blocks.
func blocks(m *message) []anthropicwire.Block {
	if m == nil {
		return nil
	}
	return anthropicwire.Blocks(m.Content)
}

func (d *Decoder) assistant(l *line) []adapters.Event {
	m := l.Message
	if m == nil {
		return nil
	}
	bs := blocks(m)
	if code := adapters.JSONString(l.Error); code != "" || l.IsAPIErrorMessage || m.Model == synthetic {
		// A message Claude made up itself: the report of a failed API call,
		// or (without an error) a notice such as "No response requested.".
		var text []string
		for _, b := range bs {
			if b.Type == "text" && b.Text != "" {
				text = append(text, b.Text)
			}
		}
		if code == "" {
			code = adapters.JSONString(l.APIError)
		}
		if code == "" && !l.IsAPIErrorMessage {
			if len(text) == 0 {
				return nil
			}
			return []adapters.Event{{Kind: adapters.KindWarning, Text: strings.Join(text, "\n")}}
		}
		return []adapters.Event{{Kind: adapters.KindFailure, Text: strings.Join(text, "\n"), Failure: failure(l, code)}}
	}
	var evs []adapters.Event
	for _, b := range bs {
		switch b.Type {
		case "text":
			if b.Text != "" {
				evs = append(evs, adapters.Event{Kind: adapters.KindText, Text: b.Text})
			}
		case "thinking":
			if b.Thinking != "" {
				evs = append(evs, adapters.Event{Kind: adapters.KindReasoning, Text: b.Thinking})
			}
		case "tool_use", "server_tool_use", "mcp_tool_use":
			d.remember(b.ID, b.Name)
			evs = append(evs, adapters.ToolEvent(b.ID, b.Name, b.Input))
		}
	}
	if u := m.Usage; u != nil && (u.Input != nil || u.Output != nil) {
		evs = append(evs, adapters.Event{Kind: adapters.KindUsage, Usage: &usage.Report{
			Scope: usage.ScopeMessage, MessageID: m.ID, Usage: messageUsage(u)}})
	}
	return evs
}

// messageUsage is the usage of an API usage object; it is complete when
// it counts both input and output.
func messageUsage(u *usage.Anthropic) usage.Usage {
	out := u.Usage()
	out.Complete = u.Input != nil && u.Output != nil
	return out
}

func (d *Decoder) remember(id, name string) {
	if id == "" || name == "" {
		return
	}
	if d.names == nil {
		d.names = make(map[string]string, 16)
	}
	if _, ok := d.names[id]; ok {
		d.names[id] = name
		return
	}
	if len(d.order) < toolCacheSize {
		d.order = append(d.order, id)
	} else {
		delete(d.names, d.order[d.next])
		d.order[d.next] = id
		d.next = (d.next + 1) % toolCacheSize
	}
	d.names[id] = name
}

func (d *Decoder) user(l *line) []adapters.Event {
	var evs []adapters.Event
	for _, b := range blocks(l.Message) {
		if b.Type != "tool_result" {
			continue
		}
		evs = append(evs, adapters.ToolResultEvent(b.ToolUseID, d.names[b.ToolUseID], b.IsError, anthropicwire.ContentText(b.Content)))
	}
	return evs
}

// Preview returns the start of s, at most limit bytes, cut at a UTF-8
// character boundary.
func Preview(s string, limit int) string { return adapters.Preview(s, limit) }

func (d *Decoder) stream(l *line) []adapters.Event {
	e := l.Event
	if e == nil {
		return nil
	}
	switch e.Type {
	case "content_block_delta":
		if e.Delta == nil {
			return nil
		}
		switch e.Delta.Type {
		case "text_delta":
			if e.Delta.Text != "" {
				return []adapters.Event{{Kind: adapters.KindTextDelta, Text: e.Delta.Text}}
			}
		case "thinking_delta":
			if e.Delta.Thinking != "" {
				return []adapters.Event{{Kind: adapters.KindReasoning, Text: e.Delta.Thinking}}
			}
		}
	case "message_delta":
		// The final usage of a streamed message: its output_tokens are
		// exact, unlike the message_start snapshot the assistant lines repeat.
		if u := e.Usage; u != nil && l.APIMessageID != "" && u.Output != nil {
			return []adapters.Event{{Kind: adapters.KindUsage, Usage: &usage.Report{
				Scope: usage.ScopeMessage, MessageID: l.APIMessageID, Usage: messageUsage(u)}}}
		}
	}
	return nil
}

func (d *Decoder) rateLimit(l *line) []adapters.Event {
	info := l.RateLimitInfo
	if info == nil {
		return nil
	}
	q := &adapters.QuotaSignal{Status: info.Status, Limit: info.RateLimitType}
	if info.ResetsAt != nil {
		if t, ok := reset.Unix(*info.ResetsAt); ok {
			q.ResetAt = t
		}
	}
	return []adapters.Event{{Kind: adapters.KindQuota, Quota: q}}
}

func (d *Decoder) result(l *line) []adapters.Event {
	var evs []adapters.Event
	if r, ok := turnUsage(l); ok {
		evs = append(evs, adapters.Event{Kind: adapters.KindUsage, Usage: r})
	}
	text := adapters.JSONString(l.Result)
	ok := !l.IsError && l.Subtype == "success"
	reason := l.TerminalReason
	if reason == "" {
		reason = l.Subtype
	}
	if ok {
		evs = append(evs, adapters.Event{Kind: adapters.KindResult, Text: text})
	} else {
		parts := make([]string, 0, 2)
		if strings.TrimSpace(text) != "" {
			parts = append(parts, text)
		}
		for _, e := range errorTexts(l.Errors) {
			if e != text {
				parts = append(parts, e)
			}
		}
		code := l.Subtype
		if code == "success" || code == "" {
			code = l.TerminalReason
		}
		if code == "" {
			code = adapters.JSONString(l.APIError)
		}
		evs = append(evs, adapters.Event{Kind: adapters.KindFailure, Text: strings.Join(parts, "\n"), Failure: failure(l, code)})
	}
	evs = append(evs, adapters.FinishedEvent(ok, reason))
	return evs
}

// failure is the structured detail of a failure line: code, the API error's
// status and the type of its body.
func failure(l *line, code string) *adapters.FailureDetail {
	f := &adapters.FailureDetail{Code: code, ProviderType: l.APIErrorType}
	if l.APIErrorStatus != nil {
		f.Status = *l.APIErrorStatus
	}
	return f
}

// errorTexts reads result.errors[]: strings, or objects with a message.
func errorTexts(r json.RawMessage) []string {
	if len(r) == 0 || r[0] != '[' {
		return nil
	}
	var items []json.RawMessage
	if json.Unmarshal(r, &items) != nil {
		return nil
	}
	var out []string
	for _, it := range items {
		if s := adapters.JSONString(it); s != "" {
			out = append(out, s)
			continue
		}
		var o struct {
			Message string `json:"message"`
		}
		if json.Unmarshal(it, &o) == nil && o.Message != "" {
			out = append(out, o.Message)
		} else if len(it) > 0 && it[0] != 'n' {
			out = append(out, string(it))
		}
	}
	return out
}

// turnUsage builds the turn-scoped report of a result line.
//
// Observed with 2.1.328 (fixtures tool, resume, fork): result.usage sums every
// model call of this process's turn, but modelUsage and total_cost_usd are
// cumulative over the whole session, so a resumed turn reports the earlier
// turns' tokens and cost again. model_usage_since_last_result holds exactly
// this turn, per model (side calls to other models included) with its cost,
// so it is preferred; without it, result.usage and total_cost_usd are used,
// and modelUsage only when result.usage is missing too.
func turnUsage(l *line) (*usage.Report, bool) {
	r := &usage.Report{Scope: usage.ScopeTurn}
	switch {
	case l.ModelUsageSinceLastResult != nil:
		r.Usage = sumModels(l.ModelUsageSinceLastResult)
		r.HasCost = true
	case l.Usage != nil:
		r.Usage = messageUsage(l.Usage)
	case l.ModelUsage != nil:
		r.Usage = sumModels(l.ModelUsage)
		r.HasCost = true
	default:
		if l.TotalCostUSD == nil {
			return nil, false
		}
	}
	r.Complete = true
	if !r.HasCost && l.TotalCostUSD != nil {
		r.CostUSD, r.HasCost = *l.TotalCostUSD, true
	}
	r.CostKnown = r.HasCost
	return r, true
}

func sumModels(m map[string]modelUsage) usage.Usage {
	var u usage.Usage
	for _, v := range m {
		u.Input += v.InputTokens
		u.Output += v.OutputTokens
		u.Cached += v.CacheReadInputTokens
		u.CacheCreated += v.CacheCreationInputTokens
		u.CacheCreated1h += min(max(v.CacheCreation1h, 0), max(v.CacheCreationInputTokens, 0))
		u.CostUSD += v.CostUSD
	}
	return u
}
