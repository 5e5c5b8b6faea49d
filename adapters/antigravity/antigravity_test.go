package antigravity

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/adapters/adaptertest"
	"github.com/outpost-dev/outpost/credentials"
	"github.com/outpost-dev/outpost/outposterr"
)

func TestGolden(t *testing.T) { adaptertest.Run(t, New(), "testdata") }

func FuzzDecode(f *testing.F) {
	adaptertest.FuzzDecode(f, func() adapters.Adapter { return New() }, "testdata")
}

func TestRequest(t *testing.T) {
	cmd, err := New().Request(adapters.Input{Prompt: "hi \"there\"", Model: "gemini-3-pro", Continue: "abc-1", Workdir: "/workspace"})
	require.NoError(t, err)
	assert.Equal(t, []string{"agy", "--input-format", "stream-json", "--output-format", "stream-json",
		"--dangerously-skip-permissions", "--model", "gemini-3-pro", "--conversation", "abc-1"}, cmd.Args)
	assert.JSONEq(t, `{"event":"user","message":{"content":"hi \"there\""}}`, string(cmd.Stdin))
	assert.Equal(t, "true", cmd.Env["AGY_CLI_DISABLE_AUTO_UPDATE"])

	cmd, err = New().Request(adapters.Input{Prompt: "p", Permission: "plan"})
	require.NoError(t, err)
	assert.Contains(t, cmd.Args, "plan")
	assert.NotContains(t, cmd.Args, "--dangerously-skip-permissions")

	for _, in := range []adapters.Input{
		{Prompt: ""}, {Prompt: "p", Fork: true, Continue: "a"}, {Prompt: "p", Continue: "--evil"},
		{Prompt: "p", Endpoint: &adapters.Endpoint{BaseURL: "http://127.0.0.1:1"}}, {Prompt: "p", Permission: "yolo"},
		{Prompt: "p", Model: "--x"}, {Prompt: "p", Effort: "high"},
	} {
		_, err := New().Request(in)
		assert.Equal(t, outposterr.Configuration, outposterr.ClassOf(err), "%+v", in)
	}
}

func TestRecognizers(t *testing.T) {
	a := New()
	at := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	ok, r := a.Quota("API error (attempt 3): RESOURCE_EXHAUSTED (code 429): Individual quota reached. Please upgrade your subscription to increase your limits. Resets in 2h39m52s.", at)
	assert.True(t, ok)
	assert.Equal(t, at.Add(2*time.Hour+39*time.Minute+52*time.Second), r)
	ok, r = a.Quota("Attempt 1 failed: You have exhausted your capacity on this model. Your quota will reset after 5s.. Retrying after 6173ms...", at)
	assert.True(t, ok)
	assert.Equal(t, at.Add(5*time.Second), r)
	ok, _ = a.Quota(`{"error":{"code":429,"message":"Resource has been exhausted (e.g. check quota).","status":"RESOURCE_EXHAUSTED"}}`, at)
	assert.True(t, ok)
	ok, _ = a.Quota("model is overloaded", at)
	assert.False(t, ok)

	reason, ok := a.Unavailable("UNAVAILABLE (code 503): The model is overloaded.")
	assert.True(t, ok)
	assert.Equal(t, "overloaded", reason)
	_, ok = a.Unavailable("No capacity available for model gemini-3-flash-preview on the server")
	assert.True(t, ok)
	_, ok = a.Unavailable("all good")
	assert.False(t, ok)

	reason, ok = a.Auth("Error: authentication timed out")
	assert.True(t, ok)
	assert.Contains(t, reason, "timed out")
	_, ok = a.Auth("fine")
	assert.False(t, ok)
}

func TestCredentials(t *testing.T) {
	a := New()
	p, err := a.Credentials(credentials.Auth{Form: credentials.Account}, nil)
	require.NoError(t, err)
	require.Len(t, p.Files, 1)
	assert.Equal(t, TokenFile, p.Files[0].Dest)

	p, err = a.Credentials(credentials.Auth{Form: credentials.Usage}, map[string]string{APIKeyVar: "k"})
	require.NoError(t, err)
	assert.Equal(t, "k", p.Env[APIKeyVar])
	require.Len(t, p.Generated, 1)
	assert.JSONEq(t, `{"modelProvider":"gemini"}`, string(p.Generated[0].Content))

	_, err = a.Credentials(credentials.Auth{Form: credentials.Usage}, nil)
	assert.Contains(t, err.Error(), "missing GEMINI_API_KEY")
	_, err = a.Credentials(credentials.Auth{Form: credentials.Account}, map[string]string{APIKeyVar: "k"})
	assert.Error(t, err)
	_, err = a.Credentials(credentials.Auth{Form: credentials.Account, Source: credentials.SourceVariable}, nil)
	assert.Contains(t, err.Error(), "does not support account:variable")
}

func TestMCPConfiguration(t *testing.T) {
	a := New()
	in := adapters.Input{Prompt: "p", MCP: []credentials.MCPServer{
		{Name: "fs", Command: "srv", Args: []string{"-r"}, Env: map[string]string{"T": "${T}"}, ExcludeTools: []string{"rm"}},
		{Name: "docs", URL: "https://d/mcp", BearerTokenVar: "DOCS"},
	}}
	plan, err := a.Configuration(in)
	require.NoError(t, err)
	require.Len(t, plan.Files, 1)
	f := plan.Files[0]
	assert.Equal(t, MCPConfigFile, f.Dest)
	assert.Equal(t, []string{"mcpServers"}, f.Section)
	merged, err := credentials.MergeJSON([]byte(`{"mcpServers":{"keep":{"command":"x"}}}`), f.Section, f.Entries)
	require.NoError(t, err)
	assert.JSONEq(t, `{"mcpServers":{"keep":{"command":"x"},
		"fs":{"command":"srv","args":["-r"],"env":{"T":"${T}"},"disabledTools":["rm"],"disabled":false},
		"docs":{"serverUrl":"https://d/mcp","headers":{"Authorization":"Bearer ${DOCS}"},"disabled":false}}}`, string(merged))
	_, err = a.Request(in)
	require.NoError(t, err, "the request itself carries nothing: the file does")

	for _, s := range []credentials.MCPServer{{Name: "x", Command: "c", Required: true}, {Name: "x", Command: "c", IncludeTools: []string{"a"}}} {
		_, err := a.Request(adapters.Input{Prompt: "p", MCP: []credentials.MCPServer{s}})
		assert.Equal(t, outposterr.Configuration, outposterr.ClassOf(err))
	}
}
