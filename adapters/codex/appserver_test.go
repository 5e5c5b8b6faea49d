package codex_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/adapters/adaptertest"
	"github.com/outpost-dev/outpost/adapters/codex"
	"github.com/outpost-dev/outpost/internal/testenv"
	"github.com/outpost-dev/outpost/outposttest"
	"github.com/outpost-dev/outpost/sandbox"
)

func TestAppServerRequest(t *testing.T) {
	cmd, s, err := codex.New().AppServerRequest(adapters.Input{Prompt: "hi", Workdir: "/w", Home: "/h",
		Continue: "01a23609-93dd-7b83-b568-93ed3eb5ee5f", Fork: true, Model: "gpt-5.5"})
	require.NoError(t, err)
	assert.Equal(t, "app-server", cmd.Args[len(cmd.Args)-1])
	assert.True(t, cmd.KeepStdinOpen)
	lines := strings.Split(strings.TrimSpace(string(cmd.Stdin)), "\n")
	require.Len(t, lines, 3)
	assert.JSONEq(t, `{"id":1,"method":"initialize","params":{"clientInfo":{"name":"outpost","title":"Outpost","version":"0.169.0"}}}`, lines[0])
	assert.JSONEq(t, `{"method":"initialized"}`, lines[1])
	assert.JSONEq(t, `{"id":2,"method":"thread/fork","params":{"threadId":"01a23609-93dd-7b83-b568-93ed3eb5ee5f",
		"approvalPolicy":"never","sandbox":"danger-full-access","cwd":"/w","model":"gpt-5.5"}}`, lines[2])
	assert.NotContains(t, string(cmd.Stdin), "hi\"", "the prompt waits for the thread")

	_, err = s.EncodeInput("more")
	assert.ErrorIs(t, err, codex.ErrNotRunning)

	// The thread answer queues turn/start; the turn answer enables steering.
	evs := s.Decode([]byte(`{"id":2,"result":{"thread":{"id":"T1"}}}`))
	require.Len(t, evs, 1)
	assert.Equal(t, "T1", evs[0].Conversation)
	assert.JSONEq(t, `{"id":3,"method":"turn/start","params":{"threadId":"T1","input":[{"type":"text","text":"hi"}]}}`,
		string(s.Pending()))
	assert.Empty(t, s.Pending())
	s.Decode([]byte(`{"id":3,"result":{"turn":{"id":"U1","status":"inProgress"}}}`))
	b, err := s.EncodeInput("more")
	require.NoError(t, err)
	assert.JSONEq(t, `{"id":4,"method":"turn/steer","params":{"threadId":"T1","expectedTurnId":"U1","input":[{"type":"text","text":"more"}]}}`, string(b))

	// Server requests are refused.
	evs = s.Decode([]byte(`{"id":0,"method":"item/commandExecution/requestApproval","params":{}}`))
	assert.Equal(t, adapters.KindRaw, evs[0].Kind)
	assert.JSONEq(t, `{"id":0,"error":{"code":-32601,"message":"outpost: item/commandExecution/requestApproval is not supported in a headless turn"}}`,
		string(s.Pending()))

	_, _, err = codex.New().AppServerRequest(adapters.Input{Prompt: "p", Continue: "--x"})
	assert.Error(t, err)
}

// TestAppServerLiveInput steers a running turn of the real codex app-server:
// the second message reaches the model in the same turn.
func TestAppServerLiveInput(t *testing.T) {
	testenv.Short(t)
	bin := testenv.CLI(t, "codex")
	srv, err := outposttest.NewServer(outposttest.WithScenario(outposttest.ScenarioSlow),
		outposttest.WithChunkDelay(150*time.Millisecond))
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close() })
	home, err := os.MkdirTemp("/var/tmp", "outpost-codex-appserver-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(home) })

	zero := 0
	cmd, s, err := codex.New(codex.WithBinary(bin)).AppServerRequest(adapters.Input{
		Prompt: "first MARK-live1", Workdir: t.TempDir(), Home: home, MaxRetries: &zero,
		Endpoint: &adapters.Endpoint{BaseURL: srv.URL(), APIKey: outposttest.PlaceholderKey}})
	require.NoError(t, err)

	steered := false
	lines, evs := runAppServer(t, cmd, s, func(ev adapters.Event, stdin io.Writer) {
		if ev.Kind == adapters.KindTextDelta && !steered {
			// The model is streaming its first answer: steer.
			b, err := s.EncodeInput("also MARK-live2")
			require.NoError(t, err)
			_, err = stdin.Write(b)
			require.NoError(t, err)
			steered = true
		}
	})
	require.True(t, steered, "no text delta seen:\n%s", lines)

	var result, conv string
	var finished *adapters.FinishedDetail
	for _, ev := range evs {
		switch ev.Kind {
		case adapters.KindResult:
			result = ev.Text
		case adapters.KindConversation:
			conv = ev.Conversation
		case adapters.KindFinished:
			finished = ev.Finished
		}
	}
	require.NotNil(t, finished, "turn/completed seen:\n%s", lines)
	assert.True(t, finished.OK)
	assert.Equal(t, s.Thread(), conv)
	assert.Equal(t, "outpost ok: MARK-live2. remembered: MARK-live1", result,
		"the steered message reached the model in the same turn")
	reqs := srv.ModelRequests()
	require.GreaterOrEqual(t, len(reqs), 2)
	assert.Contains(t, reqs[len(reqs)-1].UserText(), "MARK-live2")

	// Keep a real transcript for the decoder tests.
	if *capture {
		require.NoError(t, os.WriteFile("testdata/appserver_live.jsonl", lines, 0o644))
	}
}

// runAppServer runs one turn of the real app-server the way the harness
// would: every stdout line goes to s, each event to each (which may write to
// stdin), s's pending replies to stdin, and stdin closes once s is done. It
// returns the transcript (loopback ports and request ids made stable) and
// the events.
func runAppServer(t *testing.T, cmd sandbox.Command, s *codex.AppSession, each func(ev adapters.Event, stdin io.Writer)) ([]byte, []adapters.Event) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	p := exec.CommandContext(ctx, cmd.Args[0], cmd.Args[1:]...)
	p.Dir = cmd.Dir
	p.Env = []string{"PATH=" + os.Getenv("PATH")}
	for k, v := range cmd.Env {
		p.Env = append(p.Env, k+"="+v)
	}
	stdin, err := p.StdinPipe()
	require.NoError(t, err)
	stdout, err := p.StdoutPipe()
	require.NoError(t, err)
	var stderr bytes.Buffer
	p.Stderr = &stderr
	require.NoError(t, p.Start())
	_, err = stdin.Write(cmd.Stdin)
	require.NoError(t, err)

	var evs []adapters.Event
	var lines bytes.Buffer
	sc := bufio.NewScanner(stdout)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		lines.Write(sc.Bytes())
		lines.WriteByte('\n')
		for _, ev := range s.Decode(sc.Bytes()) {
			adaptertest.CheckEvent(t, ev)
			evs = append(evs, ev)
			if each != nil {
				each(ev, stdin)
			}
		}
		if b := s.Pending(); len(b) > 0 {
			_, err := stdin.Write(b)
			require.NoError(t, err)
		}
		if s.Done() {
			require.NoError(t, stdin.Close())
		}
	}
	_, _ = io.Copy(io.Discard, stdout)
	require.NoError(t, p.Wait(), "stderr: %s", stderr.String())
	return stable(lines.Bytes()), evs
}

// appServerErrors are app-server turns captured against failing scenarios
// (TestAppServerCaptureErrors -capture), with what their structured fields
// say: codexErrorInfo's variant and status, and the class.
var appServerErrors = []struct {
	scenario outposttest.Scenario
	code     string
	status   int
	quota    bool
	outage   string
	auth     string
}{
	{outposttest.ScenarioInsufficientQuota, "usageLimitExceeded", 0, true, "", ""},
	{outposttest.ScenarioRateLimit, "responseTooManyFailedAttempts", 429, true, "", ""},
	{outposttest.ScenarioUnauthorized, "httpConnectionFailed", 401, false, "", "invalid api key"},
	{outposttest.ScenarioUnavailable, "httpConnectionFailed", 503, false, "http 503", ""},
	{outposttest.ScenarioOverloaded, "serverOverloaded", 0, false, "overloaded", ""},
}

func appServerTranscript(sc outposttest.Scenario) string {
	return "testdata/appserver_" + string(sc) + ".jsonl"
}

// TestAppServerCaptureErrors records app-server turns of the real codex
// against failing scenarios, for TestAppServerErrorsCaptured:
//
//	go test -run TestAppServerCaptureErrors ./adapters/codex/ -capture -v
func TestAppServerCaptureErrors(t *testing.T) {
	if !*capture {
		t.Skip("run with -capture to re-record app-server transcripts from the real codex CLI")
	}
	bin := testenv.CLI(t, "codex")
	for _, c := range appServerErrors {
		t.Run(string(c.scenario), func(t *testing.T) {
			srv, err := outposttest.NewServer(outposttest.WithScenario(c.scenario), outposttest.WithRetryAfter(time.Second))
			require.NoError(t, err)
			t.Cleanup(func() { _ = srv.Close() })
			home, err := os.MkdirTemp("/var/tmp", "outpost-codex-appserver-")
			require.NoError(t, err)
			t.Cleanup(func() { _ = os.RemoveAll(home) })
			one := 1
			cmd, s, err := codex.New(codex.WithBinary(bin)).AppServerRequest(adapters.Input{
				Prompt: "MARK-app1", Workdir: t.TempDir(), Home: home, MaxRetries: &one, Env: map[string]string{"TZ": "UTC"},
				Endpoint: &adapters.Endpoint{BaseURL: srv.URL(), APIKey: outposttest.PlaceholderKey}})
			require.NoError(t, err)
			lines, _ := runAppServer(t, cmd, s, nil)
			require.NoError(t, os.WriteFile(appServerTranscript(c.scenario), lines, 0o644))
		})
	}
}

// TestAppServerErrorsCaptured decodes the app-server transcripts captured
// from codex 0.169.0: the failure carries codexErrorInfo, and the structured
// fields decide its class before its words.
func TestAppServerErrorsCaptured(t *testing.T) {
	a := codex.New()
	for _, c := range appServerErrors {
		t.Run(string(c.scenario), func(t *testing.T) {
			data, err := os.ReadFile(appServerTranscript(c.scenario))
			require.NoError(t, err)
			_, s, err := a.AppServerRequest(adapters.Input{Prompt: "MARK-app1"})
			require.NoError(t, err)
			var failures []adapters.Event
			for _, l := range bytes.Split(data, []byte("\n")) {
				if len(l) == 0 {
					continue
				}
				for _, ev := range s.Decode(l) {
					adaptertest.CheckEvent(t, ev)
					if ev.Kind == adapters.KindFailure {
						failures = append(failures, ev)
					}
					if ev.Kind == adapters.KindRetry {
						assert.NotContains(t, ev.Retry.Reason, "Reconnecting", "the cause, not the notice")
					}
				}
			}
			require.Len(t, failures, 1)
			f := failures[0]
			assert.Equal(t, c.code, f.Failure.Code)
			assert.Equal(t, c.status, f.Failure.Status)
			ok, _ := adapters.FailureQuota(a, f)
			assert.Equal(t, c.quota, ok)
			outage, _ := adapters.FailureUnavailable(a, f)
			assert.Equal(t, c.outage, outage)
			auth, _ := adapters.FailureAuth(a, f)
			assert.Equal(t, c.auth, auth)
			assert.True(t, s.Done())
		})
	}
}

// TestAppServerDecodeCaptured decodes a transcript captured from the real
// 0.169.0 app-server (TestAppServerLiveInput -capture).
func TestAppServerDecodeCaptured(t *testing.T) {
	data, err := os.ReadFile("testdata/appserver_live.jsonl")
	require.NoError(t, err)
	cmd, s, err := codex.New().LiveRequest(adapters.Input{Prompt: "first MARK-live1"})
	require.NoError(t, err)
	assert.True(t, cmd.KeepStdinOpen)
	counts := map[adapters.Kind]int{}
	var result string
	wasReady := false
	for _, l := range bytes.Split(data, []byte("\n")) {
		if len(l) == 0 {
			continue
		}
		if s.Ready() {
			wasReady = true
		} else if !wasReady {
			_, err := s.EncodeInput("too early")
			assert.ErrorIs(t, err, codex.ErrNotRunning, "no turn runs before turn/start is answered")
		}
		var m map[string]any
		require.NoError(t, json.Unmarshal(l, &m))
		evs := s.Decode(l)
		require.NotEmpty(t, evs)
		for _, ev := range evs {
			adaptertest.CheckEvent(t, ev)
			counts[ev.Kind]++
			if ev.Kind == adapters.KindResult {
				result = ev.Text
			}
		}
	}
	assert.Equal(t, 1, counts[adapters.KindConversation])
	assert.Positive(t, counts[adapters.KindTextDelta])
	assert.Positive(t, counts[adapters.KindReasoning])
	assert.Positive(t, counts[adapters.KindUsage])
	assert.Equal(t, 1, counts[adapters.KindFinished])
	assert.Equal(t, "outpost ok: MARK-live2. remembered: MARK-live1", result)
	assert.True(t, wasReady, "the session became ready once the turn started")
	assert.True(t, s.Done())
	assert.False(t, s.Ready(), "a finished turn takes no more input")
	_, err = s.EncodeInput("too late")
	assert.ErrorIs(t, err, codex.ErrNotRunning)
}

// A line the session does not understand keeps only a bounded preview,
// however long it is: an unknown notification, a known one without what
// the session reads, and a line that is not JSON.
func TestAppServerLongRawLineBounded(t *testing.T) {
	_, s, err := codex.New().AppServerRequest(adapters.Input{Prompt: "hi"})
	require.NoError(t, err)
	pad := strings.Repeat("x", 2*adapters.RawLimit)
	for _, line := range []string{
		`{"method":"mystery/notification","params":{"pad":"` + pad + `"}}`,
		`{"method":"item/started","params":{"item":{"type":"userMessage","id":"u1","text":"` + pad + `"}}}`,
		`not json ` + pad,
	} {
		adaptertest.CheckLongRaw(t, s, []byte(line))
	}
}
