package codex

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/credentials"
	"github.com/outpost-dev/outpost/outposterr"
)

func TestMCPConfig(t *testing.T) {
	got, err := mcpConfig([]credentials.MCPServer{
		{Name: "fs", Command: "srv", Args: []string{"--root", "/w"}, Env: map[string]string{"MODE": "ro", "FS_TOKEN": "${FS_TOKEN}"},
			ExcludeTools: []string{"rm"}, StartupTimeoutMS: 5000, Required: true},
		{Name: "docs", URL: "https://docs.example/mcp", BearerTokenVar: "DOCS_TOKEN",
			Headers: map[string]string{"X-Team": "core", "X-Key": "${DOCS_KEY}"}, IncludeTools: []string{"search"}},
	})
	require.NoError(t, err)
	assert.Equal(t, []string{
		`mcp_servers.fs.command="srv"`, `mcp_servers.fs.args=["--root","/w"]`,
		`mcp_servers.fs.env={"MODE"="ro"}`, `mcp_servers.fs.env_vars=["FS_TOKEN"]`,
		`mcp_servers.fs.disabled_tools=["rm"]`, `mcp_servers.fs.startup_timeout_ms=5000`,
		`mcp_servers.fs.required=true`, `mcp_servers.fs.default_tools_approval_mode="approve"`,
		`mcp_servers.docs.url="https://docs.example/mcp"`, `mcp_servers.docs.bearer_token_env_var="DOCS_TOKEN"`,
		`mcp_servers.docs.http_headers={"X-Team"="core"}`, `mcp_servers.docs.env_http_headers={"X-Key"="DOCS_KEY"}`,
		`mcp_servers.docs.enabled_tools=["search"]`, `mcp_servers.docs.default_tools_approval_mode="approve"`,
	}, got)

	for _, bad := range []credentials.MCPServer{
		{Name: "a", Command: "c", Env: map[string]string{"X": "${Y}"}},
		{Name: "a", URL: "http://u", Headers: map[string]string{"Authorization": "Bearer ${T}"}},
	} {
		_, err := mcpConfig([]credentials.MCPServer{bad})
		assert.Equal(t, outposterr.Configuration, outposterr.ClassOf(err))
	}
}
