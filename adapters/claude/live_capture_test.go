package claude_test

import (
	"encoding/json"
	"fmt"
	"os"
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
	sends []adaptertest.LiveSend
	check func(t *testing.T, r adaptertest.LiveRun, srv *outposttest.Server)
}

// sendOn sends text once an event of kind k arrives.
func sendOn(k adapters.Kind, text string) adaptertest.LiveSend {
	return adaptertest.LiveSend{When: func(ev adapters.Event) bool { return ev.Kind == k }, Text: text}
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
		sends: []adaptertest.LiveSend{sendOn(adapters.KindTextDelta, "also MARK-live2")},
		check: func(t *testing.T, r adaptertest.LiveRun, srv *outposttest.Server) {
			assert.Equal(t, 0, r.Code)
			assert.Equal(t, 2, r.Count(adapters.KindResult), "the message ran as a queued turn")
			assert.Equal(t, "outpost ok: MARK-live2. remembered: MARK-live1", r.Last(adapters.KindResult))
			reqs := srv.ModelRequests()
			require.NotEmpty(t, reqs)
			assert.Contains(t, reqs[len(reqs)-1].UserText(), "MARK-live2")
			assert.Contains(t, reqs[len(reqs)-1].UserText(), "MARK-live1", "in the same conversation")
		}},
	{name: "between_results", scenario: outposttest.ScenarioSlow, prompt: "first MARK-btw1",
		sends: []adaptertest.LiveSend{sendOn(adapters.KindTextDelta, "also MARK-btw2"), sendOn(adapters.KindResult, "and MARK-btw3")},
		check: func(t *testing.T, r adaptertest.LiveRun, srv *outposttest.Server) {
			assert.Equal(t, 0, r.Code)
			assert.GreaterOrEqual(t, r.Count(adapters.KindResult), 2)
			assert.Contains(t, r.Last(adapters.KindResult), "MARK-btw3", "the message sent after the first result was answered")
			assert.Contains(t, r.Last(adapters.KindResult), "remembered: MARK-btw1")
		}},
	{name: "folded", scenario: outposttest.ScenarioTool, prompt: "write MARK-fold1", slowShell: true,
		sends: []adaptertest.LiveSend{sendOn(adapters.KindTool, "also MARK-fold2")},
		check: func(t *testing.T, r adaptertest.LiveRun, srv *outposttest.Server) {
			assert.Equal(t, 0, r.Code)
			assert.Equal(t, 1, r.Count(adapters.KindResult), "the message went into the running turn")
			reqs := srv.ModelRequests()
			require.Len(t, reqs, 2)
			assert.Contains(t, allText(reqs[1]), "MARK-fold2", "the model saw the message after the tool result")
		}},
	{name: "schema", scenario: outposttest.ScenarioSlow, prompt: "judge MARK-ty1", answers: []string{`{"n":1}`, `{"n":2}`},
		schema: `{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`,
		sends:  []adaptertest.LiveSend{sendOn(adapters.KindConversation, "again MARK-ty2")},
		check: func(t *testing.T, r adaptertest.LiveRun, srv *outposttest.Server) {
			assert.Equal(t, 0, r.Code)
			assert.JSONEq(t, `{"n":2}`, r.Last(adapters.KindResult), "--json-schema holds for every result of a live turn")
		}},
	{name: "failed", scenario: outposttest.ScenarioOK, prompt: "first MARK-fail1 " + outposttest.Directive(outposttest.ScenarioRateLimit),
		sends: []adaptertest.LiveSend{sendOn(adapters.KindConversation, "also MARK-fail2")},
		check: func(t *testing.T, r adaptertest.LiveRun, srv *outposttest.Server) {
			assert.Equal(t, 1, r.Code)
			assert.Positive(t, r.Count(adapters.KindFailure))
		}},
	{name: "resume_missing", scenario: outposttest.ScenarioOK, prompt: "MARK-missing1", missing: true,
		check: func(t *testing.T, r adaptertest.LiveRun, srv *outposttest.Server) {
			assert.Equal(t, 1, r.Code)
			assert.Equal(t, 1, r.Count(adapters.KindFailure))
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
	stable := func(l []byte) []byte {
		return messagingSocket.ReplaceAll(l, []byte(`"messaging_socket_path":"/tmp/cc-socks/0.sock"`))
	}
	run := adaptertest.DriveLive(t, cmd, s, c.sends, stable, 2*time.Minute)
	assert.Equal(t, 1, run.Count(adapters.KindFinished), "one finished event:\n%s", run.Stdout)
	c.check(t, run, srv)
	if t.Failed() || !*capture {
		return
	}
	source := "captured from claude " + claude.Version + " in stream-json input mode (LiveRequest, --include-partial-messages) against outposttest scenario " + string(c.scenario)
	if c.slowShell {
		source += ", each Bash call delayed 3 s (CLAUDE_CODE_SHELL)"
	}
	if c.missing {
		source += " (--resume of an id that does not exist)"
	}
	adaptertest.WriteLiveCase(t, filepath.Join("testdata", "live", c.name),
		adaptertest.LiveScript{Prompt: c.prompt, IDs: ids}, run, source, claude.Version)
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
