package claude_test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/adapters/adaptertest"
	"github.com/outpost-dev/outpost/adapters/claude"
	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/usage"
)

// seqIDs returns ids id-1, id-2, … (safe for concurrent use).
func seqIDs(prefix string) func() string {
	var mu sync.Mutex
	n := 0
	return func() string {
		mu.Lock()
		defer mu.Unlock()
		n++
		return fmt.Sprintf("%s-%d", prefix, n)
	}
}

// Lines shaped like claude 2.1.328's stream-json output in input mode.
func lifecycleLine(id, state string) string {
	return `{"type":"command_lifecycle","command_uuid":"` + id + `","state":"` + state + `","uuid":"x","session_id":"S1"}`
}

const initLine = `{"type":"system","subtype":"init","session_id":"S1","model":"claude-opus-5-5","claude_code_version":"2.1.328","cwd":"/w","tools":[],"mcp_servers":[{"name":"broken","status":"failed"}]}`

func resultLine(text string, input int) string {
	return fmt.Sprintf(`{"type":"result","subtype":"success","is_error":false,"result":%q,"session_id":"S1","total_cost_usd":0.5,`+
		`"usage":{"input_tokens":%d,"output_tokens":1},"model_usage_since_last_result":{"m":{"inputTokens":%d,"outputTokens":1,"costUSD":0.25}},"terminal_reason":"completed"}`,
		text, input, input)
}

func assistantLine(id, text string) string {
	return `{"type":"assistant","message":{"id":"` + id + `","model":"claude-opus-5-5","content":[{"type":"text","text":"` + text + `"}],"usage":{"input_tokens":3,"output_tokens":1}},"session_id":"S1","parent_tool_use_id":null}`
}

type liveRun struct {
	t   *testing.T
	s   adapters.LiveSession
	evs []adapters.Event
}

func (r *liveRun) feed(lines ...string) {
	r.t.Helper()
	for _, l := range lines {
		evs := r.s.Decode([]byte(l))
		require.NotEmpty(r.t, evs, "line %s", l)
		for _, ev := range evs {
			adaptertest.CheckEvent(r.t, ev)
		}
		r.evs = append(r.evs, evs...)
		assert.Empty(r.t, r.s.Pending())
	}
}

func (r *liveRun) count(k adapters.Kind) int {
	n := 0
	for _, ev := range r.evs {
		if ev.Kind == k {
			n++
		}
	}
	return n
}

func (r *liveRun) send(text string) string {
	r.t.Helper()
	b, err := r.s.EncodeInput(text)
	require.NoError(r.t, err)
	var m struct {
		UUID string `json:"uuid"`
	}
	require.NoError(r.t, json.Unmarshal(b, &m))
	return m.UUID
}

func newLive(t *testing.T, in adapters.Input) (*liveRun, []byte) {
	cmd, s, err := claude.New(claude.WithMessageIDs(seqIDs("m"))).LiveRequest(in)
	require.NoError(t, err)
	return &liveRun{t: t, s: s}, cmd.Stdin
}

func TestLiveRequest(t *testing.T) {
	const id = "27950ff7-9e32-4d39-8649-e4bc7e8247d2"
	a := claude.New(claude.WithPartialMessages(), claude.WithMessageIDs(seqIDs("m")))
	in := adapters.Input{Prompt: "hi \"there\" <b>", Model: "claude-opus-5-5", Continue: id, Fork: true, Workdir: "/w", Home: "/h",
		Schema: json.RawMessage(`{"type":"object"}`), MaxRetries: intp(2)}
	one, err := a.Request(in)
	require.NoError(t, err)
	cmd, s, err := a.LiveRequest(in)
	require.NoError(t, err)
	assert.True(t, cmd.KeepStdinOpen)
	assert.Equal(t, slices.Concat(one.Args[:5], []string{"--input-format", "stream-json"}, one.Args[5:]), cmd.Args,
		"the one-shot argv with stream-json input")
	assert.Equal(t, one.Env, cmd.Env)
	assert.Equal(t, "/w", cmd.Dir)
	assert.Equal(t, `{"type":"user","uuid":"m-1","message":{"role":"user","content":[{"type":"text","text":"hi \"there\" <b>"}]},"parent_tool_use_id":null}`+"\n",
		string(cmd.Stdin))
	assert.False(t, s.Ready(), "nothing is ready before the prompt starts")
	_, err = s.EncodeInput("early")
	assert.ErrorIs(t, err, claude.ErrNotRunning)

	for _, bad := range []adapters.Input{{Prompt: " "}, {Prompt: "p", Continue: "--x"}, {Prompt: "p", Fork: true},
		{Prompt: "p", Permission: "yolo"}, {Prompt: "p", Schema: json.RawMessage(`{`)}} {
		_, _, err := a.LiveRequest(bad)
		assert.Equal(t, outposterr.Configuration, outposterr.ClassOf(err), "%+v", bad)
	}
	var plain adapters.Adapter = claude.New()
	_, live := plain.(adapters.LiveInput)
	assert.True(t, live)
}

func TestLiveRandomIDs(t *testing.T) {
	cmd1, _, err := claude.New().LiveRequest(adapters.Input{Prompt: "p"})
	require.NoError(t, err)
	cmd2, _, err := claude.New().LiveRequest(adapters.Input{Prompt: "p"})
	require.NoError(t, err)
	assert.NotEqual(t, string(cmd1.Stdin), string(cmd2.Stdin), "every message has a new uuid")
}

// TestLiveTwoResults: a message sent while the first answer streams is
// queued by Claude Code and answered in a second result; the turn ends on
// that one, not on the first.
func TestLiveTwoResults(t *testing.T) {
	r, _ := newLive(t, adapters.Input{Prompt: "first"})
	r.feed(initLine, lifecycleLine("m-1", "queued"))
	assert.False(t, r.s.Ready())
	r.feed(lifecycleLine("m-1", "started"))
	assert.True(t, r.s.Ready(), "the prompt runs: messages can go in")
	id := r.send("second")
	assert.Equal(t, "m-2", id)
	r.feed(lifecycleLine("m-2", "queued"), assistantLine("a1", "one"), resultLine("one", 100))
	assert.False(t, r.s.Done(), "the second message is not answered yet")
	assert.Zero(t, r.count(adapters.KindFinished), "the first result's finished event is held")
	assert.True(t, r.s.Ready(), "between results the turn still takes messages")
	r.feed(lifecycleLine("m-1", "completed"), lifecycleLine("m-2", "started"), initLine,
		assistantLine("a2", "two"), resultLine("two", 10))
	assert.False(t, r.s.Done(), "the second message has not completed yet")
	r.feed(lifecycleLine("m-2", "completed"))
	assert.True(t, r.s.Done())
	assert.False(t, r.s.Ready())
	_, err := r.s.EncodeInput("late")
	assert.ErrorIs(t, err, claude.ErrNotRunning)

	assert.Equal(t, 1, r.count(adapters.KindConversation), "a queued turn's init is not a new conversation")
	assert.Equal(t, 1, r.count(adapters.KindWarning), "the MCP warning of init is said once")
	assert.Equal(t, 2, r.count(adapters.KindResult))
	require.Equal(t, 1, r.count(adapters.KindFinished))
	last := r.evs[len(r.evs)-1]
	assert.Equal(t, adapters.KindFinished, last.Kind, "released on the line that ended the turn")
	assert.True(t, last.Finished.OK)
	var turn []usage.Usage
	for _, ev := range r.evs {
		if ev.Kind == adapters.KindUsage && ev.Usage.Scope == usage.ScopeTurn {
			turn = append(turn, ev.Usage.Usage)
			assert.True(t, ev.Usage.HasCost)
		}
	}
	require.Len(t, turn, 2)
	assert.Equal(t, int64(110), turn[1].Input, "turn usage sums the results")
	assert.InDelta(t, 0.5, turn[1].CostUSD, 1e-9)
}

// TestLiveMessageBetweenResults: a message that arrives after a result, while
// another message is still open, is delivered and waited for.
func TestLiveMessageBetweenResults(t *testing.T) {
	r, _ := newLive(t, adapters.Input{Prompt: "first"})
	r.feed(initLine, lifecycleLine("m-1", "queued"), lifecycleLine("m-1", "started"))
	r.send("second")
	r.feed(lifecycleLine("m-2", "queued"), resultLine("one", 1), lifecycleLine("m-1", "completed"),
		lifecycleLine("m-2", "started"))
	require.True(t, r.s.Ready())
	r.send("third") // between results
	r.feed(lifecycleLine("m-3", "queued"), resultLine("two", 1), lifecycleLine("m-2", "completed"))
	assert.False(t, r.s.Done(), "the third message is open")
	r.feed(lifecycleLine("m-3", "started"), resultLine("three", 1))
	assert.False(t, r.s.Done())
	r.feed(lifecycleLine("m-3", "completed"))
	assert.True(t, r.s.Done())
	assert.Equal(t, 3, r.count(adapters.KindResult))
	assert.Equal(t, 1, r.count(adapters.KindFinished))
}

// TestLiveFoldedMessage: a message Claude Code folds into the running turn
// (between tool calls) completes before the turn's result; the turn ends
// when the prompt completes after that result.
func TestLiveFoldedMessage(t *testing.T) {
	r, _ := newLive(t, adapters.Input{Prompt: "first"})
	r.feed(initLine, lifecycleLine("m-1", "queued"), lifecycleLine("m-1", "started"))
	r.send("second")
	r.feed(lifecycleLine("m-2", "queued"), lifecycleLine("m-2", "started"), lifecycleLine("m-2", "completed"))
	assert.False(t, r.s.Done(), "no result yet")
	r.feed(resultLine("done", 1))
	assert.False(t, r.s.Done(), "the prompt has not completed")
	r.feed(lifecycleLine("m-1", "completed"))
	assert.True(t, r.s.Done())
	assert.Equal(t, 1, r.count(adapters.KindFinished))
}

// TestLiveCompletedBeforeResult: when every message completed before the
// result, the result ends the turn.
func TestLiveCompletedBeforeResult(t *testing.T) {
	r, _ := newLive(t, adapters.Input{Prompt: "first"})
	r.feed(initLine, lifecycleLine("m-1", "started"), lifecycleLine("m-1", "completed"))
	assert.False(t, r.s.Done())
	r.feed(resultLine("done", 1))
	assert.True(t, r.s.Done())
	assert.Equal(t, adapters.KindFinished, r.evs[len(r.evs)-1].Kind)
}

// TestLiveNoLifecycle: a result before any message was acknowledged (a
// resume of a missing conversation fails before stdin is read) ends the turn.
func TestLiveNoLifecycle(t *testing.T) {
	r, _ := newLive(t, adapters.Input{Prompt: "first", Continue: "9c9c9c9c-1111-4111-8111-111111111111"})
	r.feed(`{"type":"result","subtype":"error_during_execution","is_error":true,"session_id":"9c9c9c9c-1111-4111-8111-111111111111","errors":["No conversation found with session ID: 9c9c9c9c-1111-4111-8111-111111111111"]}`)
	assert.True(t, r.s.Done())
	assert.Equal(t, 1, r.count(adapters.KindFailure))
	require.Equal(t, 1, r.count(adapters.KindFinished))
	assert.False(t, r.evs[len(r.evs)-1].Finished.OK)
}

// TestLiveCancelled: a failed turn cancels its messages; queued ones run
// and fail in turn; the turn ends after the last, not on the first failure.
func TestLiveCancelled(t *testing.T) {
	r, _ := newLive(t, adapters.Input{Prompt: "first"})
	r.feed(initLine, lifecycleLine("m-1", "queued"), lifecycleLine("m-1", "started"))
	r.send("second")
	r.feed(lifecycleLine("m-2", "queued"),
		`{"type":"result","subtype":"success","is_error":true,"result":"API Error: 429","api_error_status":429,"session_id":"S1"}`,
		lifecycleLine("m-1", "cancelled"))
	assert.False(t, r.s.Done())
	r.feed(lifecycleLine("m-2", "started"),
		`{"type":"result","subtype":"success","is_error":true,"result":"API Error: 429","api_error_status":429,"session_id":"S1"}`,
		lifecycleLine("m-2", "cancelled"))
	assert.True(t, r.s.Done())
	assert.Equal(t, 2, r.count(adapters.KindFailure))
	assert.Equal(t, 1, r.count(adapters.KindFinished))
}

// TestLiveUnknownIDs: lifecycle lines of other commands are raw and change nothing.
func TestLiveUnknownIDs(t *testing.T) {
	r, _ := newLive(t, adapters.Input{Prompt: "first"})
	r.feed(lifecycleLine("other", "started"), lifecycleLine("other", "completed"))
	assert.False(t, r.s.Ready())
	assert.Equal(t, 2, r.count(adapters.KindRaw))
	r.feed(lifecycleLine("m-1", "started"), lifecycleLine("m-1", "completed"), lifecycleLine("m-1", "started"))
	r.feed(resultLine("ok", 1))
	assert.True(t, r.s.Done(), "a repeated lifecycle of an ended message is ignored")
}

// TestLiveEndedWithoutTurn: messages that end without any turn (Claude Code
// skips a uuid its conversation already holds) end the turn without a
// finished event instead of waiting forever.
func TestLiveEndedWithoutTurn(t *testing.T) {
	r, _ := newLive(t, adapters.Input{Prompt: "first"})
	r.feed(initLine, lifecycleLine("m-1", "completed"))
	assert.True(t, r.s.Done())
	assert.Zero(t, r.count(adapters.KindFinished))
}

func TestLiveEncodeInput(t *testing.T) {
	r, _ := newLive(t, adapters.Input{Prompt: "first"})
	r.feed(lifecycleLine("m-1", "started"))
	_, err := r.s.EncodeInput("  \n")
	assert.Equal(t, outposterr.Configuration, outposterr.ClassOf(err))
	b, err := r.s.EncodeInput("line one\nline \"two\"")
	require.NoError(t, err)
	assert.True(t, strings.HasSuffix(string(b), "}\n"))
	assert.Equal(t, 1, strings.Count(string(b), "\n"), "one line")

	same := claude.New(claude.WithMessageIDs(func() string { return "same" }))
	_, s, err := same.LiveRequest(adapters.Input{Prompt: "p"})
	require.NoError(t, err)
	s.Decode([]byte(lifecycleLine("same", "started")))
	_, err = s.EncodeInput("again")
	assert.Error(t, err, "an id used twice is refused")
}

func FuzzLiveDecode(f *testing.F) {
	adaptertest.FuzzLiveDecode(f, func() adapters.LiveSession {
		_, s, _ := claude.New(claude.WithMessageIDs(seqIDs("m"))).LiveRequest(adapters.Input{Prompt: "p"})
		return s
	}, filepath.Join("testdata", "live"))
}

// TestLiveSecretsStayInTheEnvironment: the endpoint key of a live turn
// reaches neither argv nor stdin.
func TestLiveSecretsStayInTheEnvironment(t *testing.T) {
	const secret = "sk-MARK-live-secret"
	cmd, s, err := claude.New().LiveRequest(adapters.Input{Prompt: "p",
		Endpoint: &adapters.Endpoint{BaseURL: "http://127.0.0.1:9", APIKey: secret}})
	require.NoError(t, err)
	assert.Equal(t, secret, cmd.Env["ANTHROPIC_API_KEY"])
	s.Decode([]byte(lifecycleLine("x", "started")))
	assert.NotContains(t, strings.Join(cmd.Args, " ")+string(cmd.Stdin)+cmd.Redacted(), secret)
}
