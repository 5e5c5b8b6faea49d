package codex

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/sandbox"
	"github.com/outpost-dev/outpost/usage"
)

// AppSession is the state of one app-server turn ([adapters.LiveSession]).
// It is not safe for concurrent use.
type AppSession struct {
	prompt   string
	threadID string
	turnID   string
	nextID   int
	out      adapters.Outbox // pending stdin
	said     bool            // conversation event emitted
	last     string
	haveLast bool
	done     bool
	tools    map[string]bool
}

// Request IDs of the session's own requests.
const (
	idInitialize = 1
	idThread     = 2
	idTurn       = 3
)

var _ adapters.LiveInput = (*Adapter)(nil)

// LiveRequest implements [adapters.LiveInput]: see [Adapter.AppServerRequest].
func (a *Adapter) LiveRequest(in adapters.Input) (sandbox.Command, adapters.LiveSession, error) {
	cmd, s, err := a.AppServerRequest(in)
	if err != nil {
		return sandbox.Command{}, nil, err
	}
	return cmd, s, nil
}

// AppServerRequest builds the command of a live-input turn: `codex -c…
// app-server` with the opening messages on stdin, which stays open
// (sandbox.Command.KeepStdinOpen). The caller feeds every stdout line to the
// returned session's Decode, writes [AppSession.Pending] to stdin after each,
// and closes stdin once the session is [AppSession.Done]. Input is validated
// as for [Adapter.Request]; permission, model and working directory travel
// in the thread request (bypass: sandbox "danger-full-access", approvals
// "never").
func (a *Adapter) AppServerRequest(in adapters.Input) (sandbox.Command, *AppSession, error) {
	c, err := a.common(in)
	if err != nil {
		return sandbox.Command{}, nil, err
	}
	if len(in.Schema) > 0 {
		return sandbox.Command{}, nil, configErr("a typed response is not available with live input")
	}
	args := []string{a.Binary()}
	for _, kv := range c.cfg {
		args = append(args, "-c", kv)
	}
	args = append(args, "app-server")

	params := map[string]any{"approvalPolicy": "never"}
	if c.bypass {
		params["sandbox"] = "danger-full-access"
	} else {
		params["sandbox"] = in.Permission
	}
	if in.Workdir != "" {
		params["cwd"] = in.Workdir
	}
	if in.Model != "" {
		params["model"] = in.Model
	}
	method := "thread/start"
	if in.Continue != "" {
		params["threadId"] = in.Continue
		method = "thread/resume"
		if in.Fork {
			method = "thread/fork"
		}
	}
	var stdin []byte
	for _, m := range []map[string]any{
		{"id": idInitialize, "method": "initialize", "params": map[string]any{
			"clientInfo": map[string]string{"name": "outpost", "title": "Outpost", "version": Version}}},
		{"method": "initialized"},
		{"id": idThread, "method": method, "params": params},
	} {
		stdin = adapters.AppendJSONLine(stdin, m)
	}
	s := &AppSession{prompt: in.Prompt, nextID: idTurn + 1}
	return sandbox.Command{Args: args, Env: c.env, Dir: in.Workdir, Stdin: stdin, KeepStdinOpen: true}, s, nil
}

// Thread is the thread id the server named (empty until it did).
func (s *AppSession) Thread() string { return s.threadID }

// Turn is the running turn's id (empty until turn/start was answered).
func (s *AppSession) Turn() string { return s.turnID }

// Ready reports whether a turn is running that [AppSession.EncodeInput] can steer.
func (s *AppSession) Ready() bool { return s.turnID != "" && !s.done }

// Done reports whether the turn finished; the caller then closes stdin.
func (s *AppSession) Done() bool { return s.done }

// Pending returns, and forgets, the bytes to write to stdin now.
func (s *AppSession) Pending() []byte { return s.out.Pending() }

// ErrNotRunning is returned by [AppSession.EncodeInput] before the turn runs
// or after it finished.
var ErrNotRunning = errors.New("codex: no running app-server turn to steer")

// EncodeInput encodes text as a turn/steer request for the running turn.
func (s *AppSession) EncodeInput(text string) ([]byte, error) {
	if s.turnID == "" || s.done {
		return nil, ErrNotRunning
	}
	if strings.TrimSpace(text) == "" {
		return nil, configErr("empty live input")
	}
	b := adapters.AppendJSONLine(nil, map[string]any{"id": s.nextID, "method": "turn/steer", "params": map[string]any{
		"threadId": s.threadID, "expectedTurnId": s.turnID,
		"input": []map[string]string{{"type": "text", "text": text}}}})
	s.nextID++
	return b, nil
}

// appLine is the union of the JSON-RPC shapes.
type appLine struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Result *struct {
		Thread *struct {
			ID string `json:"id"`
		} `json:"thread"`
		Turn *struct {
			ID string `json:"id"`
		} `json:"turn"`
	} `json:"result"`
	Error  *adapters.RPCError `json:"error"`
	Params *appParams         `json:"params"`
}

type appParams struct {
	ThreadID string `json:"threadId"`
	Thread   *struct {
		ID string `json:"id"`
	} `json:"thread"`
	Turn *struct {
		ID     string    `json:"id"`
		Status string    `json:"status"`
		Error  *appError `json:"error"`
	} `json:"turn"`
	Item       *appItem  `json:"item"`
	Delta      string    `json:"delta"`
	Error      *appError `json:"error"`
	WillRetry  bool      `json:"willRetry"`
	TokenUsage *struct {
		Total *struct {
			InputTokens           int64 `json:"inputTokens"`
			CachedInputTokens     int64 `json:"cachedInputTokens"`
			CacheWriteInputTokens int64 `json:"cacheWriteInputTokens"`
			OutputTokens          int64 `json:"outputTokens"`
			ReasoningOutputTokens int64 `json:"reasoningOutputTokens"`
		} `json:"total"`
	} `json:"tokenUsage"`
	Message string `json:"message"`
	Summary string `json:"summary"`
}

type appError struct {
	Message           string          `json:"message"`
	CodexErrorInfo    json.RawMessage `json:"codexErrorInfo"`
	AdditionalDetails string          `json:"additionalDetails"`
}

// detail is the structured detail of an app-server error: Code is the
// codexErrorInfo variant ("usageLimitExceeded", "serverOverloaded",
// "internalServerError", "unauthorized", "httpConnectionFailed",
// "responseTooManyFailedAttempts", …; Codex words it as a bare string, or as
// an object naming the variant with an httpStatusCode), else fallback; Status
// is its httpStatusCode, else a status stated in text.
func (e *appError) detail(fallback, text string) *adapters.FailureDetail {
	f := &adapters.FailureDetail{Code: fallback}
	if len(e.CodexErrorInfo) > 0 {
		var name string
		var obj map[string]struct {
			HTTPStatusCode *int `json:"httpStatusCode"`
		}
		switch {
		case json.Unmarshal(e.CodexErrorInfo, &name) == nil && name != "":
			f.Code = name
		case json.Unmarshal(e.CodexErrorInfo, &obj) == nil && len(obj) == 1:
			for k, v := range obj {
				f.Code = k
				if v.HTTPStatusCode != nil {
					f.Status = *v.HTTPStatusCode
				}
			}
		}
	}
	if f.Status == 0 {
		f.Status = status(text)
	}
	return f
}

type appItem struct {
	Type             string          `json:"type"`
	ID               string          `json:"id"`
	Text             string          `json:"text"`
	Summary          []string        `json:"summary"`
	Command          string          `json:"command"`
	AggregatedOutput *string         `json:"aggregatedOutput"`
	ExitCode         *int            `json:"exitCode"`
	Status           string          `json:"status"`
	Server           string          `json:"server"`
	Tool             string          `json:"tool"`
	Arguments        json.RawMessage `json:"arguments"`
	Result           json.RawMessage `json:"result"`
	Error            json.RawMessage `json:"error"`
	Changes          []struct {
		Path string          `json:"path"`
		Kind json.RawMessage `json:"kind"`
	} `json:"changes"`
}

var _ adapters.Decoder = (*AppSession)(nil)

// Decode turns one app-server stdout line into events, queuing replies (see
// [AppSession.Pending]). Every line yields at least one event.
//
//	response to thread/start|resume|fork   conversation; queues turn/start
//	response to turn/start                 (turn id noted) raw
//	error response to our requests         failure (the server's message), finished not ok;
//	                                       to a turn/steer: warning (the turn goes on)
//	server request                         raw; queues a -32601 refusal
//	thread/started                         conversation (once)
//	item/completed agentMessage            text; reasoning → reasoning (summary)
//	item/started|completed commandExecution tool "shell" / tool-result
//	item/started|completed mcpToolCall     tool "mcp:<server>/<tool>" / tool-result
//	item/completed fileChange              file-change per change
//	item/agentMessage/delta                text-delta
//	error                                  retry when willRetry (reason: additionalDetails,
//	                                       status: codexErrorInfo's httpStatusCode), else warning
//	warning, configWarning                 warning
//	thread/tokenUsage/updated              usage (cumulative: the thread's total)
//	turn/completed                         result + finished ok; failed: failure (Code: the
//	                                       codexErrorInfo variant, Status: its httpStatusCode)
//	                                       + finished not ok; interrupted: finished not ok
//	anything else                          raw
func (s *AppSession) Decode(b []byte) []adapters.Event { return adapters.DecodeJSON(b, s.decode) }

func (s *AppSession) conversation(id string) []adapters.Event {
	if id == "" || s.said {
		return nil
	}
	s.said, s.threadID = true, id
	return []adapters.Event{{Kind: adapters.KindConversation, Conversation: id}}
}

func (s *AppSession) decode(l *appLine) []adapters.Event {
	hasID := adapters.IsRequestID(l.ID)
	switch {
	case hasID && l.Method != "":
		// A server request: Outpost answers none of them.
		s.out.Queue(adapters.AppendJSONLine(nil, map[string]any{"id": l.ID, "error": adapters.Unsupported(l.Method)}))
		return nil
	case hasID && l.Error != nil:
		if n, err := strconv.Atoi(string(l.ID)); err == nil && n > idTurn && n < s.nextID {
			// A refused turn/steer: that message did not reach the turn,
			// which goes on (or already ended) and keeps its own verdict.
			return []adapters.Event{{Kind: adapters.KindWarning, Text: "live input not delivered: " + l.Error.Message}}
		}
		s.done = true
		return []adapters.Event{
			{Kind: adapters.KindFailure, Text: l.Error.Message, Failure: &adapters.FailureDetail{Code: "jsonrpc " + string(l.ID)}},
			adapters.FinishedEvent(false, "rpc error"),
		}
	case hasID && l.Result != nil:
		switch string(l.ID) {
		case "2":
			if l.Result.Thread == nil {
				return nil
			}
			evs := s.conversation(l.Result.Thread.ID)
			s.threadID = l.Result.Thread.ID
			s.out.Queue(adapters.AppendJSONLine(nil, map[string]any{"id": idTurn, "method": "turn/start", "params": map[string]any{
				"threadId": s.threadID, "input": []map[string]string{{"type": "text", "text": s.prompt}}}}))
			return evs
		case "3":
			if l.Result.Turn != nil {
				s.turnID = l.Result.Turn.ID
			}
		}
		return nil
	}
	p := l.Params
	if p == nil {
		return nil
	}
	switch l.Method {
	case "thread/started":
		if p.Thread != nil {
			return s.conversation(p.Thread.ID)
		}
	case "turn/started":
		if p.Turn != nil && s.turnID == "" {
			s.turnID = p.Turn.ID
		}
	case "item/started", "item/completed":
		if p.Item != nil {
			return s.item(l.Method == "item/completed", p.Item)
		}
	case "item/agentMessage/delta":
		if p.Delta != "" {
			return []adapters.Event{{Kind: adapters.KindTextDelta, Text: p.Delta}}
		}
	case "error":
		if p.Error == nil || p.Error.Message == "" {
			return nil
		}
		if p.WillRetry {
			// The message is "Reconnecting... 1/5"; the cause is in the details.
			reason := p.Error.Message
			if p.Error.AdditionalDetails != "" {
				reason = p.Error.AdditionalDetails
			}
			return []adapters.Event{{Kind: adapters.KindRetry, Retry: &adapters.RetryNotice{
				Reason: reason, Status: p.Error.detail("", reason).Status}}}
		}
		return []adapters.Event{{Kind: adapters.KindWarning, Text: p.Error.Message}}
	case "warning", "configWarning", "deprecationNotice":
		text := p.Message
		if text == "" {
			text = p.Summary
		}
		if text != "" {
			return []adapters.Event{{Kind: adapters.KindWarning, Text: text}}
		}
	case "thread/tokenUsage/updated":
		if p.TokenUsage != nil && p.TokenUsage.Total != nil {
			t := p.TokenUsage.Total
			u := adapters.InclusiveUsage(t.InputTokens, t.CachedInputTokens, t.CacheWriteInputTokens,
				t.OutputTokens, t.ReasoningOutputTokens)
			u.Complete = true
			return []adapters.Event{{Kind: adapters.KindUsage, Usage: &usage.Report{Scope: usage.ScopeCumulative, Usage: u}}}
		}
	case "turn/completed":
		if p.Turn == nil {
			return nil
		}
		s.done = true
		switch p.Turn.Status {
		case "completed":
			var evs []adapters.Event
			if s.haveLast {
				evs = append(evs, adapters.Event{Kind: adapters.KindResult, Text: s.last})
			}
			return append(evs, adapters.FinishedEvent(true, "completed"))
		default:
			var evs []adapters.Event
			if e := p.Turn.Error; e != nil && e.Message != "" {
				evs = append(evs, adapters.Event{Kind: adapters.KindFailure, Text: e.Message,
					Failure: e.detail(p.Turn.Status, e.Message)})
			}
			return append(evs, adapters.FinishedEvent(false, p.Turn.Status))
		}
	}
	return nil
}

func (s *AppSession) item(completed bool, it *appItem) []adapters.Event {
	switch it.Type {
	case "agentMessage":
		if !completed {
			return nil
		}
		s.last, s.haveLast = it.Text, true
		if it.Text != "" {
			return []adapters.Event{{Kind: adapters.KindText, Text: it.Text}}
		}
	case "reasoning":
		if text := strings.Join(it.Summary, "\n"); completed && strings.TrimSpace(text) != "" {
			return []adapters.Event{{Kind: adapters.KindReasoning, Text: text}}
		}
	case "commandExecution":
		input, _ := json.Marshal(map[string]string{"command": it.Command})
		out := ""
		if it.AggregatedOutput != nil {
			out = *it.AggregatedOutput
		}
		isErr := it.Status != "completed" || it.ExitCode == nil || *it.ExitCode != 0
		return s.tool(completed, it.ID, "shell", input, out, isErr)
	case "mcpToolCall":
		out, isErr := mcpOutcome(it.Status, it.Result, it.Error)
		return s.tool(completed, it.ID, "mcp:"+it.Server+"/"+it.Tool, it.Arguments, out, isErr)
	case "fileChange":
		if !completed {
			return nil
		}
		var evs []adapters.Event
		for _, c := range it.Changes {
			var k struct {
				Type string `json:"type"`
			}
			_ = json.Unmarshal(c.Kind, &k)
			if c.Path != "" {
				evs = append(evs, adapters.Event{Kind: adapters.KindFileChange,
					FileChange: &adapters.FileChange{Path: c.Path, Change: change(k.Type)}})
			}
		}
		return evs
	}
	return nil
}

func (s *AppSession) tool(completed bool, id, name string, input json.RawMessage, out string, isErr bool) []adapters.Event {
	var evs []adapters.Event
	if !s.tools[id] {
		if s.tools == nil || len(s.tools) >= maxAnnounced {
			s.tools = map[string]bool{}
		}
		s.tools[id] = true
		evs = append(evs, adapters.ToolEvent(id, name, input))
	}
	if completed {
		evs = append(evs, adapters.ToolResultEvent(id, name, isErr, out))
	}
	return evs
}
