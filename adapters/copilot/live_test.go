package copilot_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/adapters/adaptertest"
	"github.com/outpost-dev/outpost/adapters/copilot"
	"github.com/outpost-dev/outpost/internal/testenv"
	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/outposttest"
)

func TestLiveRequest(t *testing.T) {
	a := copilot.New()
	in := adapters.Input{Prompt: "hi", Model: "gpt-4.1", Effort: "low", Workdir: "/w", Home: "/h",
		Endpoint: &adapters.Endpoint{BaseURL: "http://127.0.0.1:9", APIKey: "sk-MARK-secret"}}
	one, err := a.Request(in)
	require.NoError(t, err)
	cmd, s, err := a.LiveRequest(in)
	require.NoError(t, err)
	assert.Equal(t, []string{"copilot", "--acp", "--allow-all", "--no-ask-user", "--no-auto-update",
		"--model", "gpt-4.1", "--reasoning-effort", "low"}, cmd.Args)
	assert.Equal(t, one.Env, cmd.Env)
	assert.True(t, cmd.KeepStdinOpen)
	lines := strings.Split(strings.TrimSpace(string(cmd.Stdin)), "\n")
	require.Len(t, lines, 2)
	assert.JSONEq(t, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}`, lines[0])
	assert.JSONEq(t, `{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/w","mcpServers":[]}}`, lines[1])
	assert.NotContains(t, string(cmd.Stdin), `"hi"`, "the prompt waits for the session")
	assert.NotContains(t, strings.Join(cmd.Args, " ")+string(cmd.Stdin), "sk-MARK-secret", "the key travels in the environment only")
	assert.False(t, s.Ready())
	_, err = s.EncodeInput("early")
	assert.ErrorIs(t, err, copilot.ErrNotRunning)

	// The session answer queues the prompt; from then on a message replaces it.
	evs := s.Decode([]byte(`{"jsonrpc":"2.0","id":2,"result":{"sessionId":"S1"}}`))
	require.Len(t, evs, 1)
	assert.Equal(t, "S1", evs[0].Conversation)
	assert.JSONEq(t, `{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"S1","prompt":[{"type":"text","text":"hi"}]}}`,
		string(s.Pending()))
	assert.False(t, s.Ready(), "a prompt replaced before it reached the model would be lost")
	s.Decode([]byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S1","update":{"sessionUpdate":"session_info_update","title":"hi"}}}`))
	assert.False(t, s.Ready())
	s.Decode([]byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S1","update":{"sessionUpdate":"usage_update","used":8773,"size":64000}}}`))
	require.True(t, s.Ready(), "the prompt reached the model")
	b, err := s.EncodeInput("more")
	require.NoError(t, err)
	assert.JSONEq(t, `{"jsonrpc":"2.0","id":4,"method":"session/prompt","params":{"sessionId":"S1","prompt":[{"type":"text","text":"more"}]}}`, string(b))
	assert.False(t, s.Ready(), "until the new prompt reaches the model")

	// A permission request is cancelled, other requests refused.
	s.Decode([]byte(`{"jsonrpc":"2.0","id":0,"method":"session/request_permission","params":{}}`))
	assert.JSONEq(t, `{"jsonrpc":"2.0","id":0,"result":{"outcome":{"outcome":"cancelled"}}}`, string(s.Pending()))
	s.Decode([]byte(`{"jsonrpc":"2.0","id":"x","method":"fs/read_text_file","params":{}}`))
	assert.JSONEq(t, `{"jsonrpc":"2.0","id":"x","error":{"code":-32601,"message":"outpost: fs/read_text_file is not supported in a headless turn"}}`, string(s.Pending()))

	// The replaced prompt's response does not end the turn; the latest's does.
	s.Decode([]byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"partial"}}}}`))
	assert.False(t, s.Ready(), "output of the replaced prompt says nothing about the new one")
	s.Decode([]byte(`{"jsonrpc":"2.0","id":3,"result":{"stopReason":"cancelled"}}`))
	assert.False(t, s.Done())
	s.Decode([]byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S1","update":{"sessionUpdate":"usage_update","used":8800,"size":64000}}}`))
	assert.True(t, s.Ready())
	_, err = s.EncodeInput(" ")
	assert.Equal(t, outposterr.Configuration, outposterr.ClassOf(err))
	s.Decode([]byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"answer"}}}}`))
	evs = s.Decode([]byte(`{"jsonrpc":"2.0","id":4,"result":{"stopReason":"end_turn","usage":{"inputTokens":10,"outputTokens":2,"cachedReadTokens":4}}}`))
	assert.True(t, s.Done())
	assert.False(t, s.Ready())
	kinds := map[adapters.Kind]string{}
	for _, ev := range evs {
		kinds[ev.Kind] = ev.Text
		if ev.Kind == adapters.KindUsage {
			assert.Equal(t, int64(6), ev.Usage.Input)
			assert.Equal(t, int64(4), ev.Usage.Cached)
		}
	}
	assert.Equal(t, "answer", kinds[adapters.KindResult], "the replaced prompt's partial text is not the answer")
	assert.Contains(t, kinds, adapters.KindFinished)

	for _, bad := range []adapters.Input{{Prompt: " "}, {Prompt: "p", Continue: "--x"}, {Prompt: "p", Continue: "a", Fork: true},
		{Prompt: "p", Permission: "plan"}} {
		_, _, err := a.LiveRequest(bad)
		assert.Equal(t, outposterr.Configuration, outposterr.ClassOf(err), "%+v", bad)
	}
	cmd, _, err = a.LiveRequest(adapters.Input{Prompt: "p", Continue: "abc", Workdir: "/w"})
	require.NoError(t, err)
	assert.Contains(t, string(cmd.Stdin), `{"jsonrpc":"2.0","id":2,"method":"session/load","params":{"cwd":"/w","mcpServers":[],"sessionId":"abc"}}`)
	assert.NotContains(t, cmd.Args, "--resume")
}

// TestLiveErrors: ACP reports model failures as agent text and a response
// without usage; session/load of a missing session is an error response.
func TestLiveErrors(t *testing.T) {
	_, s, err := copilot.New().LiveRequest(adapters.Input{Prompt: "p", Workdir: "/w"})
	require.NoError(t, err)
	var evs []adapters.Event
	for _, l := range []string{
		`{"jsonrpc":"2.0","id":2,"result":{"sessionId":"S1"}}`,
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"Info: Request failed due to a transient API error. Retrying..."}}}}`,
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"Error: Failed to get response from the AI model; retried 5 times (total retry wait time: 14.68 seconds) Last error: 500 Internal Server Error"}}}}`,
		`{"jsonrpc":"2.0","id":3,"result":{"stopReason":"end_turn"}}`,
	} {
		got := s.Decode([]byte(l))
		require.NotEmpty(t, got)
		evs = append(evs, got...)
	}
	byKind := map[adapters.Kind][]adapters.Event{}
	for _, ev := range evs {
		adaptertest.CheckEvent(t, ev)
		byKind[ev.Kind] = append(byKind[ev.Kind], ev)
	}
	require.Len(t, byKind[adapters.KindRetry], 1)
	require.Len(t, byKind[adapters.KindFailure], 1)
	assert.Equal(t, 500, byKind[adapters.KindFailure][0].Failure.Status)
	assert.Empty(t, byKind[adapters.KindResult])
	assert.False(t, byKind[adapters.KindFinished][0].Finished.OK)

	_, s, err = copilot.New().LiveRequest(adapters.Input{Prompt: "p", Workdir: "/w", Continue: "00000000-0000-4000-8000-000000000000"})
	require.NoError(t, err)
	evs = s.Decode([]byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"x","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"history"}}}}`))
	assert.Equal(t, adapters.KindRaw, evs[0].Kind, "history replayed by session/load is not this turn's text")
	evs = s.Decode([]byte(`{"jsonrpc":"2.0","id":2,"error":{"code":-32002,"message":"Resource not found: Session 00000000-0000-4000-8000-000000000000 not found"}}`))
	require.Len(t, evs, 2)
	assert.True(t, copilot.New().SessionMissing(evs[0].Text))
	assert.True(t, s.Done())
}

// liveCase is one live-input run of the real CLI over ACP.
type liveCase struct {
	name     string
	scenario outposttest.Scenario
	prompt   string
	prior    string // a one-shot turn run first; the live turn continues it
	missing  bool
	sends    []adaptertest.LiveSend
	check    func(t *testing.T, r adaptertest.LiveRun, srv *outposttest.Server)
}

func sendOn(k adapters.Kind, text string) adaptertest.LiveSend {
	return adaptertest.LiveSend{When: func(ev adapters.Event) bool { return ev.Kind == k }, Text: text}
}

var liveCases = []liveCase{
	{name: "replaced", scenario: outposttest.ScenarioSlow, prompt: "first MARK-cp1",
		sends: []adaptertest.LiveSend{sendOn(adapters.KindTextDelta, "also MARK-cp2")},
		check: func(t *testing.T, r adaptertest.LiveRun, srv *outposttest.Server) {
			assert.Equal(t, "outpost ok: MARK-cp2. remembered: MARK-cp1", r.Last(adapters.KindResult))
			reqs := srv.ModelRequests()
			require.NotEmpty(t, reqs)
			assert.Contains(t, reqs[len(reqs)-1].UserText(), "MARK-cp1", "the message went into the same session")
			assert.Contains(t, reqs[len(reqs)-1].UserText(), "MARK-cp2")
		}},
	{name: "resume", scenario: outposttest.ScenarioSlow, prior: "remember MARK-cpr1", prompt: "then MARK-cpr2",
		sends: []adaptertest.LiveSend{sendOn(adapters.KindTextDelta, "and MARK-cpr3")},
		check: func(t *testing.T, r adaptertest.LiveRun, srv *outposttest.Server) {
			assert.Equal(t, "outpost ok: MARK-cpr3. remembered: MARK-cpr1 MARK-cpr2", r.Last(adapters.KindResult))
			assert.Equal(t, 1, r.Count(adapters.KindResult))
		}},
	{name: "tool", scenario: outposttest.ScenarioTool, prompt: "write MARK-cpt1",
		check: func(t *testing.T, r adaptertest.LiveRun, srv *outposttest.Server) {
			assert.Equal(t, "outpost tool done: wrote outpost-MARK-cpt1.txt. outpost ok: MARK-cpt1.", r.Last(adapters.KindResult))
			assert.Equal(t, 1, r.Count(adapters.KindTool))
			assert.Equal(t, 1, r.Count(adapters.KindToolResult))
		}},
	{name: "quota", scenario: outposttest.ScenarioQuota, prompt: "MARK-cpq1",
		check: func(t *testing.T, r adaptertest.LiveRun, srv *outposttest.Server) {
			require.Equal(t, 1, r.Count(adapters.KindFailure))
			ok, _ := copilot.New().Quota(r.Last(adapters.KindFailure), time.Now())
			assert.True(t, ok, "the failure text is a quota text")
		}},
	{name: "resume_missing", scenario: outposttest.ScenarioOK, prompt: "MARK-cpm1", missing: true,
		check: func(t *testing.T, r adaptertest.LiveRun, srv *outposttest.Server) {
			assert.Equal(t, 1, r.Count(adapters.KindFailure))
			assert.Empty(t, srv.ModelRequests())
		}},
}

// TestLiveRealCLI drives the real copilot --acp through ACPSession the way
// the harness does; with -capture it records testdata/live fixtures.
func TestLiveRealCLI(t *testing.T) {
	testenv.Short(t)
	bin := testenv.CLI(t, "copilot")
	for _, c := range liveCases {
		t.Run(c.name, func(t *testing.T) {
			if !*capture {
				t.Parallel()
			}
			liveOne(t, bin, c)
		})
	}
}

func liveOne(t *testing.T, bin string, c liveCase) {
	srv, err := outposttest.NewServer(outposttest.WithScenario(c.scenario), outposttest.WithChunkDelay(200*time.Millisecond),
		outposttest.WithQuotaReset(time.Now().Add(3*time.Hour)))
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close() })
	root := filepath.Join(captureRoot, "live-"+c.name)
	require.NoError(t, os.RemoveAll(root))
	home, work := filepath.Join(root, "home"), filepath.Join(root, "work")
	require.NoError(t, os.MkdirAll(home, 0o700))
	require.NoError(t, os.MkdirAll(work, 0o755))
	t.Cleanup(func() { _ = os.RemoveAll(root) })

	a := copilot.New(copilot.WithBinary(bin))
	in := adapters.Input{Prompt: c.prompt, Workdir: work, Home: home,
		Endpoint: &adapters.Endpoint{BaseURL: srv.URL(), APIKey: outposttest.PlaceholderKey},
		Env:      map[string]string{"XDG_CACHE_HOME": filepath.Join(os.TempDir(), "outpost-copilot-cache")}}
	if c.missing {
		in.Continue = "01a23600-0000-4000-8000-000000000000"
	}
	if c.prior != "" {
		first := in
		first.Prompt = c.prior
		stdout, _, _, _, _ := runCopilot(t, a, first, 0)
		in.Continue = conversationOf(a, stdout)
		require.NotEmpty(t, in.Continue, "first turn printed no session id:\n%s", stdout)
	}
	cmd, s, err := a.LiveRequest(in)
	require.NoError(t, err)
	run := adaptertest.DriveLive(t, cmd, s, c.sends, stable, 2*time.Minute)
	assert.Equal(t, 1, run.Count(adapters.KindFinished), "one finished event:\n%s", run.Stdout)
	c.check(t, run, srv)
	if t.Failed() || !*capture {
		return
	}
	source := "captured from copilot " + copilot.Version + " --acp (LiveRequest) against outposttest scenario " + string(c.scenario)
	if c.prior != "" {
		source += " (session/load of a session a one-shot turn made)"
	}
	if c.missing {
		source += " (session/load of an id that does not exist)"
	}
	adaptertest.WriteLiveCase(t, filepath.Join("testdata", "live", c.name),
		adaptertest.LiveScript{Prompt: c.prompt, Workdir: work, Continue: in.Continue}, run, source, copilot.Version)
}

// TestLiveGolden replays the live-input fixtures (testdata/live) through
// ACPSession and the harness.
func TestLiveGolden(t *testing.T) {
	adaptertest.RunLive(t, filepath.Join("testdata", "live"), func(adaptertest.LiveScript) adapters.Adapter { return copilot.New() })
}

func TestLiveCapabilities(t *testing.T) {
	var a adapters.Adapter = copilot.New()
	_, live := a.(adapters.LiveInput)
	assert.True(t, live)
}

// TestLiveHostileChunks: an endless agent message is kept bounded.
func TestLiveHostileChunks(t *testing.T) {
	_, s, err := copilot.New().LiveRequest(adapters.Input{Prompt: "p", Workdir: "/w"})
	require.NoError(t, err)
	s.Decode([]byte(`{"jsonrpc":"2.0","id":2,"result":{"sessionId":"S1"}}`))
	chunk := `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"` +
		strings.Repeat("x", 1<<20) + `"}}}}`
	for range 20 {
		s.Decode([]byte(chunk))
	}
	var result string
	for _, ev := range s.Decode([]byte(`{"jsonrpc":"2.0","id":3,"result":{"stopReason":"end_turn","usage":{"inputTokens":1}}}`)) {
		if ev.Kind == adapters.KindResult {
			result = ev.Text
		}
	}
	assert.Equal(t, 16<<20, len(result), "the kept answer is bounded")
}

func FuzzLiveDecode(f *testing.F) {
	adaptertest.FuzzLiveDecode(f, func() adapters.LiveSession {
		_, s, _ := copilot.New().LiveRequest(adapters.Input{Prompt: "p", Workdir: "/w"})
		return s
	}, filepath.Join("testdata", "live"))
}

// A line the session does not understand keeps only a bounded preview,
// however long it is: an unknown notification, a known one without what
// the session reads, and a line that is not JSON.
func TestLiveLongRawLineBounded(t *testing.T) {
	_, s, err := copilot.New().LiveRequest(adapters.Input{Prompt: "hi", Workdir: "/w"})
	require.NoError(t, err)
	pad := strings.Repeat("x", 2*adapters.RawLimit)
	for _, line := range []string{
		`{"jsonrpc":"2.0","method":"mystery/notification","params":{"pad":"` + pad + `"}}`,
		`{"jsonrpc":"2.0","method":"session/update","params":{"update":{"sessionUpdate":"plan","content":"` + pad + `"}}}`,
		`not json ` + pad,
	} {
		adaptertest.CheckLongRaw(t, s, []byte(line))
	}
}
