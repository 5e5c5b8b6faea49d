package adapters

import (
	"encoding/json"
	"unicode/utf8"

	"github.com/outpost-dev/outpost/internal/jsonl"
	"github.com/outpost-dev/outpost/usage"
)

// Helpers the decoders share: they read the CLIs' JSON lines and build the
// events every decoder builds the same way.

// ParseLine unmarshals one JSON line into v leniently: a field of an
// unexpected type is skipped and the rest is kept. It reports false only
// when b is not JSON at all (v is then partly filled at most).
func ParseLine(b []byte, v any) bool { return jsonl.Lenient(b, v) }

// DecodeJSON is the frame of a decoder of JSON lines: it reads line into a
// T with [ParseLine] and hands that to decode. A line that is not JSON, or
// that decode makes no event of, is a raw event, bounded by [RawLimit] as
// [RawEvent] bounds it; a parsed line's syntax is not checked a second time.
func DecodeJSON[T any](line []byte, decode func(*T) []Event) []Event {
	var v T
	if !ParseLine(line, &v) {
		return []Event{RawEvent(line)}
	}
	if evs := decode(&v); len(evs) > 0 {
		return evs
	}
	return []Event{rawEvent(line, true)}
}

// ToolEvent is the tool event of a call. An input that is empty or not
// valid JSON is left out; a valid one is copied.
func ToolEvent(callID, name string, input json.RawMessage) Event {
	if len(input) == 0 || !json.Valid(input) {
		input = nil
	}
	return Event{Kind: KindTool, Tool: &ToolCall{CallID: callID, Name: name, Input: append(json.RawMessage(nil), input...)}}
}

// ToolResultEvent is the tool-result event of a call whose result is the
// text output: its preview (at most [PreviewLimit] bytes) and its length in
// characters.
func ToolResultEvent(callID, name string, isErr bool, output string) Event {
	return Event{Kind: KindToolResult, ToolResult: &ToolResult{CallID: callID, Name: name, IsError: isErr,
		Preview: Preview(output, PreviewLimit), Characters: utf8.RuneCountInString(output)}}
}

// FinishedEvent is the terminal event with its verdict.
func FinishedEvent(ok bool, reason string) Event {
	return Event{Kind: KindFinished, Finished: &FinishedDetail{OK: ok, Reason: reason}}
}

// JSONString is the value of a JSON string; "" for anything else.
func JSONString(r json.RawMessage) string {
	var s string
	if len(r) == 0 || r[0] != '"' || json.Unmarshal(r, &s) != nil {
		return ""
	}
	return s
}

// ErrorMessage reads an error field: {"message": …} or a string; "" for
// anything else.
func ErrorMessage(r json.RawMessage) string {
	var o struct {
		Message string `json:"message"`
	}
	switch {
	case len(r) == 0:
	case r[0] == '"':
		return JSONString(r)
	case r[0] == '{' && json.Unmarshal(r, &o) == nil:
		return o.Message
	}
	return ""
}

// InclusiveUsage converts token counts in OpenAI's convention, which Codex
// and Copilot follow: the input count includes the cached part (which
// usage.Usage.Input does not) and the output count the reasoning part (as
// usage.Usage.Output does). Complete is left false.
func InclusiveUsage(input, cached, cacheWrite, output, reasoning int64) usage.Usage {
	return usage.Usage{Input: max(input-cached, 0), Cached: cached, CacheCreated: cacheWrite,
		Output: output, Reasoning: reasoning}
}
