package adapters

import (
	"bytes"
	"encoding/json"
	"time"
	"unicode/utf8"

	"github.com/outpost-dev/outpost/usage"
)

// Kind is the kind of a normalized [Event]. The set is closed: these constants
// are every kind there is, and [Kinds] lists them.
type Kind string

// The event kinds.
const (
	// KindConversation names the conversation (session, thread) id; it may
	// also carry the model, CLI version and working directory.
	KindConversation Kind = "conversation"
	// KindText is a complete piece of assistant text.
	KindText Kind = "text"
	// KindTextDelta is a streamed fragment of assistant text.
	KindTextDelta Kind = "text-delta"
	// KindReasoning is reasoning or thinking text.
	KindReasoning Kind = "reasoning"
	// KindTool is a tool call (name, input, call id).
	KindTool Kind = "tool"
	// KindToolResult is a tool's result (call id, error flag, bounded preview).
	KindToolResult Kind = "tool-result"
	// KindFileChange reports a file the agent added, updated or deleted.
	KindFileChange Kind = "file-change"
	// KindUsage is a usage report.
	KindUsage Kind = "usage"
	// KindQuota is a structured rate-limit or quota signal from the CLI.
	KindQuota Kind = "quota"
	// KindRetry says the CLI is retrying a model call on its own. Never a failure.
	KindRetry Kind = "retry"
	// KindWarning is a non-fatal problem.
	KindWarning Kind = "warning"
	// KindFailure is a failure reported by the CLI.
	KindFailure Kind = "failure"
	// KindResult is the final answer text of the turn.
	KindResult Kind = "result"
	// KindFinished is the CLI's terminal event; Finished.OK says whether the turn succeeded.
	KindFinished Kind = "finished"
	// KindStderr is one line the CLI wrote to standard error.
	KindStderr Kind = "stderr"
	// KindRaw is a line the decoder did not understand (invalid JSON, unknown type).
	KindRaw Kind = "raw"
	// KindInput is a user message the harness delivered into the running
	// turn (live input); Text is the message. Adapters never emit it.
	KindInput Kind = "input"
)

// Kinds lists every event kind.
var Kinds = []Kind{KindConversation, KindText, KindTextDelta, KindReasoning, KindTool,
	KindToolResult, KindFileChange, KindUsage, KindQuota, KindRetry, KindWarning,
	KindFailure, KindResult, KindFinished, KindStderr, KindRaw, KindInput}

// Event is one normalized event. Seq and Time are set by the harness, never by
// an adapter. Which payload fields are set depends on Kind; the rest are zero.
type Event struct {
	Seq  int64     `json:"seq"`
	Time time.Time `json:"time,omitzero"`
	Kind Kind      `json:"kind"`

	// Text is the payload of text, text-delta, reasoning, result, warning,
	// failure, quota and stderr events.
	Text string `json:"text,omitempty"`
	// Conversation is the id carried by conversation events.
	Conversation string `json:"conversation,omitempty"`
	// Model, Version and Cwd may accompany a conversation event.
	Model   string `json:"model,omitempty"`
	Version string `json:"version,omitempty"`
	Cwd     string `json:"cwd,omitempty"`

	Tool       *ToolCall       `json:"tool,omitempty"`
	ToolResult *ToolResult     `json:"tool_result,omitempty"`
	FileChange *FileChange     `json:"file_change,omitempty"`
	Usage      *usage.Report   `json:"usage,omitempty"`
	Quota      *QuotaSignal    `json:"quota,omitempty"`
	Retry      *RetryNotice    `json:"retry,omitempty"`
	Failure    *FailureDetail  `json:"failure,omitempty"`
	Finished   *FinishedDetail `json:"finished,omitempty"`
	// Raw is the original line for raw events.
	Raw json.RawMessage `json:"raw,omitempty"`
	// Subagent is set on events produced inside a sub-agent (Claude
	// parent_tool_use_id); it names the parent tool call.
	Subagent string `json:"subagent,omitempty"`
}

// ToolCall is a tool invocation.
type ToolCall struct {
	CallID string          `json:"call_id,omitempty"`
	Name   string          `json:"name"`
	Input  json.RawMessage `json:"input,omitempty"`
}

// PreviewLimit bounds ToolResult.Preview, in bytes.
const PreviewLimit = 2000

// ToolResult is a tool's outcome.
type ToolResult struct {
	CallID  string `json:"call_id,omitempty"`
	Name    string `json:"name,omitempty"`
	IsError bool   `json:"is_error,omitempty"`
	// Preview is the start of the result, at most PreviewLimit bytes.
	Preview string `json:"preview,omitempty"`
	// Characters is the full length of the result text.
	Characters int `json:"characters"`
}

// FileChange is one changed file.
type FileChange struct {
	Path string `json:"path"`
	// Change is "add", "update" or "delete".
	Change string `json:"change"`
}

// QuotaSignal is a structured rate-limit or quota reading.
type QuotaSignal struct {
	// Status is the CLI's word for the state ("rejected", "allowed",
	// "allowed_warning"); empty when the signal is itself a refusal.
	Status string `json:"status,omitempty"`
	// Limit names the window or limit type ("five_hour", "weekly").
	Limit   string    `json:"limit,omitempty"`
	ResetAt time.Time `json:"reset_at,omitzero"`
}

// Blocking reports whether the signal says requests are being refused.
// Informational readings ("allowed", "allowed_warning") are not.
func (q *QuotaSignal) Blocking() bool {
	return q != nil && q.Status != "allowed" && q.Status != "allowed_warning"
}

// RetryNotice describes the CLI retrying on its own.
type RetryNotice struct {
	Attempt     int    `json:"attempt,omitempty"`
	MaxAttempts int    `json:"max_attempts,omitempty"`
	Status      int    `json:"status,omitempty"`
	Reason      string `json:"reason,omitempty"`
	DelayMS     int64  `json:"delay_ms,omitempty"`
}

// FailureDetail is structured information on a failure event: what the CLI
// reports next to its words. Recognizers read it before the words (see
// [FailureRecognizer]).
type FailureDetail struct {
	// Status is the HTTP status of the failed model call, when known.
	Status int `json:"status,omitempty"`
	// Code is the CLI's own failure code ("error_during_execution",
	// "rate_limit", Copilot's errorType, Codex's codexErrorInfo).
	Code string `json:"code,omitempty"`
	// ProviderType and ProviderCode are the "type" and "code" of the model
	// provider's error body, when the CLI passes them on (Anthropic:
	// "rate_limit_error", "overloaded_error"; OpenAI: type
	// "insufficient_quota", code "invalid_api_key").
	ProviderType string `json:"provider_type,omitempty"`
	ProviderCode string `json:"provider_code,omitempty"`
}

// FinishedDetail is the terminal event's verdict.
type FinishedDetail struct {
	OK bool `json:"ok"`
	// Reason is the CLI's terminal reason or subtype, when it gives one.
	Reason string `json:"reason,omitempty"`
}

// RawLimit bounds the line a raw event carries: a longer line travels as
// {"truncated_bytes":N,"preview":"<its first RawPreview bytes>"}, so one huge
// line a decoder does not understand costs kilobytes, not its size many
// times over.
const (
	RawLimit   = 64 << 10
	RawPreview = 4 << 10
)

// RawEvent is the raw event for a line a decoder did not understand: the
// line itself when it is JSON, else the line as a JSON string (invalid UTF-8
// becomes U+FFFD), so events always marshal; bounded by [RawLimit].
func RawEvent(line []byte) Event { return rawEvent(line, false) }

// rawEvent is [RawEvent]; parsed says the line is known to be JSON, so its
// syntax is not checked again.
func rawEvent(line []byte, parsed bool) Event {
	var r json.RawMessage
	t := bytes.TrimSpace(line)
	switch {
	case len(t) > RawLimit:
		r, _ = json.Marshal(struct {
			Bytes   int    `json:"truncated_bytes"`
			Preview string `json:"preview"`
		}{len(line), Preview(string(line[:min(len(line), RawPreview+utf8.UTFMax)]), RawPreview)})
	case parsed || len(t) > 0 && json.Valid(t):
		r = append(json.RawMessage(nil), t...)
	default:
		r, _ = json.Marshal(string(line))
	}
	return Event{Kind: KindRaw, Raw: r}
}

// Preview returns the start of s, at most limit bytes, cut at a UTF-8
// character boundary.
func Preview(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	i := limit
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i]
}
