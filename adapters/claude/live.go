package claude

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"

	"github.com/google/uuid"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/sandbox"
	"github.com/outpost-dev/outpost/usage"
)

var _ adapters.LiveInput = (*Adapter)(nil)

// WithMessageIDs sets where the uuids of live-input user messages come from
// (default: random version-4 UUIDs). Claude Code skips a message whose uuid
// its conversation already holds, so every id must be new to the
// conversation; f must be safe for concurrent use. Meant for reproducible
// tests and recordings.
func WithMessageIDs(f func() string) Option { return func(a *Adapter) { a.ids = f } }

// LiveRequest implements [adapters.LiveInput]: the command of [Adapter.Request]
// (same flags, validation and environment) with --input-format stream-json,
// the prompt as the first user-message line on stdin, and stdin kept open.
// The returned session is a [*LiveSession].
func (a *Adapter) LiveRequest(in adapters.Input) (sandbox.Command, adapters.LiveSession, error) {
	args, env, err := a.command(in, true)
	if err != nil {
		return sandbox.Command{}, nil, err
	}
	ids := a.ids
	if ids == nil {
		ids = uuid.NewString
	}
	s := &LiveSession{dec: NewDecoder(), ids: ids, msgs: map[string]bool{}}
	s.first = ids()
	s.msgs[s.first], s.open = true, 1
	return sandbox.Command{Args: args, Env: env, Dir: in.Workdir, Stdin: userLine(s.first, in.Prompt),
		KeepStdinOpen: true}, s, nil
}

// userLine is one stream-json user message: a single text block, with the
// uuid Claude Code names in its command_lifecycle lines.
func userLine(id, text string) []byte {
	type block struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	type msg struct {
		Role    string  `json:"role"`
		Content []block `json:"content"`
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b) // one line, newline-terminated
	enc.SetEscapeHTML(false)
	_ = enc.Encode(struct {
		Type            string  `json:"type"`
		UUID            string  `json:"uuid"`
		Message         msg     `json:"message"`
		ParentToolUseID *string `json:"parent_tool_use_id"`
	}{"user", id, msg{"user", []block{{"text", text}}}, nil})
	return b.Bytes()
}

// ErrNotRunning is returned by [LiveSession.EncodeInput] before the prompt
// started and after the turn ended.
var ErrNotRunning = errors.New("claude: no running turn to take the message")

// LiveSession is the state of one live-input turn ([adapters.LiveSession]):
// Claude Code in stream-json input mode, where every stdin line is a user
// message. It is not safe for concurrent use.
//
// Claude Code answers each user message line it reads with command_lifecycle
// lines naming the message's uuid: queued, started, then completed (or
// cancelled when its turn failed). Messages that arrive while a turn runs
// are either folded into it (between tool calls) or queued and run, merged,
// as the next turn, which ends in a result of its own. So one live turn can
// print several results; the session holds back the finished event of each
// and releases the last one when every delivered message reached a
// terminal state and a result followed the last one that started. Until
// then further messages are delivered, also between results.
//
// Events are the [Decoder]'s with three changes: the conversation event is
// emitted once (Claude Code repeats system/init for every queued turn;
// repeats are raw events), turn-scoped usage reports are summed over the
// results so far, and only one finished event is emitted, when the turn is
// done. Every result is a result event, so the last one is the turn's answer;
// a failure of any result fails the turn. If Claude Code printed a result
// without acknowledging any message (a missing conversation to resume fails
// before it reads stdin), that result ends the turn.
type LiveSession struct {
	dec   *Decoder
	ids   func() string
	first string          // the prompt's uuid
	msgs  map[string]bool // delivered message uuids → not yet completed or cancelled
	open  int             // how many msgs are true

	ready      bool // the prompt started: the CLI takes messages
	acked      bool // the CLI named one of our messages in a lifecycle line
	needResult bool // a message started after the last result
	said       bool // the conversation event was emitted
	held       *adapters.Event
	total      usage.Usage
	hasCost    bool
	done       bool
}

var _ adapters.LiveSession = (*LiveSession)(nil)

// Ready reports whether the turn takes a message: from the moment the prompt
// started until the turn is done.
func (s *LiveSession) Ready() bool { return s.ready && !s.done }

// Done reports whether the turn finished; the caller then closes stdin and
// Claude Code exits.
func (s *LiveSession) Done() bool { return s.done }

// Pending returns nothing: Claude Code's input protocol needs no replies.
func (s *LiveSession) Pending() []byte { return nil }

// EncodeInput encodes text as a user-message line with a new uuid, which the
// turn then waits for.
func (s *LiveSession) EncodeInput(text string) ([]byte, error) {
	if !s.Ready() {
		return nil, ErrNotRunning
	}
	if strings.TrimSpace(text) == "" {
		return nil, configErr("empty live input")
	}
	id := s.ids()
	if _, dup := s.msgs[id]; dup {
		return nil, configErr("live input: message id %q used twice", id)
	}
	s.msgs[id] = true
	s.open++
	return userLine(id, text), nil
}

// lifecycle is a command_lifecycle line.
type lifecycle struct {
	Type        string `json:"type"`
	Subtype     string `json:"subtype"`
	CommandUUID string `json:"command_uuid"`
	State       string `json:"state"`
}

// Decode turns one stdout line into events (see [LiveSession]). Every line
// yields at least one event.
func (s *LiveSession) Decode(b []byte) []adapters.Event {
	var l lifecycle
	if bytes.Contains(b, []byte(`"command_lifecycle"`)) || (s.said && bytes.Contains(b, []byte(`"init"`))) {
		_ = json.Unmarshal(b, &l)
	}
	var evs []adapters.Event
	switch {
	case l.Type == "command_lifecycle":
		s.lifecycle(l.CommandUUID, l.State)
		evs = raw(b)
	case l.Type == "system" && l.Subtype == "init":
		evs = raw(b) // a queued turn's init repeats the conversation
	default:
		evs = s.fold(b, s.dec.Decode(b))
	}
	if s.done {
		return evs
	}
	switch {
	case s.held != nil && (!s.acked || (s.open == 0 && !s.needResult)):
		evs = append(evs, *s.held)
		s.held = nil
		s.done = true
	case s.acked && s.open == 0 && !s.needResult:
		s.done = true // every message ended without a turn (none can follow)
	}
	return evs
}

func (s *LiveSession) lifecycle(id, state string) {
	open, ours := s.msgs[id]
	if !ours || !open {
		return // not one of ours, or already over
	}
	s.acked = true
	if id == s.first && state != "queued" {
		s.ready = true // messages now queue behind the prompt, never merge into it
	}
	switch state {
	case "queued":
	case "started":
		s.needResult = true
	default: // completed, cancelled: the message is over
		s.msgs[id] = false
		s.open--
	}
}

// fold applies the session's changes to the decoder's events.
func (s *LiveSession) fold(b []byte, evs []adapters.Event) []adapters.Event {
	out := evs[:0]
	for _, ev := range evs {
		switch ev.Kind {
		case adapters.KindConversation:
			s.said = true
		case adapters.KindUsage:
			if ev.Usage != nil && ev.Usage.Scope == usage.ScopeTurn {
				s.total = s.total.Add(ev.Usage.Usage)
				s.total.Complete = true
				s.hasCost = s.hasCost || ev.Usage.HasCost
				r := *ev.Usage
				r.Usage, r.HasCost = s.total, s.hasCost
				ev.Usage = &r
			}
		case adapters.KindFinished:
			e := ev
			s.held, s.needResult = &e, false
			continue
		}
		out = append(out, ev)
	}
	if len(out) == 0 {
		// The line's only event was a held finished: keep one event per line.
		return raw(b)
	}
	return out
}
