package codex

import (
	"encoding/json"
	"regexp"
	"strconv"
	"strings"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/usage"
)

// Decoder decodes one turn of `codex exec --json` output. It remembers the
// tool items it has announced (so a completed item without a started one
// still yields its tool event) and the last agent message (the turn's
// result). It is not safe for concurrent use; each turn gets its own.
//
// Mapping (every line yields at least one event):
//
//	thread.started                 conversation (thread_id)
//	turn.started                   raw
//	item.* agent_message           text (completed only; exec prints no deltas)
//	item.* reasoning               reasoning (completed, non-empty)
//	item.* command_execution       tool "shell" {command} when started;
//	                               tool-result when completed/failed/declined
//	                               (error unless exit 0 and status completed)
//	item.* mcp_tool_call           tool "mcp:<server>/<tool>" {arguments}; tool-result
//	item.* web_search              tool "web_search" {query}; tool-result
//	item.* collab_tool_call        tool "collab:<tool>"; tool-result
//	item.* file_change             file-change per change (completed)
//	item.* error                   warning (Codex's non-fatal notices)
//	item.* todo_list, other        raw
//	error "Reconnecting… n/N (…)"  retry (attempt, max, status, reason)
//	error, other                   warning (the fatal text repeats in turn.failed)
//	turn.completed                 usage (cumulative), result (last agent
//	                               message, when there was one), finished ok
//	turn.failed                    failure (error.message, HTTP status if
//	                               stated), finished not ok
//	anything else                  raw (invalid JSON travels as a JSON string)
type Decoder struct {
	announced map[string]bool
	last      string
	haveLast  bool
}

// NewDecoder returns a decoder for one turn.
func NewDecoder() *Decoder { return &Decoder{} }

// line is the union of the top-level shapes.
type line struct {
	Type     string     `json:"type"`
	ThreadID string     `json:"thread_id"`
	Item     *item      `json:"item"`
	Usage    *turnUsage `json:"usage"`
	// Error is turn.failed's {"message": …}; any other shape is skipped.
	Error   *struct{ Message string } `json:"error"`
	Message string                    `json:"message"`
}

type item struct {
	ID     string `json:"id"`
	Type   string `json:"type"`
	Text   string `json:"text"`
	Status string `json:"status"`
	// command_execution
	Command          string `json:"command"`
	AggregatedOutput string `json:"aggregated_output"`
	ExitCode         *int   `json:"exit_code"`
	// file_change
	Changes []struct {
		Path string `json:"path"`
		Kind string `json:"kind"`
	} `json:"changes"`
	// mcp_tool_call, collab_tool_call
	Server    string          `json:"server"`
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments"`
	Result    json.RawMessage `json:"result"`
	ItemError json.RawMessage `json:"error"`
	// web_search
	Query string `json:"query"`
	// error
	Message string `json:"message"`
}

type turnUsage struct {
	InputTokens           *int64 `json:"input_tokens"`
	CachedInputTokens     *int64 `json:"cached_input_tokens"`
	CacheWriteInputTokens *int64 `json:"cache_write_input_tokens"`
	OutputTokens          *int64 `json:"output_tokens"`
	ReasoningOutputTokens *int64 `json:"reasoning_output_tokens"`
}

// Decode turns one stdout line into events. It never panics and never
// returns an empty slice.
func (d *Decoder) Decode(b []byte) []adapters.Event { return adapters.DecodeJSON(b, d.decode) }

// decode maps one parsed line; no event makes the line a raw event.
func (d *Decoder) decode(l *line) []adapters.Event {
	switch l.Type {
	case "thread.started":
		if l.ThreadID != "" {
			return []adapters.Event{{Kind: adapters.KindConversation, Conversation: l.ThreadID}}
		}
	case "item.started", "item.updated", "item.completed":
		if l.Item != nil {
			return d.item(l.Type, l.Item)
		}
	case "error":
		return errorEvent(l.Message)
	case "turn.completed":
		return d.completed(l)
	case "turn.failed":
		return failed(l)
	}
	return nil
}

// maxAnnounced bounds the remembered tool item ids; ids restart at item_0
// in every process, so a turn rarely has many.
const maxAnnounced = 4096

func (d *Decoder) announce(id string) bool {
	if d.announced[id] {
		return false
	}
	if d.announced == nil || len(d.announced) >= maxAnnounced {
		d.announced = make(map[string]bool, 16)
	}
	d.announced[id] = true
	return true
}

func (d *Decoder) item(typ string, it *item) []adapters.Event {
	completed := typ == "item.completed"
	switch it.Type {
	case "agent_message":
		if !completed {
			return nil
		}
		d.last, d.haveLast = it.Text, true
		if it.Text == "" {
			return nil
		}
		return []adapters.Event{{Kind: adapters.KindText, Text: it.Text}}
	case "reasoning":
		if !completed || strings.TrimSpace(it.Text) == "" {
			return nil
		}
		return []adapters.Event{{Kind: adapters.KindReasoning, Text: it.Text}}
	case "error":
		if it.Message == "" {
			return nil
		}
		return []adapters.Event{{Kind: adapters.KindWarning, Text: it.Message}}
	case "file_change":
		if !completed {
			return nil
		}
		var evs []adapters.Event
		for _, c := range it.Changes {
			if c.Path == "" {
				continue
			}
			evs = append(evs, adapters.Event{Kind: adapters.KindFileChange,
				FileChange: &adapters.FileChange{Path: c.Path, Change: change(c.Kind)}})
		}
		return evs
	case "command_execution":
		input, _ := json.Marshal(map[string]string{"command": it.Command})
		isErr := it.Status != "completed" || it.ExitCode == nil || *it.ExitCode != 0
		return d.tool(typ, it, "shell", input, it.AggregatedOutput, isErr)
	case "mcp_tool_call":
		out, isErr := mcpOutcome(it.Status, it.Result, it.ItemError)
		return d.tool(typ, it, "mcp:"+it.Server+"/"+it.Tool, it.Arguments, out, isErr)
	case "web_search":
		input, _ := json.Marshal(map[string]string{"query": it.Query})
		return d.tool(typ, it, "web_search", input, it.Query, it.Status == "failed")
	case "collab_tool_call":
		return d.tool(typ, it, "collab:"+it.Tool, it.Arguments, it.Text, it.Status == "failed")
	}
	return nil
}

// tool announces a tool item once (at its start, or at its completion when
// no start was seen) and reports its result when it completes.
func (d *Decoder) tool(typ string, it *item, name string, input json.RawMessage, output string, isErr bool) []adapters.Event {
	var evs []adapters.Event
	if typ != "item.updated" && d.announce(it.ID) {
		evs = append(evs, adapters.ToolEvent(it.ID, name, input))
	}
	if typ == "item.completed" {
		evs = append(evs, adapters.ToolResultEvent(it.ID, name, isErr, output))
	}
	return evs
}

func change(kind string) string {
	switch kind {
	case "add", "delete", "update":
		return kind
	case "":
		return "update"
	}
	return kind
}

// mcpOutcome is the output and error flag of an MCP tool call item: its
// error's message when it has one, else its result's text, failed when its
// status says so.
func mcpOutcome(status string, result, itemErr json.RawMessage) (string, bool) {
	if msg := adapters.ErrorMessage(itemErr); msg != "" {
		return msg, true
	}
	return mcpText(result), status == "failed"
}

// mcpText flattens an MCP result's text content.
func mcpText(r json.RawMessage) string {
	if len(r) == 0 || r[0] != '{' {
		return ""
	}
	var res struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
		Structured json.RawMessage `json:"structured_content"`
	}
	if json.Unmarshal(r, &res) != nil {
		return ""
	}
	var parts []string
	for _, c := range res.Content {
		if c.Type == "text" {
			parts = append(parts, c.Text)
		} else {
			parts = append(parts, "["+c.Type+"]")
		}
	}
	if len(parts) == 0 && len(res.Structured) > 0 && res.Structured[0] != 'n' {
		return string(res.Structured)
	}
	return strings.Join(parts, "\n")
}

// Preview returns the start of s, at most limit bytes, cut at a UTF-8
// character boundary.
func Preview(s string, limit int) string { return adapters.Preview(s, limit) }

var (
	// reconnectRE is Codex's retry notice: "Reconnecting... 2/5 (cause)" or
	// "Reconnecting... waiting for network (cause)".
	reconnectRE = regexp.MustCompile(`(?s)^\s*Reconnecting(?:\.\.\.|…)\s*(?:(\d{1,9})\s*/\s*(\d{1,9}))?\s*(waiting for network)?\s*(.*)$`)
)

// errorEvent maps a top-level error line: retry chatter becomes a retry
// event; any other error is a warning, because the turn's verdict is its
// turn.failed line (which repeats the fatal text).
func errorEvent(msg string) []adapters.Event {
	if msg == "" {
		return nil
	}
	if !strings.Contains(msg, "Reconnecting") {
		return []adapters.Event{{Kind: adapters.KindWarning, Text: msg}}
	}
	if m := reconnectRE.FindStringSubmatch(msg); m != nil {
		cause := strings.TrimSpace(m[4])
		if strings.HasPrefix(cause, "(") && strings.HasSuffix(cause, ")") {
			cause = cause[1 : len(cause)-1]
		}
		if m[3] != "" {
			cause = strings.TrimSuffix(m[3]+": "+cause, ": ")
		}
		r := &adapters.RetryNotice{Reason: cause}
		if m[1] != "" {
			r.Attempt, _ = strconv.Atoi(m[1])
			r.MaxAttempts, _ = strconv.Atoi(m[2])
		}
		r.Status = status(msg)
		return []adapters.Event{{Kind: adapters.KindRetry, Retry: r}}
	}
	return []adapters.Event{{Kind: adapters.KindWarning, Text: msg}}
}

func status(text string) int {
	for rest := text; ; {
		i := strings.Index(rest, "status")
		if i < 0 {
			return 0
		}
		rest = rest[i+len("status"):]
		j := 0
		for j < len(rest) && (rest[j] == ':' || rest[j] == ' ') {
			j++
		}
		if j == 0 || len(rest) < j+3 {
			continue
		}
		d := rest[j : j+3]
		if d[0] < '1' || d[0] > '5' || d[1] < '0' || d[1] > '9' || d[2] < '0' || d[2] > '9' ||
			(len(rest) > j+3 && rest[j+3] >= '0' && rest[j+3] <= '9') {
			continue
		}
		return int(d[0]-'0')*100 + int(d[1]-'0')*10 + int(d[2]-'0')
	}
}

func (d *Decoder) completed(l *line) []adapters.Event {
	var evs []adapters.Event
	if u := l.Usage; u != nil && (u.InputTokens != nil || u.OutputTokens != nil) {
		evs = append(evs, adapters.Event{Kind: adapters.KindUsage, Usage: &usage.Report{
			Scope: usage.ScopeCumulative, Usage: u.usage()}})
	}
	if d.haveLast {
		evs = append(evs, adapters.Event{Kind: adapters.KindResult, Text: d.last})
	}
	return append(evs, adapters.FinishedEvent(true, "turn.completed"))
}

// usage converts Codex's counters: input_tokens includes the cached part
// (OpenAI's convention), usage.Usage.Input does not; output_tokens includes
// the reasoning part.
func (u *turnUsage) usage() usage.Usage {
	out := adapters.InclusiveUsage(usage.Count(u.InputTokens), usage.Count(u.CachedInputTokens),
		usage.Count(u.CacheWriteInputTokens), usage.Count(u.OutputTokens), usage.Count(u.ReasoningOutputTokens))
	out.Complete = u.InputTokens != nil && u.OutputTokens != nil
	return out
}

func failed(l *line) []adapters.Event {
	var msg string
	if l.Error != nil {
		msg = l.Error.Message
	}
	if msg == "" {
		msg = l.Message
	}
	f := &adapters.FailureDetail{Code: "turn.failed", Status: status(msg)}
	return []adapters.Event{
		{Kind: adapters.KindFailure, Text: msg, Failure: f},
		adapters.FinishedEvent(false, "turn.failed"),
	}
}
