package claude_test

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/adapters/claude"
	"github.com/outpost-dev/outpost/outposterr"
)

var base = []string{"claude", "--print", "--verbose", "--output-format", "stream-json"}

func argv(extra ...string) []string { return append(append([]string(nil), base...), extra...) }

func intp(n int) *int { return &n }

func TestIdentity(t *testing.T) {
	a := claude.New()
	assert.Equal(t, "claude", a.Name())
	assert.Equal(t, "claude", a.Binary())
	assert.Equal(t, adapters.Capabilities{Resumable: true, Forkable: true,
		RequiresFinished: true, StructuredOutput: true, Usage: adapters.UsageEvents}, a.Capabilities())
	assert.Equal(t, "/opt/claude", claude.New(claude.WithBinary("/opt/claude")).Binary())
}

func TestRequestArgv(t *testing.T) {
	const id = "27950ff7-9e32-4d39-8649-e4bc7e8247d2"
	cases := []struct {
		name string
		a    *claude.Adapter
		in   adapters.Input
		want []string
	}{
		{"default is bypass", claude.New(), adapters.Input{Prompt: "hi"},
			argv("--dangerously-skip-permissions")},
		{"permission mode", claude.New(), adapters.Input{Prompt: "hi", Permission: "acceptEdits"},
			argv("--permission-mode", "acceptEdits")},
		{"explicit bypass mode", claude.New(), adapters.Input{Prompt: "hi", Permission: "bypassPermissions"},
			argv("--permission-mode", "bypassPermissions")},
		{"model and effort", claude.New(), adapters.Input{Prompt: "hi", Model: "claude-opus-4-5[1m]", Effort: "xhigh"},
			argv("--dangerously-skip-permissions", "--model", "claude-opus-4-5[1m]", "--effort", "xhigh")},
		{"max turns", claude.New(), adapters.Input{Prompt: "hi", MaxTurns: 7},
			argv("--dangerously-skip-permissions", "--max-turns", "7")},
		{"resume", claude.New(), adapters.Input{Prompt: "hi", Continue: id},
			argv("--dangerously-skip-permissions", "--resume", id)},
		{"fork", claude.New(), adapters.Input{Prompt: "hi", Continue: id, Fork: true, Permission: "plan"},
			argv("--permission-mode", "plan", "--resume", id, "--fork-session")},
		{"partial messages and extra args", claude.New(claude.WithPartialMessages(), claude.WithArgs("--strict-mcp-config")),
			adapters.Input{Prompt: "hi"},
			argv("--dangerously-skip-permissions", "--include-partial-messages", "--strict-mcp-config")},
		{"binary option", claude.New(claude.WithBinary("/opt/bin/claude")), adapters.Input{Prompt: "hi"},
			append([]string{"/opt/bin/claude"}, argv("--dangerously-skip-permissions")[1:]...)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cmd, err := c.a.Request(c.in)
			require.NoError(t, err)
			assert.Equal(t, c.want, cmd.Args)
			assert.Equal(t, []byte("hi"), cmd.Stdin)
			assert.False(t, cmd.KeepStdinOpen, "stdin must be closed after the prompt")
		})
	}
}

func TestRequestEnv(t *testing.T) {
	a := claude.New()
	cmd, err := a.Request(adapters.Input{Prompt: "do it", Workdir: "/work", Home: "/home/agent"})
	require.NoError(t, err)
	assert.Equal(t, "/work", cmd.Dir)
	assert.Equal(t, []byte("do it"), cmd.Stdin)
	assert.Equal(t, map[string]string{
		"DISABLE_AUTOUPDATER":                      "1",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
		"IS_SANDBOX":                               "1",
		"HOME":                                     "/home/agent",
	}, cmd.Env)

	cmd, err = a.Request(adapters.Input{
		Prompt: "x", Permission: "default",
		MaxRetries: intp(2), RequestTimeout: 1500*time.Millisecond + time.Microsecond,
		Endpoint: &adapters.Endpoint{BaseURL: "http://127.0.0.1:8080", APIKey: "sk-test-placeholder"},
		Env:      map[string]string{"CLAUDE_CODE_OAUTH_TOKEN": "tok", "DISABLE_AUTOUPDATER": "0"},
	})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{
		"DISABLE_AUTOUPDATER":                      "0", // Env wins
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
		"CLAUDE_CODE_MAX_RETRIES":                  "2",
		"API_TIMEOUT_MS":                           "1501",
		"ANTHROPIC_BASE_URL":                       "http://127.0.0.1:8080",
		"ANTHROPIC_API_KEY":                        "sk-test-placeholder",
		"CLAUDE_CODE_DISABLE_EXPERIMENTAL_BETAS":   "1",
		"CLAUDE_CODE_OAUTH_TOKEN":                  "tok",
	}, cmd.Env, "no IS_SANDBOX outside bypass mode")

	// Zero retries is a real value (one request, no retry).
	cmd, err = a.Request(adapters.Input{Prompt: "x", MaxRetries: intp(0),
		Endpoint: &adapters.Endpoint{BaseURL: "https://gateway.example/anthropic"}})
	require.NoError(t, err)
	assert.Equal(t, "0", cmd.Env["CLAUDE_CODE_MAX_RETRIES"])
	assert.NotContains(t, cmd.Env, "ANTHROPIC_API_KEY", "no key given, none invented")
	assert.Equal(t, "1", cmd.Env["IS_SANDBOX"])

	cmd, err = a.Request(adapters.Input{Prompt: "x", Permission: "bypassPermissions"})
	require.NoError(t, err)
	assert.Equal(t, "1", cmd.Env["IS_SANDBOX"])
}

func TestRequestSecretsNeverInArgv(t *testing.T) {
	cmd, err := claude.New().Request(adapters.Input{Prompt: "x",
		Endpoint: &adapters.Endpoint{BaseURL: "http://127.0.0.1:1", APIKey: "sk-secret-value"},
		Env:      map[string]string{"ANTHROPIC_AUTH_TOKEN": "secret-token"}})
	require.NoError(t, err)
	for _, arg := range cmd.Args {
		assert.NotContains(t, arg, "secret")
	}
	assert.NotContains(t, cmd.Redacted(), "secret")
}

func TestRequestErrors(t *testing.T) {
	cases := []struct {
		name string
		in   adapters.Input
	}{
		{"empty prompt", adapters.Input{}},
		{"blank prompt", adapters.Input{Prompt: " \n\t"}},
		{"unknown permission", adapters.Input{Prompt: "x", Permission: "yolo"}},
		{"permission case", adapters.Input{Prompt: "x", Permission: "acceptedits"}},
		{"unknown effort", adapters.Input{Prompt: "x", Effort: "extreme"}},
		{"fork without continue", adapters.Input{Prompt: "x", Fork: true}},
		{"id is a flag", adapters.Input{Prompt: "x", Continue: "--dangerously-skip-permissions"}},
		{"id with space", adapters.Input{Prompt: "x", Continue: "abc def"}},
		{"id with slash", adapters.Input{Prompt: "x", Continue: "../etc/passwd"}},
		{"id with equals", adapters.Input{Prompt: "x", Continue: "a=b"}},
		{"id too long", adapters.Input{Prompt: "x", Continue: string(make([]byte, 200))}},
		{"model is a flag", adapters.Input{Prompt: "x", Model: "--help"}},
		{"model with space", adapters.Input{Prompt: "x", Model: "opus --verbose"}},
		{"negative retries", adapters.Input{Prompt: "x", MaxRetries: intp(-1)}},
		{"negative timeout", adapters.Input{Prompt: "x", RequestTimeout: -time.Second}},
		{"bad endpoint", adapters.Input{Prompt: "x", Endpoint: &adapters.Endpoint{BaseURL: "127.0.0.1:8080"}}},
		{"endpoint scheme", adapters.Input{Prompt: "x", Endpoint: &adapters.Endpoint{BaseURL: "file:///etc"}}},
		{"endpoint key and token", adapters.Input{Prompt: "x", Endpoint: &adapters.Endpoint{BaseURL: "http://h", APIKey: "k", OAuthToken: "t"}}},
		{"bad env name", adapters.Input{Prompt: "x", Env: map[string]string{"A-B": "1"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := claude.New().Request(c.in)
			require.Error(t, err)
			assert.Equal(t, outposterr.Configuration, outposterr.ClassOf(err), "%v", err)
			assert.Equal(t, "claude", outposterr.DetailsOf(err).Agent)
		})
	}
}

func TestValidID(t *testing.T) {
	assert.True(t, adapters.ValidID("27950ff7-9e32-4d39-8649-e4bc7e8247d2"))
	assert.True(t, adapters.ValidID("abc_DEF-123"))
	for _, id := range []string{"", "-x", "a b", "a/b", "a.b", "a\x00", "ü", "a\nb"} {
		assert.False(t, adapters.ValidID(id), "%q", id)
	}
}

func TestRequestIsPure(t *testing.T) {
	a := claude.New(claude.WithArgs("--x"))
	in := adapters.Input{Prompt: "p", Env: map[string]string{"A": "1"}}
	c1, err := a.Request(in)
	require.NoError(t, err)
	c1.Args[0] = "mutated"
	c1.Env["A"] = "2"
	c2, err := a.Request(in)
	require.NoError(t, err)
	assert.Equal(t, "claude", c2.Args[0])
	assert.Equal(t, "1", c2.Env["A"])
	assert.Equal(t, "1", in.Env["A"])
}

func TestRequestJSONSchema(t *testing.T) {
	schema := `{"type":"object","required":["verdict"]}`
	cmd, err := claude.New().Request(adapters.Input{Prompt: "p", Schema: []byte(schema), Continue: "abc"})
	require.NoError(t, err)
	i := slices.Index(cmd.Args, "--json-schema")
	require.GreaterOrEqual(t, i, 0, "%q", cmd.Args)
	assert.Equal(t, schema, cmd.Args[i+1])
	assert.Contains(t, cmd.Args, "--resume", "a repair turn resumes with the schema too")

	cmd, err = claude.New().Request(adapters.Input{Prompt: "p"})
	require.NoError(t, err)
	assert.NotContains(t, cmd.Args, "--json-schema")

	_, err = claude.New().Request(adapters.Input{Prompt: "p", Schema: []byte(`{"type":`)})
	assert.Error(t, err)
}
