package codex

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/credentials"
	"github.com/outpost-dev/outpost/outposterr"
)

func TestMCPConfig(t *testing.T) {
	got, env, err := mcpConfig([]credentials.MCPServer{
		{Name: "fs", Command: "srv", Args: []string{"--root", "/w"}, Env: map[string]string{"MODE": "ro", "FS_TOKEN": "${FS_TOKEN}"},
			ExcludeTools: []string{"rm"}, StartupTimeoutMS: 5000, Required: true},
		{Name: "docs", URL: "https://docs.example/mcp", BearerTokenVar: "DOCS_TOKEN",
			Headers: map[string]string{"X-Team": "core", "X-Key": "${DOCS_KEY}"}, IncludeTools: []string{"search"}},
	})
	require.NoError(t, err)
	assert.Equal(t, []string{
		`mcp_servers.fs.command="srv"`, `mcp_servers.fs.args=["--root","/w"]`,
		`mcp_servers.fs.env_vars=["FS_TOKEN","MODE"]`,
		`mcp_servers.fs.disabled_tools=["rm"]`, `mcp_servers.fs.startup_timeout_ms=5000`,
		`mcp_servers.fs.required=true`, `mcp_servers.fs.default_tools_approval_mode="approve"`,
		`mcp_servers.docs.url="https://docs.example/mcp"`, `mcp_servers.docs.bearer_token_env_var="DOCS_TOKEN"`,
		`mcp_servers.docs.env_http_headers={"X-Key"="DOCS_KEY","X-Team"="OUTPOST_MCP_1_1"}`,
		`mcp_servers.docs.enabled_tools=["search"]`, `mcp_servers.docs.default_tools_approval_mode="approve"`,
	}, got)
	assert.Equal(t, map[string]string{"MODE": "ro", "OUTPOST_MCP_1_1": "core"}, env, "literal values travel in the environment")

	for _, bad := range []credentials.MCPServer{
		{Name: "a", Command: "c", Env: map[string]string{"X": "${Y}"}},
		{Name: "a", URL: "http://u", Headers: map[string]string{"Authorization": "Bearer ${T}"}},
		{Name: "a", Command: "c", Env: map[string]string{"OPENAI_BASE_URL": "http://elsewhere"}},
		{Name: "a", Command: "c", Env: map[string]string{"PATH": "/evil"}},
		{Name: "a", Command: "c", Args: []string{"${TOKEN}"}},
	} {
		_, _, err := mcpConfig([]credentials.MCPServer{bad})
		assert.Equal(t, outposterr.Configuration, outposterr.ClassOf(err), "%+v", bad)
	}
}

// TestMCPValuesNeverInArgv: literal and referenced values of env and
// headers reach Codex through its environment, never its argv; a literal
// that would change a declared variable is refused.
func TestMCPValuesNeverInArgv(t *testing.T) {
	in := adapters.Input{Prompt: "p", Env: map[string]string{"FS_TOKEN": "MARK-declared"}, MCP: []credentials.MCPServer{
		{Name: "fs", Command: "srv", Env: map[string]string{"LEVEL": "MARK-literal", "FS_TOKEN": "${FS_TOKEN}"}},
		{Name: "docs", URL: "https://docs.example/mcp", Headers: map[string]string{"Authorization": "MARK-header"}},
	}}
	cmd, err := New().Request(in)
	require.NoError(t, err)
	b, _ := json.Marshal(cmd.Args)
	assert.NotContains(t, string(b), "MARK-")
	assert.Equal(t, "MARK-literal", cmd.Env["LEVEL"])
	assert.Equal(t, "MARK-header", cmd.Env["OUTPOST_MCP_1_0"])
	assert.Equal(t, "MARK-declared", cmd.Env["FS_TOKEN"])
	live, _, err := New().LiveRequest(in)
	require.NoError(t, err)
	b, _ = json.Marshal(live.Args)
	assert.NotContains(t, string(b), "MARK-")

	in.MCP[0].Env["FS_TOKEN"] = "MARK-other"
	_, err = New().Request(in)
	require.Error(t, err)
	assert.Equal(t, outposterr.Configuration, outposterr.ClassOf(err))
	assert.NotContains(t, err.Error(), "MARK-")
}
