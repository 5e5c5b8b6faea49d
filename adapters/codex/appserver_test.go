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

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
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
	steered := false
	sc := bufio.NewScanner(stdout)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		lines.Write(sc.Bytes())
		lines.WriteByte('\n')
		for _, ev := range s.Decode(sc.Bytes()) {
			adaptertest.CheckEvent(t, ev)
			evs = append(evs, ev)
			if ev.Kind == adapters.KindTextDelta && !steered {
				// The model is streaming its first answer: steer.
				b, err := s.EncodeInput("also MARK-live2")
				require.NoError(t, err)
				_, err = stdin.Write(b)
				require.NoError(t, err)
				steered = true
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
	require.True(t, steered, "no text delta seen:\n%s", lines.String())

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
	require.NotNil(t, finished, "turn/completed seen:\n%s", lines.String())
	assert.True(t, finished.OK)
	assert.Equal(t, s.Thread(), conv)
	assert.Equal(t, "outpost ok: MARK-live2. remembered: MARK-live1", result,
		"the steered message reached the model in the same turn")
	reqs := srv.ModelRequests()
	require.GreaterOrEqual(t, len(reqs), 2)
	assert.Contains(t, reqs[len(reqs)-1].UserText(), "MARK-live2")

	// Keep a real transcript for the decoder tests.
	if *capture {
		require.NoError(t, os.WriteFile("testdata/appserver_live.jsonl", lines.Bytes(), 0o644))
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
