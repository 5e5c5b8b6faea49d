package claude_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/adapters/adaptertest"
	"github.com/outpost-dev/outpost/adapters/claude"
	"github.com/outpost-dev/outpost/internal/testenv"
	"github.com/outpost-dev/outpost/outposttest"
)

// liveCase is one live-input run of the real CLI.
type liveCase struct {
	name     string
	scenario outposttest.Scenario
	answers  []string
	prompt   string
	schema   string
	missing  bool
	// slowShell makes every Bash tool call take seconds, so a message
	// arrives while a tool runs.
	slowShell bool
	// sends are the messages, each sent once an event matches its trigger
	// (in order: a trigger is tried only after the previous one fired).
	sends []liveSend
	check func(t *testing.T, r liveOutcome, srv *outposttest.Server)
}

type liveSend struct {
	when func(ev adapters.Event) bool
	text string
}

type liveOutcome struct {
	evs    []adapters.Event
	result string
	code   int
	stdout []byte
}

func (r liveOutcome) count(k adapters.Kind) int {
	n := 0
	for _, ev := range r.evs {
		if ev.Kind == k {
			n++
		}
	}
	return n
}

func kindIs(k adapters.Kind) func(adapters.Event) bool {
	return func(ev adapters.Event) bool { return ev.Kind == k }
}

// allText is every message text of a request, whatever its role (Claude
// Code hands a message folded into a running turn over as a system message).
func allText(r outposttest.Request) string {
	var parts []string
	for _, m := range r.Messages {
		parts = append(parts, m.Text())
	}
	return strings.Join(parts, "\n")
}

var liveCases = []liveCase{
	{name: "queued", scenario: outposttest.ScenarioSlow, prompt: "first MARK-live1",
		sends: []liveSend{{kindIs(adapters.KindTextDelta), "also MARK-live2"}},
		check: func(t *testing.T, r liveOutcome, srv *outposttest.Server) {
			assert.Equal(t, 0, r.code)
			assert.Equal(t, 2, r.count(adapters.KindResult), "the message ran as a queued turn")
			assert.Equal(t, "outpost ok: MARK-live2. remembered: MARK-live1", r.result)
			reqs := srv.ModelRequests()
			require.NotEmpty(t, reqs)
			assert.Contains(t, reqs[len(reqs)-1].UserText(), "MARK-live2")
			assert.Contains(t, reqs[len(reqs)-1].UserText(), "MARK-live1", "in the same conversation")
		}},
	{name: "between_results", scenario: outposttest.ScenarioSlow, prompt: "first MARK-btw1",
		sends: []liveSend{{kindIs(adapters.KindTextDelta), "also MARK-btw2"}, {kindIs(adapters.KindResult), "and MARK-btw3"}},
		check: func(t *testing.T, r liveOutcome, srv *outposttest.Server) {
			assert.Equal(t, 0, r.code)
			assert.GreaterOrEqual(t, r.count(adapters.KindResult), 2)
			assert.Contains(t, r.result, "MARK-btw3", "the message sent after the first result was answered")
			assert.Contains(t, r.result, "remembered: MARK-btw1")
		}},
	{name: "folded", scenario: outposttest.ScenarioTool, prompt: "write MARK-fold1", slowShell: true,
		sends: []liveSend{{kindIs(adapters.KindTool), "also MARK-fold2"}},
		check: func(t *testing.T, r liveOutcome, srv *outposttest.Server) {
			assert.Equal(t, 0, r.code)
			assert.Equal(t, 1, r.count(adapters.KindResult), "the message went into the running turn")
			reqs := srv.ModelRequests()
			require.Len(t, reqs, 2)
			assert.Contains(t, allText(reqs[1]), "MARK-fold2", "the model saw the message after the tool result")
		}},
	{name: "schema", scenario: outposttest.ScenarioSlow, prompt: "judge MARK-ty1", answers: []string{`{"n":1}`, `{"n":2}`},
		schema: `{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`,
		sends:  []liveSend{{kindIs(adapters.KindConversation), "again MARK-ty2"}},
		check: func(t *testing.T, r liveOutcome, srv *outposttest.Server) {
			assert.Equal(t, 0, r.code)
			assert.JSONEq(t, `{"n":2}`, r.result, "--json-schema holds for every result of a live turn")
		}},
	{name: "failed", scenario: outposttest.ScenarioOK, prompt: "first MARK-fail1 " + outposttest.Directive(outposttest.ScenarioRateLimit),
		sends: []liveSend{{kindIs(adapters.KindConversation), "also MARK-fail2"}},
		check: func(t *testing.T, r liveOutcome, srv *outposttest.Server) {
			assert.Equal(t, 1, r.code)
			assert.Positive(t, r.count(adapters.KindFailure))
		}},
	{name: "resume_missing", scenario: outposttest.ScenarioOK, prompt: "MARK-missing1", missing: true,
		check: func(t *testing.T, r liveOutcome, srv *outposttest.Server) {
			assert.Equal(t, 1, r.code)
			assert.Equal(t, 1, r.count(adapters.KindFailure))
		}},
}

// TestLiveRealCLI drives the real claude in stream-json input mode through
// LiveSession the way the harness does, for each live case; with -capture
// it records the runs as testdata/live fixtures.
func TestLiveRealCLI(t *testing.T) {
	testenv.Short(t)
	bin := testenv.CLI(t, "claude")
	for i, c := range liveCases {
		t.Run(c.name, func(t *testing.T) {
			if !*capture {
				t.Parallel()
			}
			liveOne(t, bin, i, c)
		})
	}
}

func liveOne(t *testing.T, bin string, n int, c liveCase) {
	opts := []outposttest.Option{outposttest.WithScenario(c.scenario), outposttest.WithChunkDelay(200 * time.Millisecond)}
	if len(c.answers) > 0 {
		opts = append(opts, outposttest.WithAnswers(c.answers...))
	}
	srv, err := outposttest.NewServer(opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close() })
	root := filepath.Join(captureRoot, "live-"+c.name)
	require.NoError(t, os.RemoveAll(root))
	home, work := filepath.Join(root, "home"), filepath.Join(root, "work")
	require.NoError(t, os.MkdirAll(home, 0o700))
	require.NoError(t, os.MkdirAll(work, 0o755))
	t.Cleanup(func() { _ = os.RemoveAll(root) })

	env := outposttest.ClaudeEnv(srv)
	delete(env, "ANTHROPIC_BASE_URL")
	delete(env, "ANTHROPIC_API_KEY")
	env["TZ"] = "UTC"
	if c.slowShell {
		shell := filepath.Join(root, "slowbash")
		require.NoError(t, os.WriteFile(shell, []byte("#!/bin/bash\nsleep 3\nexec /bin/bash \"$@\"\n"), 0o755))
		env["CLAUDE_CODE_SHELL"] = shell
	}
	var ids []string
	next := 0
	a := claude.New(claude.WithBinary(bin), claude.WithPartialMessages(), claude.WithMessageIDs(func() string {
		next++
		id := fmt.Sprintf("%08x-0000-4000-8000-%012x", n+1, next)
		ids = append(ids, id)
		return id
	}))
	zero := 0
	in := adapters.Input{Prompt: c.prompt, Workdir: work, Home: home, MaxRetries: &zero, Env: env,
		Endpoint: &adapters.Endpoint{BaseURL: srv.URL(), APIKey: outposttest.PlaceholderKey}}
	if c.schema != "" {
		in.Schema = json.RawMessage(c.schema)
	}
	if c.missing {
		in.Continue = "00000000-0000-4000-8000-000000000000"
	}
	cmd, s, err := a.LiveRequest(in)
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
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
	written := append([]byte(nil), cmd.Stdin...)
	_, err = stdin.Write(cmd.Stdin)
	require.NoError(t, err)

	var out liveOutcome
	var lines bytes.Buffer
	var script adaptertest.LiveScript
	script.Prompt = c.prompt
	var waiting []string
	fired, count, closed := 0, 0, false
	sc := bufio.NewScanner(stdout)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		line := messagingSocket.ReplaceAll(sc.Bytes(), []byte(`"messaging_socket_path":"/tmp/cc-socks/0.sock"`))
		lines.Write(line)
		lines.WriteByte('\n')
		count++
		for _, ev := range s.Decode(line) {
			adaptertest.CheckEvent(t, ev)
			out.evs = append(out.evs, ev)
			if ev.Kind == adapters.KindResult {
				out.result = ev.Text
			}
			if fired < len(c.sends) && c.sends[fired].when(ev) {
				waiting = append(waiting, c.sends[fired].text)
				fired++
			}
		}
		if closed {
			continue
		}
		for len(waiting) > 0 && s.Ready() {
			b, err := s.EncodeInput(waiting[0])
			require.NoError(t, err)
			_, err = stdin.Write(b)
			require.NoError(t, err)
			written = append(written, b...)
			script.Messages = append(script.Messages, adaptertest.LiveMessage{After: count, Text: waiting[0]})
			waiting = waiting[1:]
		}
		if s.Done() {
			require.NoError(t, stdin.Close())
			closed = true
		}
	}
	_, _ = io.Copy(io.Discard, stdout)
	err = p.Wait()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		out.code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	at := time.Now()
	require.NoError(t, ctx.Err(), "claude did not finish:\n%s\n%s", lines.String(), stderr.String())
	require.True(t, closed, "the session never finished:\n%s", lines.String())
	assert.Empty(t, waiting, "every message was delivered")
	assert.Len(t, script.Messages, len(c.sends), "every trigger fired:\n%s", lines.String())
	assert.Equal(t, 1, out.count(adapters.KindFinished), "one finished event:\n%s", lines.String())
	out.stdout = lines.Bytes()
	c.check(t, out, srv)
	if t.Failed() || !*capture {
		return
	}

	script.IDs = ids
	dir := filepath.Join("testdata", "live", c.name)
	require.NoError(t, os.MkdirAll(dir, 0o755))
	files := map[string][]byte{"stdout.jsonl": lines.Bytes(), "stdin.jsonl": written, "stderr.txt": stderr.Bytes()}
	b, err := json.MarshalIndent(script, "", "  ")
	require.NoError(t, err)
	files["live.json"] = append(b, '\n')
	source := "captured from claude " + claude.Version + " in stream-json input mode (LiveRequest, --include-partial-messages) against outposttest scenario " + string(c.scenario)
	if c.slowShell {
		source += ", each Bash call delayed 3 s (CLAUDE_CODE_SHELL)"
	}
	if c.missing {
		source += " (--resume of an id that does not exist)"
	}
	b, err = json.MarshalIndent(map[string]any{"exit_code": out.code, "time": at.UTC().Format(time.RFC3339),
		"source": source, "cli_version": claude.Version}, "", "  ")
	require.NoError(t, err)
	files["meta.json"] = append(b, '\n')
	for name, data := range files {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), data, 0o644))
	}
}

// TestLiveGolden replays the live-input fixtures (testdata/live) through
// LiveSession and the harness.
func TestLiveGolden(t *testing.T) {
	adaptertest.RunLive(t, filepath.Join("testdata", "live"), func(s adaptertest.LiveScript) adapters.Adapter {
		ids := append([]string(nil), s.IDs...)
		return claude.New(claude.WithMessageIDs(func() string {
			if len(ids) == 0 {
				return "exhausted"
			}
			id := ids[0]
			ids = ids[1:]
			return id
		}))
	})
}
