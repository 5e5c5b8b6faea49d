package copilot

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"strings"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/sandbox"
	"github.com/outpost-dev/outpost/usage"
)

var _ adapters.LiveInput = (*Adapter)(nil)

// maxMessage bounds the text kept of one agent message (its chunks still
// stream as text-delta events).
const maxMessage = 16 << 20

// Request ids of the session's own requests; prompts count up from idPrompt.
const (
	idInitialize = 1
	idSession    = 2
	idPrompt     = 3
)

// LiveRequest implements [adapters.LiveInput]: `copilot --acp` (the Agent
// Client Protocol over stdio) with the flags and environment of
// [Adapter.Request] (no --output-format, no --resume: a conversation is
// continued with session/load), stdin kept open. The returned session is an
// [*ACPSession].
func (a *Adapter) LiveRequest(in adapters.Input) (sandbox.Command, adapters.LiveSession, error) {
	env, err := a.env(in)
	if err != nil {
		return sandbox.Command{}, nil, err
	}
	args := []string{a.Binary(), "--acp", "--allow-all", "--no-ask-user", "--no-auto-update"}
	args = append(args, a.flags(in)...)
	mcp, _ := mcpArgs(in) // validated by env
	args = append(args, mcp...)
	args = a.AppendExtra(args)

	s := &ACPSession{prompt: in.Prompt, resume: in.Continue, next: idPrompt}
	stdin := rpc{ID: idInitialize, Method: "initialize", Params: map[string]any{
		"protocolVersion": 1, "clientCapabilities": map[string]any{}}}.line()
	params := map[string]any{"cwd": in.Workdir, "mcpServers": []any{}}
	method := "session/new"
	if in.Continue != "" {
		method, params["sessionId"], s.loading = "session/load", in.Continue, true
	}
	stdin = append(stdin, rpc{ID: idSession, Method: method, Params: params}.line()...)
	return sandbox.Command{Args: args, Env: env, Dir: in.Workdir, Stdin: stdin, KeepStdinOpen: true}, s, nil
}

// rpc is an outgoing JSON-RPC 2.0 message.
type rpc struct {
	JSONRPC string             `json:"jsonrpc"`
	ID      any                `json:"id,omitempty"`
	Method  string             `json:"method,omitempty"`
	Params  any                `json:"params,omitempty"`
	Result  any                `json:"result,omitempty"`
	Error   *adapters.RPCError `json:"error,omitempty"`
}

// line is m as a JSON-RPC 2.0 line.
func (m rpc) line() []byte {
	m.JSONRPC = "2.0"
	return adapters.AppendJSONLine(nil, m)
}

// ErrNotRunning is returned by [ACPSession.EncodeInput] before the session
// exists and after the turn ended.
var ErrNotRunning = errors.New("copilot: no running session to take the message")

// ACPSession is the state of one live-input turn over the Agent Client
// Protocol ([adapters.LiveSession]). It is not safe for concurrent use.
//
// The opening messages (initialize, then session/new, or session/load for a
// conversation to continue) go on stdin at once; the prompt follows as
// session/prompt once the session exists. Verified against the real
// 1.0.102: a further session/prompt sent while one runs cancels it (its
// response says stopReason "cancelled"; what its answer streamed so far is
// dropped from the conversation, the user message is kept) and runs the new
// message in the same session, so a live message interrupts the running work
// rather than joining it. A prompt replaced before it reached the model is
// lost from the conversation, so a message waits until the latest prompt
// did (see [ACPSession.Ready]). The turn ends with the response to the
// latest prompt. Closing stdin makes the CLI exit at once, even mid-prompt.
//
// Mapping (every line yields at least one event):
//
//	session response               conversation (the session id)
//	error response to ours         failure (the message), finished not ok
//	server request                 raw; answered (permission: cancelled; else -32601)
//	agent_message_chunk            text-delta; "Info: … Retrying…" → retry
//	agent_thought_chunk            reasoning
//	tool_call                      text (the message so far), tool (name: its kind)
//	tool_call_update done/failed   tool-result
//	latest prompt's response       text, result, message-scoped usage and
//	                               finished ok (end_turn); without usage and
//	                               with an "Error: …" message: failure and
//	                               finished not ok
//	history replayed by session/load, everything else   raw
//
// ACP reports model failures only as agent text: "Error: …" (the text the
// one-shot JSON mode puts in session.error) after "Info: Request failed due
// to a transient API error. Retrying..." chunks, and a response with
// stopReason "end_turn" and no usage. The session takes the last "Error: "
// message of a prompt whose response carries no usage as its failure, so
// the recognizers classify it as they do one-shot failures.
type ACPSession struct {
	prompt    string
	resume    string
	sessionID string
	next      int             // id of the next prompt
	current   int             // id of the latest prompt, 0 before the first
	out       adapters.Outbox // pending stdin
	loading   bool            // session/load is replaying the conversation
	started   bool            // the latest prompt reached the model
	replaced  int             // replaced prompts whose response has not come yet
	done      bool
	said      bool
	msg       strings.Builder // agent text of the current message
	errText   string
	retries   int
	tools     map[string]string // call id → name of announced tools
}

var _ adapters.LiveSession = (*ACPSession)(nil)

// Session is the session id (empty until the CLI named it).
func (s *ACPSession) Session() string { return s.sessionID }

// Ready reports whether a prompt runs that a message can replace: from the
// moment the latest prompt reached the model (its first usage_update or
// output) until the turn ends. A prompt replaced before that would be lost
// from the conversation.
func (s *ACPSession) Ready() bool { return s.started && !s.done }

// Done reports whether the turn finished; the caller then closes stdin.
func (s *ACPSession) Done() bool { return s.done }

// Pending returns, and forgets, the bytes to write to stdin now.
func (s *ACPSession) Pending() []byte { return s.out.Pending() }

// EncodeInput encodes text as a session/prompt request, which cancels the
// running prompt and runs text in its place, in the same session.
func (s *ACPSession) EncodeInput(text string) ([]byte, error) {
	if !s.Ready() {
		return nil, ErrNotRunning
	}
	if strings.TrimSpace(text) == "" {
		return nil, configErr("empty live input")
	}
	s.replaced++
	return s.promptLine(text), nil
}

// promptLine makes text the latest prompt: its session/prompt request.
func (s *ACPSession) promptLine(text string) []byte {
	s.current, s.started = s.next, false
	s.next++
	return rpc{ID: s.current, Method: "session/prompt", Params: map[string]any{
		"sessionId": s.sessionID, "prompt": []map[string]string{{"type": "text", "text": text}}}}.line()
}

// acpLine is the union of the incoming JSON-RPC shapes.
type acpLine struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Result *struct {
		SessionID  string    `json:"sessionId"`
		StopReason string    `json:"stopReason"`
		Usage      *acpUsage `json:"usage"`
	} `json:"result"`
	Error  *adapters.RPCError `json:"error"`
	Params *struct {
		Update *acpUpdate `json:"update"`
	} `json:"params"`
}

type acpUsage struct {
	InputTokens       int64 `json:"inputTokens"`
	OutputTokens      int64 `json:"outputTokens"`
	ThoughtTokens     int64 `json:"thoughtTokens"`
	CachedReadTokens  int64 `json:"cachedReadTokens"`
	CachedWriteTokens int64 `json:"cachedWriteTokens"`
}

type acpUpdate struct {
	SessionUpdate string          `json:"sessionUpdate"`
	Content       json.RawMessage `json:"content"`
	ToolCallID    string          `json:"toolCallId"`
	Title         string          `json:"title"`
	Kind          string          `json:"kind"`
	Status        string          `json:"status"`
	RawInput      json.RawMessage `json:"rawInput"`
	RawOutput     json.RawMessage `json:"rawOutput"`
}

// Decode turns one stdout line into events, queuing replies (see
// [ACPSession.Pending]). Every line yields at least one event.
func (s *ACPSession) Decode(b []byte) []adapters.Event { return adapters.DecodeJSON(b, s.decode) }

func (s *ACPSession) decode(l *acpLine) []adapters.Event {
	hasID := adapters.IsRequestID(l.ID)
	id, _ := strconv.Atoi(string(l.ID))
	switch {
	case hasID && l.Method != "":
		// A request of the agent: permission requests are cancelled (with
		// --allow-all none should come), anything else is refused.
		reply := rpc{ID: l.ID, Error: adapters.Unsupported(l.Method)}
		if l.Method == "session/request_permission" {
			reply = rpc{ID: l.ID, Result: map[string]any{"outcome": map[string]string{"outcome": "cancelled"}}}
		}
		s.out.Queue(reply.line())
		return nil
	case hasID && l.Error != nil:
		if id != idInitialize && id != idSession && id != s.current {
			s.replaced = max(s.replaced-1, 0) // a replaced prompt
			return nil
		}
		s.done = true
		return []adapters.Event{
			{Kind: adapters.KindFailure, Text: l.Error.Message, Failure: &adapters.FailureDetail{
				Code: "jsonrpc " + strconv.Itoa(l.Error.Code), Status: status(l.Error.Message)}},
			adapters.FinishedEvent(false, "rpc error"),
		}
	case hasID && l.Result != nil:
		switch {
		case id == idSession:
			s.loading = false
			s.sessionID = l.Result.SessionID
			if s.sessionID == "" {
				s.sessionID = s.resume
			}
			s.out.Queue(s.promptLine(s.prompt))
			if s.sessionID == "" || s.said {
				return nil
			}
			s.said = true
			return []adapters.Event{{Kind: adapters.KindConversation, Conversation: s.sessionID}}
		case id == s.current && id >= idPrompt:
			return s.finish(l.Result.StopReason, l.Result.Usage)
		case id >= idPrompt:
			// A prompt replaced by a later one: its partial answer is gone.
			s.replaced = max(s.replaced-1, 0)
			s.msg.Reset()
			s.errText = ""
		}
		return nil
	}
	if l.Method != "session/update" || l.Params == nil || l.Params.Update == nil || s.loading {
		return nil
	}
	return s.update(l.Params.Update)
}

func (s *ACPSession) update(u *acpUpdate) []adapters.Event {
	switch u.SessionUpdate {
	case "usage_update", "agent_message_chunk", "agent_thought_chunk", "tool_call", "tool_call_update":
		// Output of a replaced prompt can still come until its response.
		s.started = s.current != 0 && s.replaced == 0
	}
	switch u.SessionUpdate {
	case "agent_message_chunk":
		text := contentText(u.Content)
		if text == "" {
			return nil
		}
		if strings.HasPrefix(text, "Info: ") && strings.Contains(text, "Retrying") {
			s.retries++
			return []adapters.Event{{Kind: adapters.KindRetry, Retry: &adapters.RetryNotice{
				Attempt: s.retries, Reason: strings.TrimPrefix(text, "Info: ")}}}
		}
		if strings.HasPrefix(text, "Error: ") {
			s.errText = Preview(text, maxMessage)
		}
		if room := maxMessage - s.msg.Len(); room > 0 {
			s.msg.WriteString(Preview(text, room))
		}
		return []adapters.Event{{Kind: adapters.KindTextDelta, Text: text}}
	case "agent_thought_chunk":
		if text := contentText(u.Content); strings.TrimSpace(text) != "" {
			return []adapters.Event{{Kind: adapters.KindReasoning, Text: text}}
		}
	case "tool_call":
		evs := s.flush()
		return append(evs, s.tool(u)...)
	case "tool_call_update":
		if u.Status != "completed" && u.Status != "failed" {
			return nil
		}
		evs := s.tool(u)
		out := toolOutput(u)
		return append(evs, adapters.ToolResultEvent(u.ToolCallID, s.tools[u.ToolCallID], u.Status == "failed", out))
	}
	return nil
}

// flush ends the current agent message: a text event with its whole text.
func (s *ACPSession) flush() []adapters.Event {
	text := s.msg.String()
	s.msg.Reset()
	s.errText = ""
	if strings.TrimSpace(text) == "" {
		return nil
	}
	return []adapters.Event{{Kind: adapters.KindText, Text: text}}
}

// tool announces a call once.
func (s *ACPSession) tool(u *acpUpdate) []adapters.Event {
	if _, seen := s.tools[u.ToolCallID]; seen && u.ToolCallID != "" {
		return nil
	}
	if s.tools == nil || len(s.tools) >= maxAnnounced {
		s.tools = make(map[string]string, 16)
	}
	name := u.Kind
	if name == "" {
		name = "tool"
	}
	s.tools[u.ToolCallID] = name
	input := u.RawInput
	if bytes.Equal(input, []byte("null")) {
		input = nil
	}
	return []adapters.Event{adapters.ToolEvent(u.ToolCallID, name, input)}
}

// finish ends the turn on the latest prompt's response.
func (s *ACPSession) finish(stop string, u *acpUsage) []adapters.Event {
	s.done = true
	errText := s.errText
	text := s.msg.String()
	var evs []adapters.Event
	if u == nil && errText != "" {
		s.msg.Reset() // the CLI's error report is not an answer
	} else {
		evs = s.flush()
	}
	if u != nil {
		evs = append(evs, adapters.Event{Kind: adapters.KindUsage, Usage: &usage.Report{
			Scope: usage.ScopeMessage, MessageID: "prompt-" + strconv.Itoa(s.current),
			Usage: adapters.InclusiveUsage(u.InputTokens, u.CachedReadTokens, u.CachedWriteTokens, u.OutputTokens, u.ThoughtTokens)}})
	}
	switch {
	case u == nil && errText != "":
		msg := strings.TrimPrefix(errText, "Error: ")
		return append(evs,
			adapters.Event{Kind: adapters.KindFailure, Text: msg, Failure: &adapters.FailureDetail{Code: "error", Status: status(msg)}},
			adapters.FinishedEvent(false, "error"))
	case stop == "end_turn" || stop == "max_tokens" || stop == "max_turn_requests":
		return append(evs,
			adapters.Event{Kind: adapters.KindResult, Text: text},
			adapters.FinishedEvent(true, stop))
	default: // refusal, cancelled
		return append(evs, adapters.FinishedEvent(false, stop))
	}
}

// contentText is the text of a text content block.
func contentText(c json.RawMessage) string {
	var b struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(c, &b) != nil || b.Type != "text" {
		return ""
	}
	return b.Text
}

// toolOutput is a finished call's output: rawOutput.content, else the text
// of its content blocks.
func toolOutput(u *acpUpdate) string {
	var ro struct {
		Content string `json:"content"`
	}
	if json.Unmarshal(u.RawOutput, &ro) == nil && ro.Content != "" {
		return ro.Content
	}
	var blocks []struct {
		Content json.RawMessage `json:"content"`
	}
	_ = json.Unmarshal(u.Content, &blocks)
	var parts []string
	for _, b := range blocks {
		if t := contentText(b.Content); t != "" {
			parts = append(parts, t)
		}
	}
	return strings.Join(parts, "\n")
}
