package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost"
	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/agents"
	"github.com/outpost-dev/outpost/internal/fakecli"
	"github.com/outpost-dev/outpost/internal/testenv"
)

func TestMain(m *testing.M) {
	if fakecli.IsChild() {
		fakecli.Main()
	}
	// The test binary is also the outpost command of the testscript suite,
	// with the fake agent registered.
	testscript.Main(cleanupM{m}, map[string]func(){"outpost": func() {
		f := NewFactory()
		f.Agents = testAgents
		os.Exit(MainWith(f, os.Args[1:]))
	}})
}

// testAgents is the built-in registry plus the fake agent CLI compiled into
// this test binary, registered through one row like any agent.
func testAgents() *agents.Registry {
	exe, err := os.Executable()
	if err != nil {
		panic(err)
	}
	r := agents.Builtin()
	if err := r.Register(agents.Agent{Name: "fake", New: func() adapters.Adapter { return fakecli.New(exe) },
		Fixtures: fakecli.Fixtures}); err != nil {
		panic(err)
	}
	// An agent with conversation storage, for the archive tests.
	if err := r.Register(agents.Agent{Name: "fake-store", New: func() adapters.Adapter { return fakecli.NewStorage(exe) },
		Fixtures: fakecli.StorageFixtures}); err != nil {
		panic(err)
	}
	return r
}

// testFactory is a factory for in-process command runs.
func testFactory(stdin io.Reader, out, errOut io.Writer, getenv func(string) string, now func() time.Time) *Factory {
	return &Factory{IO: IOStreams{In: stdin, Out: out, ErrOut: errOut}, Getenv: getenv, Now: now,
		Agents: testAgents, Sandboxes: outpost.SandboxKinds()}

}

// cleanupM removes the test state directory after the tests.
type cleanupM struct{ m *testing.M }

func (c cleanupM) Run() int {
	code := c.m.Run()
	if testState.dir != "" {
		_ = os.RemoveAll(testState.dir)
	}
	return code
}

// testState is the state directory of commands run by execute: default
// conversation stores land there, never in the user's.
var testState struct {
	once sync.Once
	dir  string
}

func testStateDir() string {
	testState.once.Do(func() {
		dir, err := os.MkdirTemp("", "outpost-state-")
		if err != nil {
			panic(err)
		}
		testState.dir = dir
	})
	return testState.dir
}

type runOut struct {
	code           int
	stdout, stderr string
}

// execute runs the command tree with args and an environment.
func execute(t *testing.T, stdin string, env map[string]string, args ...string) runOut {
	t.Helper()
	var out, errOut bytes.Buffer
	f := testFactory(strings.NewReader(stdin), &out, &errOut, func(k string) string {
		if v, ok := env[k]; ok || k != stateEnv {
			return v
		}
		return testStateDir()
	}, func() time.Time { return time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC) })
	code := Execute(context.Background(), f, args)
	return runOut{code, out.String(), errOut.String()}
}

func TestFlagErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no agent", []string{"run", "hi"}, "--agent is required"},
		{"no prompt", []string{"run", "--agent", "claude"}, "accepts 1 arg"},
		{"bad sandbox", []string{"run", "--agent", "claude", "--sandbox", "vm", "hi"}, "--sandbox must be one of docker, host, kubernetes, podman"},
		{"fork without resume", []string{"run", "--agent", "claude", "--fork", "hi"}, "--fork needs --resume"},
		{"unknown flag", []string{"run", "--agent", "claude", "--bogus", "hi"}, "unknown flag"},
		{"bad duration", []string{"run", "--agent", "claude", "--timeout", "soon", "hi"}, "invalid argument"},
		{"replay without stdout", []string{"replay", "--agent", "claude"}, "--stdout are required"},
		{"bad scenario", []string{"stub-model", "--scenario", "nope"}, "nope"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := execute(t, "", nil, tc.args...)
			assert.Equal(t, int(ExitConfiguration), r.code)
			assert.Contains(t, r.stderr, tc.want)
		})
	}
}

func TestRunConfigurationErrors(t *testing.T) {
	ws := t.TempDir()
	r := execute(t, "", nil, "run", "--agent", "nope", "--sandbox", "host", "--workspace", ws, "hi")
	assert.Equal(t, int(ExitConfiguration), r.code)
	assert.Contains(t, r.stderr, `unknown agent "nope"`)

	r = execute(t, "   ", nil, "run", "--agent", "fake", "--auth", "none", "--sandbox", "host", "--workspace", ws, "-")
	assert.Equal(t, int(ExitConfiguration), r.code)
	assert.Contains(t, r.stderr, "empty prompt")

	r = execute(t, "", nil, "run", "--agent", "fake", "--auth", "none", "--sandbox", "host", "--workspace", filepath.Join(ws, "missing"), "x")
	assert.Equal(t, int(ExitConfiguration), r.code)
	assert.Contains(t, r.stderr, "not a directory")

	// A value on the command line is refused, and not echoed.
	r = execute(t, "", nil, "run", "--agent", "fake", "--auth", "none", "--sandbox", "host", "--workspace", ws, "--env", "TOKEN=s3cr3t-value", "x")
	assert.Equal(t, int(ExitConfiguration), r.code)
	assert.NotContains(t, r.stderr+r.stdout, "s3cr3t-value")

	r = execute(t, "", nil, "run", "--agent", "fake", "--auth", "none", "--sandbox", "host", "--workspace", ws, "--env", "UNSET_VAR", "x")
	assert.Equal(t, int(ExitConfiguration), r.code)
	assert.Contains(t, r.stderr, "UNSET_VAR")
}

func TestRunFakeAgentJSON(t *testing.T) {
	ws := t.TempDir()
	secret := "outpost-marker-secret-7f3a"
	script := `emit {"type":"conversation","id":"conv-1"}
emit {"type":"text","text":"hello"}
emit {"type":"result","text":"hello"}
emit {"type":"finished","ok":true}`
	env := map[string]string{"PATH": os.Getenv("PATH"), "MY_TOKEN": secret}
	r := execute(t, script, env, "run", "--agent", "fake", "--auth", "none", "--sandbox", "host", "--workspace", ws, "--json", "--env", "MY_TOKEN", "-")
	require.Equal(t, 0, r.code, r.stderr)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	require.GreaterOrEqual(t, len(lines), 5)
	var o map[string]any
	require.NoError(t, json.Unmarshal([]byte(lines[len(lines)-1]), &o))
	assert.Equal(t, "outcome", o["type"])
	assert.Equal(t, true, o["ok"])
	assert.Equal(t, "conv-1", o["conversation"])
	assert.Equal(t, "hello", o["text"])
	for _, l := range lines[:len(lines)-1] {
		var ev map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &ev), l)
		assert.NotEmpty(t, ev["kind"])
	}
	assert.NotContains(t, r.stdout+r.stderr, secret)
}

func TestRunFakeAgentFailureExitCodes(t *testing.T) {
	ws := t.TempDir()
	env := map[string]string{"PATH": os.Getenv("PATH")}
	tests := []struct {
		script string
		code   int
		want   string
	}{
		{"emit {\"type\":\"failure\",\"text\":\"quota reset=2026-12-02T15:00:00Z\"}\nexit 1", int(ExitQuota), "resets 2026-12-02T15:00:00Z"},
		{"emit {\"type\":\"failure\",\"text\":\"overloaded\"}\nexit 1", int(ExitUnavailable), "unavailable: overloaded"},
		{"emit {\"type\":\"failure\",\"text\":\"unauthorized\"}\nexit 1", int(ExitAuth), "auth: unauthorized"},
		{"stderr crashed\nexit 2", int(ExitProcess), "crashed"},
		{"emit {\"type\":\"text\",\"text\":\"no final\"}", int(ExitProcess), "without its final event"},
	}
	for _, tc := range tests {
		r := execute(t, tc.script, env, "run", "--agent", "fake", "--auth", "none", "--sandbox", "host", "--workspace", ws, "-")
		assert.Equal(t, tc.code, r.code, "%s\n%s", tc.script, r.stdout)
		assert.Contains(t, r.stdout, tc.want)
	}
	r := execute(t, "sleep 30s", env, "run", "--agent", "fake", "--auth", "none", "--sandbox", "host", "--workspace", ws, "--timeout", "300ms", "-")
	assert.Equal(t, int(ExitTimeout), r.code)
}

func TestRunDockerUnreachable(t *testing.T) {
	ws := t.TempDir()
	env := map[string]string{"DOCKER_HOST": "unix://" + filepath.Join(ws, "no.sock")}
	r := execute(t, "", env, "run", "--agent", "fake", "--auth", "none", "--workspace", ws, "x")
	assert.Equal(t, int(ExitSandbox), r.code)
	assert.Contains(t, r.stderr, "--sandbox host")
}

func TestReplayFixtures(t *testing.T) {
	dir := filepath.Join("..", "..", "adapters", "claude", "testdata")
	tests := []struct {
		fixture, class string
		code           int
	}{
		{"ok", "", 0},
		{"quota", "quota", int(ExitQuota)},
		{"overloaded", "process", int(ExitUnavailable)},
		{"unauthorized", "process", int(ExitAuth)},
		{"resume_missing", "session", int(ExitSession)},
	}
	for _, tc := range tests {
		t.Run(tc.fixture, func(t *testing.T) {
			var meta struct {
				ExitCode int    `json:"exit_code"`
				Time     string `json:"time"`
			}
			b, err := os.ReadFile(filepath.Join(dir, tc.fixture, "meta.json"))
			require.NoError(t, err)
			require.NoError(t, json.Unmarshal(b, &meta))
			r := execute(t, "", nil, "replay", "--agent", "claude",
				"--stdout", filepath.Join(dir, tc.fixture, "stdout.jsonl"),
				"--stderr", filepath.Join(dir, tc.fixture, "stderr.txt"),
				"--exit-code", strconv.Itoa(meta.ExitCode), "--time", meta.Time)
			assert.Equal(t, tc.code, r.code, r.stderr)
			lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
			var o map[string]any
			require.NoError(t, json.Unmarshal([]byte(lines[len(lines)-1]), &o))
			assert.Equal(t, "outcome", o["type"])
			assert.Equal(t, tc.class, o["class"])
			for _, k := range []string{"ok", "class", "unavailable", "reset_at", "conversation", "text", "usage"} {
				assert.Contains(t, o, k)
			}
			u := o["usage"].(map[string]any)
			for _, k := range []string{"input", "cached", "cache_created", "output", "cost_usd", "complete"} {
				assert.Contains(t, u, k)
			}
		})
	}
	r := execute(t, "", nil, "replay", "--agent", "claude", "--stdout", "/nonexistent/file")
	assert.Equal(t, int(ExitConfiguration), r.code)
}

func TestRunOfflineRealClaude(t *testing.T) {
	testenv.Short(t)
	bin := testenv.CLI(t, "claude")
	ws := t.TempDir()
	env := map[string]string{"PATH": filepath.Dir(bin) + ":/usr/bin:/bin"}
	r := execute(t, "", env, "run", "--agent", "claude", "--sandbox", "host", "--offline", "--no-store", "--workspace", ws, "--json", "say MARK-cli1")
	require.Equal(t, 0, r.code, r.stdout+r.stderr)
	assert.Contains(t, r.stdout, "MARK-cli1")

	// Offline, what a cost says is what the scripted traffic would cost.
	r = execute(t, "", env, "run", "--agent", "claude", "--sandbox", "host", "--offline", "--no-store", "--workspace", ws, "say MARK-cli3")
	require.Equal(t, 0, r.code, r.stdout+r.stderr)
	assert.Contains(t, r.stdout, "(list-price estimate of scripted traffic)")

	r = execute(t, "", env, "run", "--agent", "claude", "--sandbox", "host", "--offline", "--no-store", "--scenario", "quota", "--workspace", ws, "MARK-cli2")
	assert.Equal(t, int(ExitQuota), r.code, r.stdout+r.stderr)
	assert.Contains(t, r.stdout, "resets ")
}

func TestAuthRequiredAndDotEnv(t *testing.T) {
	ws := t.TempDir()
	r := execute(t, "", nil, "run", "--agent", "claude", "--sandbox", "host", "--workspace", ws, "hi")
	assert.Equal(t, int(ExitConfiguration), r.code)
	assert.Contains(t, r.stderr, "--auth is required")

	r = execute(t, "", nil, "run", "--agent", "claude", "--auth", "keychain", "--sandbox", "host", "--workspace", ws, "hi")
	assert.Equal(t, int(ExitConfiguration), r.code)

	// Claude account authentication with an API key around is refused before any sandbox exists.
	r = execute(t, "", map[string]string{"ANTHROPIC_API_KEY": "k-secret-1"}, "run", "--agent", "claude", "--auth", "account",
		"--env", "ANTHROPIC_API_KEY", "--sandbox", "host", "--workspace", ws, "hi")
	assert.Equal(t, int(ExitConfiguration), r.code)
	assert.Contains(t, r.stdout+r.stderr, "takes precedence")
	assert.NotContains(t, r.stdout+r.stderr, "k-secret-1")

	project := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(project, ".outpost"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(project, ".outpost", ".env"),
		[]byte("DECLARED=from-file\nINHERITED=\n# comment\n"), 0o600))
	t.Chdir(project)
	env := map[string]string{"PATH": os.Getenv("PATH"), "INHERITED": "from-process", "UNDECLARED": "never"}
	script := "env DECLARED\nenv INHERITED\nenv UNDECLARED\nemit {\"type\":\"finished\",\"ok\":true}"
	r = execute(t, script, env, "run", "--agent", "fake", "--auth", "none", "--sandbox", "host", "--workspace", ws, "-")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "DECLARED=from-file")
	assert.Contains(t, r.stdout, "INHERITED=from-process")
	assert.Contains(t, r.stdout, "UNDECLARED unset")

	env["DECLARED"] = "also-in-process"
	r = execute(t, script, env, "run", "--agent", "fake", "--auth", "none", "--sandbox", "host", "--workspace", ws, "-")
	assert.Equal(t, int(ExitConfiguration), r.code)
	assert.Contains(t, r.stderr, "DECLARED set both")
}

func TestRunMCPFile(t *testing.T) {
	ws := t.TempDir()
	bad := filepath.Join(ws, "bad.json")
	require.NoError(t, os.WriteFile(bad, []byte(`{"servers":[{"name":"x","cmd":"typo"}]}`), 0o600))
	r := execute(t, "", nil, "run", "--agent", "claude", "--auth", "none", "--sandbox", "host", "--workspace", ws, "--mcp", bad, "x")
	assert.Equal(t, int(ExitConfiguration), r.code)
	assert.Contains(t, r.stderr, "unknown field")

	missing := filepath.Join(ws, "ok.json")
	require.NoError(t, os.WriteFile(missing, []byte(`{"servers":[{"name":"docs","url":"http://127.0.0.1:9/mcp","bearer_token_var":"DOCS_TOKEN"}]}`), 0o600))
	r = execute(t, "", map[string]string{"PATH": "/usr/bin"}, "run", "--agent", "claude", "--auth", "none", "--sandbox", "host", "--workspace", ws, "--mcp", missing, "x")
	assert.Equal(t, int(ExitConfiguration), r.code)
	assert.Contains(t, r.stdout+r.stderr, "missing DOCS_TOKEN for claude MCP server docs")
}

func TestConversationCommands(t *testing.T) {
	testenv.Short(t)
	bin := testenv.CLI(t, "claude")
	ws := t.TempDir()
	store := filepath.Join(t.TempDir(), "conv")
	env := map[string]string{"PATH": filepath.Dir(bin) + ":/usr/bin:/bin"}
	base := []string{"--sandbox", "host", "--offline", "--workspace", ws, "--store", store, "--json"}
	outcome := func(r runOut) map[string]any {
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
		var o map[string]any
		require.NoError(t, json.Unmarshal([]byte(lines[len(lines)-1]), &o), r.stdout)
		return o
	}
	r := execute(t, "", env, append([]string{"run", "--agent", "claude"}, append(base, "first MARK-c1")...)...)
	require.Equal(t, 0, r.code, r.stdout+r.stderr)
	id := outcome(r)["conversation"].(string)

	r = execute(t, "", env, "conversations", "list", "--store", store)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, id)

	r = execute(t, "", env, append([]string{"resume", id}, append(base, "second MARK-c2")...)...)
	require.Equal(t, 0, r.code, r.stdout+r.stderr)
	assert.Contains(t, outcome(r)["text"], "remembered: MARK-c1")

	r = execute(t, "", env, append([]string{"fork", id}, append(base, "branch MARK-c3")...)...)
	require.Equal(t, 0, r.code, r.stdout+r.stderr)
	forkID := outcome(r)["conversation"].(string)
	assert.NotEqual(t, id, forkID)
	r = execute(t, "", env, "conversations", "show", forkID, "--store", store)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, `"parent": "`+id+`"`)

	export := filepath.Join(t.TempDir(), "conv.export")
	r = execute(t, "", env, "conversations", "export", id, "--store", store, "-o", export)
	require.Equal(t, 0, r.code, r.stderr)
	r = execute(t, "", env, "conversations", "rm", id, "--store", store)
	require.Equal(t, 0, r.code, r.stderr)
	r = execute(t, "", env, "conversations", "show", id, "--store", store)
	assert.Equal(t, int(ExitSession), r.code)
	r = execute(t, "", env, "conversations", "import", export, "--store", store)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, id, strings.TrimSpace(r.stdout))

	r = execute(t, "", env, "conversations", "show", "../etc", "--store", store)
	assert.Equal(t, int(ExitConfiguration), r.code)
	r = execute(t, "", env, append([]string{"resume", "no-such-conversation"}, base[:len(base)-1]...)...)
	assert.Equal(t, int(ExitConfiguration), r.code, "resume takes ID and PROMPT")

	// A tampered archive is refused with a session error; nothing runs.
	archive := filepath.Join(store, id+".tar.zst")
	b, err := os.ReadFile(archive)
	require.NoError(t, err)
	b[len(b)/2] ^= 0x1
	require.NoError(t, os.WriteFile(archive, b, 0o600))
	r = execute(t, "", env, append([]string{"resume", id}, append(base, "again")...)...)
	assert.Equal(t, int(ExitSession), r.code, r.stdout)
	assert.Contains(t, r.stdout, "digest mismatch")

	// Encrypted at rest with a key from the environment.
	env[keyEnv] = strings.Repeat("ab", 32)
	r = execute(t, "", env, append([]string{"run", "--agent", "claude"}, append(base, "sealed MARK-c4")...)...)
	require.Equal(t, 0, r.code, r.stdout+r.stderr)
	sealed := outcome(r)["conversation"].(string)
	raw, err := os.ReadFile(filepath.Join(store, sealed+".tar.zst"))
	require.NoError(t, err)
	assert.NotContains(t, string(raw), "MARK-c4")
	env[keyEnv] = strings.Repeat("cd", 32)
	r = execute(t, "", env, append([]string{"resume", sealed}, append(base, "wrong key")...)...)
	assert.Equal(t, int(ExitSession), r.code)
	env[keyEnv] = "short"
	r = execute(t, "", env, "conversations", "list", "--store", store)
	assert.Equal(t, int(ExitConfiguration), r.code)
}

func TestReplayAntigravityQuotaExitsZero(t *testing.T) {
	dir := filepath.Join("..", "..", "adapters", "antigravity", "testdata", "quota")
	r := execute(t, "", nil, "replay", "--agent", "antigravity", "--stdout", filepath.Join(dir, "stdout.jsonl"),
		"--stderr", filepath.Join(dir, "stderr.txt"), "--exit-code", "0", "--time", "2026-12-02T10:00:00Z")
	assert.Equal(t, int(ExitQuota), r.code, "agy exits 0 on quota; the result event decides")
	assert.Contains(t, r.stdout, `"reset_at":"2026-12-02T12:39:52Z"`)
}

// TestEveryCommandBuilds builds the tree and asks each command for help:
// a flag registered twice panics here, not in a user's terminal.
func TestEveryCommandBuilds(t *testing.T) {
	root := NewRootCmd(testFactory(strings.NewReader(""), &bytes.Buffer{}, &bytes.Buffer{}, func(string) string { return "" }, time.Now))
	var walk func(c *cobra.Command)
	n := 0
	walk = func(c *cobra.Command) {
		n++
		r := execute(t, "", nil, append(strings.Fields(c.CommandPath())[1:], "--help")...)
		assert.Equal(t, 0, r.code, "%s --help: %s", c.CommandPath(), r.stderr)
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	assert.Greater(t, n, 10)
}

func TestInit(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, ".gitignore"), []byte("node_modules/"), 0o644))
	r := execute(t, "", nil, "init", "--dir", dir, "--agent", "claude,codex")
	require.Equal(t, 0, r.code, r.stderr)
	env, err := os.ReadFile(filepath.Join(dir, ".outpost", ".env.example"))
	require.NoError(t, err)
	for _, want := range []string{"# claude", "# ANTHROPIC_API_KEY=", "# CLAUDE_CODE_OAUTH_TOKEN=", "# codex", "# OPENAI_API_KEY="} {
		assert.Contains(t, string(env), want)
	}
	assert.NotContains(t, string(env), "GEMINI_API_KEY", "only the chosen agents")
	gi, _ := os.ReadFile(filepath.Join(dir, ".gitignore"))
	assert.Equal(t, "node_modules/\n.outpost/.env\n.outpost/conversations/\n", string(gi))

	// The recipe it writes is the repository's own.
	for _, name := range []string{"Dockerfile", ".dockerignore"} {
		got, err := os.ReadFile(filepath.Join(dir, ".outpost", name))
		require.NoError(t, err)
		repo, err := os.ReadFile(filepath.Join("..", "..", ".outpost", name))
		require.NoError(t, err)
		assert.Equal(t, string(repo), string(got), name)
	}

	// A second run keeps everything.
	require.NoError(t, os.WriteFile(filepath.Join(dir, ".outpost", "Dockerfile"), []byte("FROM mine"), 0o644))
	r = execute(t, "", nil, "init", "--dir", dir)
	require.Equal(t, 0, r.code)
	assert.Contains(t, r.stdout, "kept")
	b, _ := os.ReadFile(filepath.Join(dir, ".outpost", "Dockerfile"))
	assert.Equal(t, "FROM mine", string(b))
	gi, _ = os.ReadFile(filepath.Join(dir, ".gitignore"))
	assert.Equal(t, 1, strings.Count(string(gi), ".outpost/.env"))
}
