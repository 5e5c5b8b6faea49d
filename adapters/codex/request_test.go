package codex_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/adapters/codex"
	"github.com/outpost-dev/outpost/outposterr"
)

var quiet = []string{
	"-c", "check_for_update_on_startup=false",
	"-c", `shell_environment_policy.inherit="core"`,
	"-c", "features.plugins=false",
	"-c", "features.remote_plugin=false",
	"-c", "features.plugin_sharing=false",
	"-c", "features.apps=false",
	"-c", "analytics.enabled=false",
	"-c", "feedback.enabled=false",
}

func argv(parts ...[]string) []string {
	var out []string
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func TestRequestStart(t *testing.T) {
	cmd, err := codex.New().Request(adapters.Input{Prompt: "hello -x", Workdir: "/w", Home: "/h"})
	require.NoError(t, err)
	assert.Equal(t, argv([]string{"codex"}, quiet,
		[]string{"exec", "--json", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox", "-"}), cmd.Args)
	assert.Equal(t, map[string]string{"HOME": "/h", "TZ": "UTC"}, cmd.Env)
	assert.Equal(t, "/w", cmd.Dir)
	assert.Equal(t, []byte("hello -x"), cmd.Stdin)
	_, set := cmd.Env["CODEX_HOME"]
	assert.False(t, set, "CODEX_HOME stays unset: codex creates $HOME/.codex")
}

func TestRequestResumeForkEndpoint(t *testing.T) {
	retries := 2
	in := adapters.Input{Prompt: "p", Continue: "01a23609-93dd-7b83-b568-93ed3eb5ee5f", Model: "gpt-5.5", Effort: "high",
		Endpoint:   &adapters.Endpoint{BaseURL: "http://127.0.0.1:8080", APIKey: "sk-secret"},
		MaxRetries: &retries, RequestTimeout: 1500 * time.Microsecond, Env: map[string]string{"TZ": "UTC"}}
	cmd, err := codex.New().Request(in)
	require.NoError(t, err)
	p := "model_providers.outpost."
	cfg := argv(quiet, []string{
		"-c", `model_reasoning_effort="high"`,
		"-c", `model_provider="outpost"`,
		"-c", p + `name="Outpost endpoint"`,
		"-c", p + `base_url="http://127.0.0.1:8080/v1"`,
		"-c", p + `wire_api="responses"`,
		"-c", p + "requires_openai_auth=false",
		"-c", p + `env_key="OUTPOST_CODEX_API_KEY"`,
		"-c", p + "stream_max_retries=2",
		"-c", p + "request_max_retries=2",
		"-c", p + "stream_idle_timeout_ms=2",
	})
	exec := []string{"exec", "--json", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox"}
	assert.Equal(t, argv([]string{"codex"}, cfg, exec,
		[]string{"resume", in.Continue, "-m", "gpt-5.5", "-"}), cmd.Args)
	assert.Equal(t, "sk-secret", cmd.Env["OUTPOST_CODEX_API_KEY"])
	assert.Equal(t, "UTC", cmd.Env["TZ"])
	for _, a := range cmd.Args {
		assert.NotContains(t, a, "sk-secret", "keys never go in argv")
	}

	in.Fork = true
	cmd, err = codex.New().Request(in)
	require.NoError(t, err)
	assert.Equal(t, argv([]string{"codex"}, cfg, exec, []string{"fork", in.Continue, "-m", "gpt-5.5", "-"}), cmd.Args)
	// Every -c pair precedes exec.
	idx := func(s string) int {
		for i, a := range cmd.Args {
			if a == s {
				return i
			}
		}
		return -1
	}
	last := 0
	for i, a := range cmd.Args {
		if a == "-c" {
			last = i
		}
	}
	assert.Less(t, last, idx("exec"))
}

func TestRequestPermissionsAndOptions(t *testing.T) {
	cmd, err := codex.New(codex.WithConfig(`model="x"`), codex.WithArgs("--ephemeral")).
		Request(adapters.Input{Prompt: "p", Permission: "workspace-write"})
	require.NoError(t, err)
	s := strings.Join(cmd.Args, " ")
	assert.Contains(t, s, `-c sandbox_mode="workspace-write" -c approval_policy="never" -c model="x" exec --json --skip-git-repo-check --ephemeral -`)
	assert.NotContains(t, s, "--dangerously-bypass")

	cmd, err = codex.New().Request(adapters.Input{Prompt: "p", Endpoint: &adapters.Endpoint{BaseURL: "https://gw.example.test/openai/v1/"}})
	require.NoError(t, err)
	assert.Contains(t, cmd.Args, `model_providers.outpost.base_url="https://gw.example.test/openai/v1"`)
	assert.NotContains(t, strings.Join(cmd.Args, " "), "env_key", "no key, no env_key")
}

func TestRequestInvalid(t *testing.T) {
	neg := -1
	for name, in := range map[string]adapters.Input{
		"empty prompt":  {Prompt: "  "},
		"permission":    {Prompt: "p", Permission: "yolo"},
		"effort":        {Prompt: "p", Effort: "huge"},
		"fork alone":    {Prompt: "p", Fork: true},
		"id flag":       {Prompt: "p", Continue: "--last"},
		"id path":       {Prompt: "p", Continue: "../x"},
		"model":         {Prompt: "p", Model: "-x"},
		"model quote":   {Prompt: "p", Model: `a"b`},
		"retries":       {Prompt: "p", MaxRetries: &neg},
		"timeout":       {Prompt: "p", RequestTimeout: -time.Second},
		"url":           {Prompt: "p", Endpoint: &adapters.Endpoint{BaseURL: "ftp://x"}},
		"url query":     {Prompt: "p", Endpoint: &adapters.Endpoint{BaseURL: "http://x/?a=b"}},
		"key and token": {Prompt: "p", Endpoint: &adapters.Endpoint{BaseURL: "http://x", APIKey: "a", OAuthToken: "b"}},
		"env name":      {Prompt: "p", Env: map[string]string{"A=B": "c"}},
	} {
		_, err := codex.New().Request(in)
		require.Error(t, err, name)
		assert.True(t, outposterr.Is(err, outposterr.Configuration), "%s: %v", name, err)
	}
}

func TestCapabilities(t *testing.T) {
	a := codex.New()
	assert.Equal(t, "codex", a.Name())
	assert.Equal(t, "codex", a.Binary())
	assert.Equal(t, adapters.Capabilities{Resumable: true, Forkable: true, RequiresFinished: true, StructuredOutput: true, Usage: adapters.UsageEvents},
		a.Capabilities())
	assert.Equal(t, "/opt/codex", codex.New(codex.WithBinary("/opt/codex")).Binary())
}

func TestRequestOutputSchema(t *testing.T) {
	a := codex.New()
	schema := []byte(`{"type":"object"}`)
	in := adapters.Input{Prompt: "p", Schema: schema, Scratch: "/home/u/.outpost-turn-1"}
	cmd, err := a.Request(in)
	require.NoError(t, err)
	assert.Equal(t, []string{"--output-schema", "/home/u/.outpost-turn-1/output-schema.json", "-"}, cmd.Args[len(cmd.Args)-3:])
	assert.Equal(t, []adapters.TurnFile{{Name: codex.OutputSchemaFile, Data: schema}}, a.TurnFiles(in))

	in.Continue = "01a23600-0000-7000-8000-000000000000"
	cmd, err = a.Request(in)
	require.NoError(t, err)
	assert.Contains(t, strings.Join(cmd.Args, " "), "resume 01a23600-0000-7000-8000-000000000000 --output-schema /home/u/.outpost-turn-1/output-schema.json -")

	plain := adapters.Input{Prompt: "p"}
	cmd, err = a.Request(plain)
	require.NoError(t, err)
	assert.NotContains(t, cmd.Args, "--output-schema")
	assert.Empty(t, a.TurnFiles(plain))

	in.Scratch = ""
	_, err = a.Request(in)
	assert.True(t, outposterr.Is(err, outposterr.Configuration), "no scratch directory: %v", err)
	_, _, err = a.LiveRequest(adapters.Input{Prompt: "p", Schema: schema})
	assert.True(t, outposterr.Is(err, outposterr.Configuration), "typed live turn: %v", err)
}
