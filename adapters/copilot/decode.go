package copilot

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/usage"
)

// Decoder decodes one turn of `copilot --output-format json` output (JSONL,
// key "type", payload under "data"; the final "result" is top-level). It is
// not safe for concurrent use; each turn gets its own.
//
// Mapping (every line yields at least one event):
//
//	assistant.message          text (content, when not empty); tool per
//	                           toolRequests[] (name, arguments, toolCallId)
//	assistant.message_delta    raw: the consolidated assistant.message that
//	                           always follows carries the full text, and a
//	                           consumer shown both would print it twice
//	assistant.reasoning        reasoning
//	assistant.usage            usage, message scope (by api call id)
//	assistant.turn_retry       retry (attempt counted, status of the last
//	                           model.call_failure, reason)
//	tool.execution_start       tool, unless assistant.message announced it
//	tool.execution_complete    tool-result (success flag, result content or
//	                           error message)
//	model.call_failure         raw; its statusCode, errorType and errorCode
//	                           (the provider's error body) are remembered
//	session.error              failure (message; statusCode as Status,
//	                           errorType as Code, and the provider's type and
//	                           code of the last failed call with the same status)
//	session.warning            warning
//	session.shutdown           usage, cumulative scope (modelMetrics summed)
//	abort                      failure (reason; SIGTERM prints it, reason
//	                           "user_initiated"); a later result is not ok
//	result                     conversation (sessionId), result (the last
//	                           assistant text), finished (ok when exitCode is
//	                           0, outcome is not "blocked" and no abort
//	                           was seen)
//	"Error: …" (not JSON)      failure (the CLI's plain-text fatal errors)
//	anything else              raw (invalid JSON travels as a JSON string)
type Decoder struct {
	announced  map[string]bool
	names      map[string]string
	last       string
	haveLast   bool
	retries    int
	lastStatus int
	// lastCall is the provider error of the last failed model call.
	lastCall adapters.FailureDetail
	aborted  bool
	// model is the one model the turn's calls named; mixed is set once two
	// calls named different models (then none is reported).
	model string
	mixed bool
}

// NewDecoder returns a decoder for one turn.
func NewDecoder() *Decoder { return &Decoder{} }

type line struct {
	Type string          `json:"type"`
	Data json.RawMessage `json:"data"`
	// result (top level)
	SessionID string          `json:"sessionId"`
	ExitCode  *int            `json:"exitCode"`
	Outcome   string          `json:"outcome"`
	Usage     json.RawMessage `json:"usage"`
}

type toolRequest struct {
	ToolCallID string          `json:"toolCallId"`
	Name       string          `json:"name"`
	Arguments  json.RawMessage `json:"arguments"`
}

type data struct {
	MessageID    string          `json:"messageId"`
	APICallID    string          `json:"apiCallId"`
	Content      string          `json:"content"`
	DeltaContent string          `json:"deltaContent"`
	ToolRequests []toolRequest   `json:"toolRequests"`
	ToolCallID   string          `json:"toolCallId"`
	ToolName     string          `json:"toolName"`
	Arguments    json.RawMessage `json:"arguments"`
	Success      *bool           `json:"success"`
	Result       json.RawMessage `json:"result"`
	Error        json.RawMessage `json:"error"`
	ErrorType    string          `json:"errorType"`
	ErrorCode    string          `json:"errorCode"`
	Message      string          `json:"message"`
	StatusCode   int             `json:"statusCode"`
	Reason       string          `json:"reason"`
	Model        string          `json:"model"`
	// assistant.usage
	tokenCounts
	Cost *float64 `json:"cost"`
	// session.shutdown (also under accountingSnapshot)
	ModelMetrics       map[string]modelMetric `json:"modelMetrics"`
	AccountingSnapshot *struct {
		ModelMetrics map[string]modelMetric `json:"modelMetrics"`
	} `json:"accountingSnapshot"`
}

type modelMetric struct {
	Usage *tokenCounts `json:"usage"`
}

// tokenCounts are Copilot's token counters, as assistant.usage,
// session.shutdown model metrics and session.usage_record carry them.
type tokenCounts struct {
	InputTokens      *int64 `json:"inputTokens"`
	OutputTokens     *int64 `json:"outputTokens"`
	CacheReadTokens  *int64 `json:"cacheReadTokens"`
	CacheWriteTokens *int64 `json:"cacheWriteTokens"`
	ReasoningTokens  *int64 `json:"reasoningTokens"`
}

// usage converts Copilot's counters: inputTokens includes the cache reads
// (verified: a resumed call reports inputTokens 12150, cacheReadTokens
// 12058), usage.Usage.Input does not; outputTokens includes reasoning.
func (t tokenCounts) usage() usage.Usage {
	u := adapters.InclusiveUsage(usage.Count(t.InputTokens), usage.Count(t.CacheReadTokens),
		usage.Count(t.CacheWriteTokens), usage.Count(t.OutputTokens), usage.Count(t.ReasoningTokens))
	u.Complete = t.InputTokens != nil && t.OutputTokens != nil
	return u
}

// Decode turns one stdout line into events. It never panics and never
// returns an empty slice.
func (d *Decoder) Decode(b []byte) []adapters.Event {
	t := bytes.TrimSpace(b)
	if len(t) == 0 || t[0] != '{' {
		if msg, ok := plainError(t); ok {
			return []adapters.Event{{Kind: adapters.KindFailure, Text: msg,
				Failure: &adapters.FailureDetail{Code: "error", Status: status(msg)}}}
		}
		return raw(b)
	}
	return adapters.DecodeJSON(b, d.decode)
}

// decode maps one parsed line; no event makes the line a raw event.
func (d *Decoder) decode(l *line) []adapters.Event {
	var dt data
	if len(l.Data) > 0 && l.Data[0] == '{' && !adapters.ParseLine(l.Data, &dt) {
		dt = data{}
	}
	switch l.Type {
	case "assistant.message", "assistant.usage", "model.call_start":
		d.sawModel(dt.Model)
	}
	var evs []adapters.Event
	switch l.Type {
	case "assistant.message":
		evs = d.message(&dt)
	case "assistant.reasoning":
		if strings.TrimSpace(dt.Content) != "" {
			evs = []adapters.Event{{Kind: adapters.KindReasoning, Text: dt.Content}}
		}
	case "assistant.usage":
		if tc := dt.tokenCounts; tc.InputTokens != nil || tc.OutputTokens != nil {
			id := dt.APICallID
			if id == "" {
				id = dt.MessageID
			}
			r := usage.Report{Scope: usage.ScopeMessage, MessageID: id, Usage: tc.usage()}
			if dt.Cost != nil {
				// Copilot's cost is premium requests, not dollars: not a CostUSD.
				r.HasCost = false
			}
			evs = []adapters.Event{{Kind: adapters.KindUsage, Usage: &r}}
		}
	case "model.call_failure":
		if dt.StatusCode != 0 {
			d.lastStatus = dt.StatusCode
		}
		// The provider's own error body (BYOK), as Copilot parsed it.
		d.lastCall = adapters.FailureDetail{Status: dt.StatusCode, ProviderType: dt.ErrorType, ProviderCode: dt.ErrorCode}
	case "assistant.turn_retry":
		d.retries++
		evs = []adapters.Event{{Kind: adapters.KindRetry, Retry: &adapters.RetryNotice{
			Attempt: d.retries, Status: d.lastStatus, Reason: dt.Reason}}}
	case "tool.execution_start":
		if dt.ToolCallID != "" || dt.ToolName != "" {
			evs = d.tool(dt.ToolCallID, dt.ToolName, dt.Arguments)
		}
	case "tool.execution_complete":
		evs = d.toolResult(&dt)
	case "session.error":
		msg := dt.Message
		if msg == "" {
			msg = dt.ErrorType
		}
		f := &adapters.FailureDetail{Status: dt.StatusCode, Code: dt.ErrorType}
		if f.Status == 0 {
			f.Status = status(msg)
		}
		if c := d.lastCall; c.Status == f.Status {
			f.ProviderType, f.ProviderCode = c.ProviderType, c.ProviderCode
		}
		evs = []adapters.Event{{Kind: adapters.KindFailure, Text: msg, Failure: f}}
	case "session.warning":
		if dt.Message != "" {
			evs = []adapters.Event{{Kind: adapters.KindWarning, Text: dt.Message}}
		}
	case "session.shutdown":
		mm := dt.ModelMetrics
		if len(mm) == 0 && dt.AccountingSnapshot != nil {
			mm = dt.AccountingSnapshot.ModelMetrics
		}
		if u, ok := sumMetrics(mm); ok {
			evs = []adapters.Event{{Kind: adapters.KindUsage, Usage: &usage.Report{Scope: usage.ScopeCumulative, Usage: u}}}
		}
	case "abort":
		d.aborted = true
		reason := dt.Reason
		if reason == "" {
			reason = "aborted"
		}
		evs = []adapters.Event{{Kind: adapters.KindFailure, Text: "turn aborted: " + reason,
			Failure: &adapters.FailureDetail{Code: "abort"}}}
	case "result":
		evs = d.result(l)
	}
	return evs
}

// sawModel notes the model a call named; the turn reports a model only when
// every call named the same one (an auto-routed turn may mix models).
func (d *Decoder) sawModel(m string) {
	switch {
	case m == "" || m == d.model:
	case d.model == "":
		d.model = m
	default:
		d.mixed = true
	}
}

// sumMetrics adds the per-model usage of a session.shutdown.
func sumMetrics(mm map[string]modelMetric) (usage.Usage, bool) {
	var total usage.Usage
	total.Complete = true
	seen := false
	for _, m := range mm {
		if m.Usage == nil {
			continue
		}
		seen = true
		total = total.Add(m.Usage.usage())
	}
	return total, seen
}

// raw wraps a line the decoder did not understand; a line that is not
// JSON is carried as a JSON string.
func raw(b []byte) []adapters.Event { return []adapters.Event{adapters.RawEvent(b)} }

// plainError recognizes the CLI's plain-text fatal error lines ("Error: …").
func plainError(t []byte) (string, bool) {
	s := string(t)
	if !utf8.ValidString(s) {
		return "", false
	}
	rest, ok := strings.CutPrefix(s, "Error: ")
	if !ok || strings.TrimSpace(rest) == "" {
		return "", false
	}
	return s, true
}

const maxAnnounced = 4096

func (d *Decoder) announce(id string) bool {
	if id == "" {
		return true
	}
	if d.announced[id] {
		return false
	}
	if d.announced == nil || len(d.announced) >= maxAnnounced {
		d.announced = make(map[string]bool, 16)
		d.names = make(map[string]string, 16)
	}
	d.announced[id] = true
	return true
}

func (d *Decoder) message(dt *data) []adapters.Event {
	var evs []adapters.Event
	d.last, d.haveLast = dt.Content, true
	if dt.Content != "" {
		evs = append(evs, adapters.Event{Kind: adapters.KindText, Text: dt.Content})
	}
	for _, tr := range dt.ToolRequests {
		evs = append(evs, d.tool(tr.ToolCallID, tr.Name, tr.Arguments)...)
	}
	return evs
}

func (d *Decoder) tool(id, name string, args json.RawMessage) []adapters.Event {
	if !d.announce(id) {
		return nil
	}
	if id != "" {
		d.names[id] = name
	}
	if bytes.Equal(args, []byte("null")) {
		args = nil
	}
	return []adapters.Event{adapters.ToolEvent(id, name, args)}
}

func (d *Decoder) toolResult(dt *data) []adapters.Event {
	if dt.ToolCallID == "" && dt.Success == nil {
		return nil
	}
	out := resultText(dt.Result)
	isErr := dt.Success != nil && !*dt.Success
	if msg := adapters.ErrorMessage(dt.Error); msg != "" {
		out, isErr = msg, true
	}
	name := dt.ToolName
	if name == "" {
		name = d.names[dt.ToolCallID]
	}
	return []adapters.Event{adapters.ToolResultEvent(dt.ToolCallID, name, isErr, out)}
}

// resultText reads a tool result: {"content": …} or a string.
func resultText(r json.RawMessage) string {
	if len(r) > 0 && r[0] == '"' {
		return adapters.JSONString(r)
	}
	var o struct {
		Content json.RawMessage `json:"content"`
	}
	if len(r) == 0 || r[0] != '{' || json.Unmarshal(r, &o) != nil || len(o.Content) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(o.Content, &s) == nil {
		return s
	}
	return string(o.Content)
}

func (d *Decoder) result(l *line) []adapters.Event {
	var evs []adapters.Event
	if l.SessionID != "" {
		ev := adapters.Event{Kind: adapters.KindConversation, Conversation: l.SessionID}
		if !d.mixed {
			ev.Model = d.model
		}
		evs = append(evs, ev)
	}
	ok := l.ExitCode != nil && *l.ExitCode == 0 && l.Outcome != "blocked" && !d.aborted
	if ok && d.haveLast {
		evs = append(evs, adapters.Event{Kind: adapters.KindResult, Text: d.last})
	}
	reason := l.Outcome
	if reason == "" {
		if l.ExitCode != nil {
			reason = "exitCode " + strconv.Itoa(*l.ExitCode)
		} else {
			reason = "no exitCode"
		}
	}
	return append(evs, adapters.FinishedEvent(ok, reason))
}

// Preview returns the start of s, at most limit bytes, cut at a UTF-8
// character boundary.
func Preview(s string, limit int) string { return adapters.Preview(s, limit) }

var statusRE = regexp.MustCompile(`(?i)^\s*([1-5]\d\d)\b|last error:\s*([1-5]\d\d)\b|\(http ([1-5]\d\d)\)|status(?: code)?[: ]+([1-5]\d\d)\b`)

// status finds an HTTP status at the start of a failure text ("429 …",
// "Last error: 503 …", "(HTTP 401)").
func status(text string) int {
	for _, m := range statusRE.FindAllStringSubmatch(adapters.Clip(text), -1) {
		for _, g := range m[1:] {
			if g != "" {
				n, _ := strconv.Atoi(g)
				return n
			}
		}
	}
	return 0
}
