package e2e

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/adapters/claude"
	"github.com/outpost-dev/outpost/adapters/codex"
	"github.com/outpost-dev/outpost/adapters/copilot"
	"github.com/outpost-dev/outpost/credentials"
	"github.com/outpost-dev/outpost/harness"
	"github.com/outpost-dev/outpost/internal/fakecli"
	"github.com/outpost-dev/outpost/internal/testenv"
	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/outposttest"
)

// TestClaudeMCPProjection declares a stdio MCP server once (the fake, whose
// tool name comes from a ${VAR} reference) and checks that the real Claude
// Code loads it: the model request carries the server's tool, whose name
// proves the variable was expanded inside the sandbox, not in argv.
func TestClaudeMCPProjection(t *testing.T) {
	testenv.Short(t)
	bin := testenv.CLI(t, "claude")
	e := hostEnv(t, bin)
	srv := server(t)
	exe, err := os.Executable()
	require.NoError(t, err)
	suffix := "x7q"
	mcp := []credentials.MCPServer{{
		Name: "fake", Command: exe,
		Env: map[string]string{fakecli.ChildEnv: "1", fakecli.MCPEnv: "1", "GORACE": "atexit_sleep_ms=0",
			"FAKECLI_MCP_SUFFIX": "${MCP_SUFFIX}"},
		ExcludeTools: []string{"never_used"}, StartupTimeoutMS: 20000,
	}}
	sb := lease(t, e)
	res, err := harness.Run(context.Background(), harness.Turn{
		Adapter: claude.New(), Sandbox: sb, KeepEvents: true, Limits: harness.Limits{Deadline: 2 * time.Minute},
		Input: adapters.Input{Prompt: "MARK-mcp", MCP: mcp,
			Endpoint: &adapters.Endpoint{BaseURL: srv.URL(), APIKey: "placeholder"}},
		Credentials: &harness.Credentials{Auth: credentials.Auth{Form: credentials.None},
			Vars: map[string]string{"MCP_SUFFIX": suffix}},
	})
	require.NoError(t, err, "stderr: %s", resTail(res))
	assert.Zero(t, res.Counts[adapters.KindWarning], "no MCP server failed: %v", res.Warnings)
	var tools []string
	for _, r := range srv.ModelRequests() {
		tools = append(tools, r.Tools...)
	}
	assert.Contains(t, tools, "mcp__fake__echo_"+suffix, "tools: %s", strings.Join(tools, ","))

	// A referenced variable that is not declared fails before any sandbox exists.
	_, err = harness.Run(context.Background(), harness.Turn{
		Adapter: claude.New(), Provider: e.provider,
		Input:       adapters.Input{Prompt: "x", MCP: mcp},
		Credentials: &harness.Credentials{Auth: credentials.Auth{Form: credentials.None}},
	})
	require.Error(t, err)
	assert.Equal(t, outposterr.Configuration, outposterr.ClassOf(err))
	assert.Contains(t, err.Error(), "missing MCP_SUFFIX for claude MCP server fake")
}

// TestCodexMCPProjection: the same declaration projected into Codex's -c
// overrides, the variable forwarded by name (env_vars). Codex 0.169.0 hides
// MCP tools behind tool_search, so the proof is required=true: the turn
// succeeds only if the server started and answered, and a broken server
// fails it.
func TestCodexMCPProjection(t *testing.T) {
	testenv.Short(t)
	e := codexEnvs(t)[0]
	srv := server(t)
	exe, err := os.Executable()
	require.NoError(t, err)
	suffix := "k9w"
	mcp := []credentials.MCPServer{{
		Name: "fake", Command: exe,
		Env: map[string]string{fakecli.ChildEnv: "1", fakecli.MCPEnv: "1", "GORACE": "atexit_sleep_ms=0",
			"FAKECLI_MCP_SUFFIX": "${FAKECLI_MCP_SUFFIX}"},
		StartupTimeoutMS: 20000, Required: true,
	}}
	one := 1
	res, err := harness.Run(context.Background(), harness.Turn{
		Adapter: codex.New(), Sandbox: lease(t, e), Limits: harness.Limits{Deadline: 2 * time.Minute},
		Input: adapters.Input{Prompt: "MARK-cmcp", Model: "gpt-5.5", MCP: mcp, MaxRetries: &one,
			Endpoint: &adapters.Endpoint{BaseURL: srv.URL(), APIKey: "placeholder"}},
		Credentials: &harness.Credentials{Auth: credentials.Auth{Form: credentials.None},
			Vars: map[string]string{"FAKECLI_MCP_SUFFIX": suffix}},
	})
	require.NoError(t, err, "output: %s", resTail(res))

	broken := mcp
	broken[0].Command = "/nonexistent/mcp-server"
	res, err = harness.Run(context.Background(), harness.Turn{
		Adapter: codex.New(), Sandbox: lease(t, e), Limits: harness.Limits{Deadline: 2 * time.Minute},
		Input: adapters.Input{Prompt: "MARK-cmcp2", Model: "gpt-5.5", MCP: broken, MaxRetries: &one,
			Endpoint: &adapters.Endpoint{BaseURL: srv.URL(), APIKey: "placeholder"}},
		Credentials: &harness.Credentials{Auth: credentials.Auth{Form: credentials.None},
			Vars: map[string]string{"FAKECLI_MCP_SUFFIX": suffix}},
	})
	require.Error(t, err, "a required server that cannot start fails the turn: %s", resTail(res))
}

// TestCopilotMCPProjection: the declaration projected into
// --additional-mcp-config; the model request carries the server's tool,
// named from a ${VAR} Copilot expanded in the sandbox.
func TestCopilotMCPProjection(t *testing.T) {
	testenv.Short(t)
	e := copilotEnvs(t)[0]
	srv := server(t)
	exe, err := os.Executable()
	require.NoError(t, err)
	suffix := "p4z"
	mcp := []credentials.MCPServer{{
		Name: "fake", Command: exe,
		Env: map[string]string{fakecli.ChildEnv: "1", fakecli.MCPEnv: "1", "GORACE": "atexit_sleep_ms=0",
			"FAKECLI_MCP_SUFFIX": "${MCP_SUFFIX}"},
	}}
	sb := lease(t, e)
	res, err := harness.Run(context.Background(), harness.Turn{
		Adapter: copilot.New(), Sandbox: sb, Limits: harness.Limits{Deadline: 2 * time.Minute},
		Input: adapters.Input{Prompt: "MARK-pmcp", MCP: mcp,
			Endpoint: &adapters.Endpoint{BaseURL: srv.URL(), APIKey: outposttest.PlaceholderKey}},
		Credentials: &harness.Credentials{Auth: credentials.Auth{Form: credentials.None},
			Vars: map[string]string{"MCP_SUFFIX": suffix}},
	})
	require.NoError(t, err, "output: %s", resTail(res))
	var tools []string
	for _, r := range srv.ModelRequests() {
		tools = append(tools, r.Tools...)
	}
	assert.Contains(t, strings.Join(tools, ","), "echo_"+suffix, "tools: %s", strings.Join(tools, ","))
}
