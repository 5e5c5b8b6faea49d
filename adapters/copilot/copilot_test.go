package copilot_test

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/adapters/adaptertest"
	"github.com/outpost-dev/outpost/adapters/copilot"
	"github.com/outpost-dev/outpost/credentials"
	"github.com/outpost-dev/outpost/outposterr"
)

func TestRequestStart(t *testing.T) {
	cmd, err := copilot.New().Request(adapters.Input{Prompt: "hi", Workdir: "/w", Home: "/h",
		Endpoint: &adapters.Endpoint{BaseURL: "http://127.0.0.1:9", APIKey: "sk-x"},
		Env:      map[string]string{"GH_TOKEN": "a", "GITHUB_TOKEN": "b", "FOO": "1"}, RequestTimeout: 1500 * time.Millisecond})
	require.NoError(t, err)
	assert.Equal(t, []string{"copilot", "--output-format", "json", "--allow-all", "--no-ask-user", "--no-auto-update"}, cmd.Args)
	assert.Equal(t, []byte("hi"), cmd.Stdin)
	assert.Equal(t, "/w", cmd.Dir)
	assert.Equal(t, map[string]string{
		"HOME": "/h", "COPILOT_AUTO_UPDATE": "false", "XDG_CACHE_HOME": "/tmp/.cache",
		"COPILOT_OFFLINE": "true", "COPILOT_PROVIDER_TYPE": "openai",
		"COPILOT_PROVIDER_BASE_URL": "http://127.0.0.1:9/v1", "COPILOT_PROVIDER_API_KEY": "sk-x",
		"COPILOT_MODEL": copilot.DefaultModel, "COPILOT_NATIVE_HTTP_TIMEOUT_MS": "1500", "FOO": "1",
	}, cmd.Env)
	for _, a := range cmd.Args {
		assert.NotContains(t, a, "sk-x", "secret in argv")
	}
}

func TestRequestResumeModelEffort(t *testing.T) {
	cmd, err := copilot.New(copilot.WithBinary("/opt/copilot")).Request(adapters.Input{Prompt: "hi", Model: "gpt-5.4",
		Effort: "high", Continue: "b8284362-fbe5-48ec-a564-3b4bb4cdea9d",
		Endpoint: &adapters.Endpoint{BaseURL: "http://127.0.0.1:9/api/", OAuthToken: "tok"}})
	require.NoError(t, err)
	assert.Equal(t, []string{"/opt/copilot", "--output-format", "json", "--allow-all", "--no-ask-user", "--no-auto-update",
		"--model", "gpt-5.4", "--reasoning-effort", "high", "--resume", "b8284362-fbe5-48ec-a564-3b4bb4cdea9d"}, cmd.Args)
	assert.Equal(t, "tok", cmd.Env["COPILOT_PROVIDER_BEARER_TOKEN"])
	assert.Equal(t, "gpt-5.4", cmd.Env["COPILOT_MODEL"])
	assert.Equal(t, "http://127.0.0.1:9/api", cmd.Env["COPILOT_PROVIDER_BASE_URL"])
	assert.NotContains(t, cmd.Env, "COPILOT_PROVIDER_API_KEY")
}

func TestRequestRefuses(t *testing.T) {
	a := copilot.New()
	for name, in := range map[string]adapters.Input{
		"fork":         {Prompt: "x", Continue: "abc", Fork: true},
		"empty":        {Prompt: " "},
		"bad id":       {Prompt: "x", Continue: "--help"},
		"permission":   {Prompt: "x", Permission: "read-only"},
		"effort":       {Prompt: "x", Effort: "huge"},
		"model":        {Prompt: "x", Model: "-m"},
		"endpoint":     {Prompt: "x", Endpoint: &adapters.Endpoint{BaseURL: "ftp://x"}},
		"both keys":    {Prompt: "x", Endpoint: &adapters.Endpoint{BaseURL: "http://x", APIKey: "a", OAuthToken: "b"}},
		"mcp required": {Prompt: "x", MCP: []credentials.MCPServer{{Name: "s", Command: "c", Required: true}}},
		"env":          {Prompt: "x", Env: map[string]string{"A=B": "1"}},
		"retries":      {Prompt: "x", MaxRetries: new(int(-1))},
		"timeout":      {Prompt: "x", RequestTimeout: -time.Second},
	} {
		_, err := a.Request(in)
		require.Error(t, err, name)
		assert.True(t, outposterr.Is(err, outposterr.Configuration), "%s: %v", name, err)
	}
	_, err := a.Request(adapters.Input{Prompt: "x", Continue: "abc", Fork: true})
	assert.ErrorContains(t, err, "fork is not supported")
}

func TestCapabilities(t *testing.T) {
	c := copilot.New().Capabilities()
	assert.True(t, c.Resumable)
	assert.False(t, c.Forkable)
	assert.True(t, c.RequiresFinished)
	assert.Equal(t, adapters.UsageSession, c.Usage)
}

func TestQuota(t *testing.T) {
	at := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	for text, want := range map[string]time.Time{
		"429 Sorry, you've hit a rate limit that restricts the number of Copilot model requests you can make within a specific time period. Please try again in 2 hours. Please review our Terms of Service": at.Add(2 * time.Hour),
		"Sorry, you’ve hit a rate limit … Please try again in 15 hours 23 minutes.":                                                                                                                          at.Add(15*time.Hour + 23*time.Minute),
		`Model call failed: {"message":"Sorry, you have exceeded your Copilot token usage.","code":"rate_limited"}`:                                                                                          {},
		`402 {"error":{"message":"You have no quota","code":"quota_exceeded"}}`:                                                                                                                              {},
		"402 You have no quota": {},
		"Failed to get response from the AI model; retried 5 times (total retry wait time: 5.63 seconds) Last error: 429 rate limit exceeded": {},
		`Model call failed: {"message":"rate limit exceeded","code":"rate_limited"}`:                                                          {},
	} {
		ok, reset := copilot.New().Quota(text, at)
		assert.True(t, ok, text)
		assert.Equal(t, want, reset, text)
	}
	for _, text := range []string{
		"Response was interrupted due to a server error. Retrying...",
		"You have exceeded your premium request allowance. We have automatically switched you to GPT-4.1 which is included with your plan.",
		"Failed to get response from the AI model; retried 5 times (total retry wait time: 14.97 seconds) Last error: 503 Service Unavailable",
		"",
	} {
		ok, _ := copilot.New().Quota(text, at)
		assert.False(t, ok, text)
	}
}

func TestUnavailableAuthSession(t *testing.T) {
	for text, want := range map[string]string{
		"Failed to get response from the AI model; retried 5 times (total retry wait time: 14.97 seconds) Last error: 503 Service Unavailable":               "http 503",
		"Execution failed: Error: Failed to get response from the AI model; retried 5 times (total retry wait time: 6.33 seconds) Last error: Unknown error": "retries exhausted",
		`Model call failed: "500 500 Internal Server Error\n"`:                   "http 500",
		"Execution failed: 499 499 status code (no body)":                        "http 499",
		"Could not connect to local model provider at http://127.0.0.1:8080/v1.": "connection error",
	} {
		got, ok := copilot.New().Unavailable(text)
		assert.True(t, ok, text)
		assert.Equal(t, want, got, text)
	}
	_, ok := copilot.New().Unavailable("Response was interrupted due to a server error. Retrying...")
	assert.False(t, ok)
	_, ok = copilot.New().Unavailable("429 Sorry, you've hit a rate limit")
	assert.False(t, ok)

	for text, want := range map[string]string{
		"Error: No authentication information found.":                                                                                "not logged in",
		"401 401 unauthorized: Personal Access Token does not have Copilot Requests permission":                                      "token lacks Copilot Requests permission",
		"Authentication failed with provider at http://127.0.0.1:8080/v1 (HTTP 401).":                                                "authentication failed",
		`400 "checking server-to-server token: bad request: GitHub App Server-To-Server Tokens are not supported for this endpoint"`: "unsupported token (Actions)",
	} {
		got, ok := copilot.New().Auth(text)
		assert.True(t, ok, text)
		assert.Equal(t, want, got, text)
	}
	a := copilot.New()
	assert.True(t, a.SessionMissing("Error: No session, task, or name matched '01a2'."))
	assert.False(t, a.SessionMissing("outpost ok"))
}

func TestDecodeShapes(t *testing.T) {
	d := copilot.NewDecoder()
	evs := d.Decode([]byte(`{"type":"assistant.usage","data":{"apiCallId":"c1","inputTokens":100,"cacheReadTokens":40,"outputTokens":7}}`))
	require.Len(t, evs, 1)
	require.Equal(t, adapters.KindUsage, evs[0].Kind)
	assert.Equal(t, int64(60), evs[0].Usage.Input)
	assert.Equal(t, int64(40), evs[0].Usage.Cached)
	assert.Equal(t, "c1", evs[0].Usage.MessageID)

	evs = d.Decode([]byte(`{"type":"session.shutdown","data":{"modelMetrics":{"a":{"usage":{"inputTokens":10,"outputTokens":2}},"b":{"usage":{"inputTokens":5,"outputTokens":1,"cacheReadTokens":5}}}}}`))
	require.Len(t, evs, 1)
	assert.Equal(t, "cumulative", string(evs[0].Usage.Scope))
	assert.Equal(t, int64(10), evs[0].Usage.Input)
	assert.Equal(t, int64(3), evs[0].Usage.Output)

	evs = d.Decode([]byte(`{"type":"assistant.reasoning","data":{"content":"thinking"}}`))
	assert.Equal(t, adapters.KindReasoning, evs[0].Kind)
	evs = d.Decode([]byte(`{"type":"session.warning","data":{"message":"careful"}}`))
	assert.Equal(t, adapters.KindWarning, evs[0].Kind)

	evs = d.Decode([]byte(`{"type":"result","sessionId":"s1","exitCode":0,"outcome":"blocked"}`))
	require.Equal(t, adapters.KindFinished, evs[len(evs)-1].Kind)
	assert.False(t, evs[len(evs)-1].Finished.OK)

	d2 := copilot.NewDecoder()
	evs = d2.Decode([]byte(`{"type":"abort","data":{"reason":"user_initiated"}}`))
	assert.Equal(t, adapters.KindFailure, evs[0].Kind)
	evs = d2.Decode([]byte(`{"type":"result","sessionId":"s1","exitCode":0}`))
	assert.False(t, evs[len(evs)-1].Finished.OK, "a result after an abort is not a success")

	evs = d.Decode([]byte("Error: something broke"))
	assert.Equal(t, adapters.KindFailure, evs[0].Kind)
	evs = d.Decode([]byte("not json"))
	assert.Equal(t, adapters.KindRaw, evs[0].Kind)
}

func TestCredentials(t *testing.T) {
	a := copilot.New()
	p, err := a.Credentials(credentials.Auth{Form: credentials.Account, Source: credentials.SourceVariable},
		map[string]string{"COPILOT_GITHUB_TOKEN": "github_pat_x"})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"COPILOT_GITHUB_TOKEN": "github_pat_x"}, p.Env)
	assert.ElementsMatch(t, []string{"GH_TOKEN", "GITHUB_TOKEN"}, p.Strip)

	_, err = a.Credentials(credentials.Auth{Form: credentials.Account, Source: credentials.SourceVariable},
		map[string]string{"COPILOT_GITHUB_TOKEN": "ghp_classic"})
	assert.ErrorContains(t, err, "classic")
	_, err = a.Credentials(credentials.Auth{Form: credentials.Account, Source: credentials.SourceVariable}, nil)
	assert.ErrorContains(t, err, "COPILOT_GITHUB_TOKEN")
	_, err = a.Credentials(credentials.Auth{Form: credentials.Usage}, nil)
	assert.ErrorContains(t, err, "BYOK")

	p, err = a.Credentials(credentials.Auth{Form: credentials.Account}, nil)
	require.NoError(t, err)
	require.Len(t, p.Files, 1)
	f := p.Files[0]
	assert.Equal(t, ".copilot/config.json", f.Path)
	assert.Equal(t, "COPILOT_GITHUB_TOKEN", f.DestVar)
	assert.Empty(t, f.Dest)
	assert.Equal(t, "COPILOT_HOME", f.RelocateVar)
	assert.Contains(t, p.Strip, "COPILOT_GITHUB_TOKEN")

	cfg := []byte(`// User settings belong in settings.json.
// This file is managed automatically.
{
  "firstLaunchAt": "2026-12-02T09:35:49.197Z", /* block */
  "lastLoggedInUser": {"host": "https://github.com", "login": "octo"},
  "authTokens": {
    "https://github.com:other": "gho_other",
    "https://github.com:octo": {"token": "gho_octo//not-a-comment"},
  },
}`)
	tok, err := f.Project(cfg)
	require.NoError(t, err)
	assert.Equal(t, "gho_octo//not-a-comment", string(tok))
	tok, err = copilot.ProjectToken([]byte(`{"lastLoggedInUser":{"host":"github.com","login":"octo"},"authTokens":{"github.com:octo":"gho_s"}}`))
	require.NoError(t, err)
	assert.Equal(t, "gho_s", string(tok))
	_, err = copilot.ProjectToken([]byte(`{"lastLoggedInUser":{"host":"github.com","login":"octo"}}`))
	assert.ErrorContains(t, err, "keychain")
	_, err = copilot.ProjectToken([]byte(`{"lastLoggedInUser":{"host":"github.com","login":"octo"},"authTokens":{"github.com:octo":"ghp_x"}}`))
	assert.ErrorContains(t, err, "classic")
}

func TestStorage(t *testing.T) {
	a := copilot.New()
	id := "b8284362-fbe5-48ec-a564-3b4bb4cdea9d"
	assert.Equal(t, []string{".copilot/session-state/" + id}, a.ConversationPaths(id, "/w"))
	ws := "id: " + id + "\ncwd: /old/work\ngit_root: /old/work\nname: x\n"
	p, got := a.Relocate(".copilot/session-state/"+id+"/workspace.yaml", []byte(ws), "/old/work", "/new dir/w")
	assert.Equal(t, ".copilot/session-state/"+id+"/workspace.yaml", p)
	assert.Equal(t, "id: "+id+"\ncwd: /new dir/w\ngit_root: /new dir/w\nname: x\n", string(got))
	_, got = a.Relocate("x/workspace.yaml", []byte("cwd: /old/work\n"), "/old/work", "/a: b")
	assert.Equal(t, "cwd: \"/a: b\"\n", string(got))
	ev := `{"type":"session.start","data":{"context":{"cwd":"/old/work","gitRoot":"/old/work"}}}` + "\n" +
		`{"type":"user.message","data":{"content":"cd /old/work"}}` + "\n"
	_, got = a.Relocate(".copilot/session-state/"+id+"/events.jsonl", []byte(ev), "/old/work", "/new")
	assert.Equal(t, `{"type":"session.start","data":{"context":{"cwd":"/new","gitRoot":"/new"}}}`+"\n"+
		`{"type":"user.message","data":{"content":"cd /old/work"}}`+"\n", string(got))
}

// TestSessionUsage reads the session file of a conversation resumed twice
// (captured from 1.0.102): only the last process's usage records count.
func TestSessionUsage(t *testing.T) {
	b, err := os.ReadFile("testdata/session_events.jsonl")
	require.NoError(t, err)
	r, ok := copilot.ParseSessionUsage(b)
	require.True(t, ok)
	assert.Equal(t, "turn", string(r.Scope))
	assert.True(t, r.Complete)
	assert.Equal(t, int64(12202-12116), r.Input)
	assert.Equal(t, int64(12116), r.Cached)
	assert.Equal(t, int64(15), r.Output)

	_, ok = copilot.ParseSessionUsage([]byte(`{"type":"session.start","data":{}}`))
	assert.False(t, ok)
	cmd, ok := copilot.SessionUsageCommand("/home/u", "abc")
	require.True(t, ok)
	assert.Equal(t, []string{"tail", "-c", "8388608", "/home/u/.copilot/session-state/abc/events.jsonl"}, cmd.Args)
	_, ok = copilot.SessionUsageCommand("/home/u", "../x")
	assert.False(t, ok)
}

// A line the decoder does not understand keeps only a bounded preview,
// however long it is: an unknown type, a known type without what the
// decoder reads, and a line that is not JSON.
func TestDecodeLongRawLineBounded(t *testing.T) {
	pad := strings.Repeat("x", 2*adapters.RawLimit)
	for _, line := range []string{
		`{"type":"mystery","data":{"pad":"` + pad + `"}}`,
		`{"type":"assistant.message_delta","data":{"deltaContent":"` + pad + `"}}`,
		`not json ` + pad,
	} {
		adaptertest.CheckLongRaw(t, copilot.NewDecoder(), []byte(line))
	}
}
