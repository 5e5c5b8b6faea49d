package claude

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/credentials"
	"github.com/outpost-dev/outpost/outposterr"
)

func TestMCPProjection(t *testing.T) {
	cmd, err := New().Request(adapters.Input{Prompt: "p", MCP: []credentials.MCPServer{
		{Name: "local", Command: "srv", Args: []string{"--flag"}, Env: map[string]string{"TOKEN": "${LOCAL_TOKEN}"}, ExcludeTools: []string{"rm"}},
		{Name: "docs", URL: "https://docs.example/mcp", BearerTokenVar: "DOCS_TOKEN", StartupTimeoutMS: 15000},
	}})
	require.NoError(t, err)
	var cfgArg string
	for _, a := range cmd.Args {
		if strings.HasPrefix(a, "--mcp-config=") {
			cfgArg = strings.TrimPrefix(a, "--mcp-config=")
		}
	}
	require.NotEmpty(t, cfgArg, "argv: %q", cmd.Args)
	assert.JSONEq(t, `{"mcpServers":{
		"local":{"type":"stdio","command":"srv","args":["--flag"],"env":{"TOKEN":"${LOCAL_TOKEN}"}},
		"docs":{"type":"http","url":"https://docs.example/mcp","headers":{"Authorization":"Bearer ${DOCS_TOKEN}"}}}}`, cfgArg)
	assert.Contains(t, cmd.Args, "--strict-mcp-config")
	assert.Contains(t, cmd.Args, "--disallowedTools=mcp__local__rm")
	assert.Equal(t, "15000", cmd.Env["MCP_TIMEOUT"])

	for _, bad := range [][]credentials.MCPServer{
		{{Name: "x", Command: "c", IncludeTools: []string{"a"}}},
		{{Name: "x", Command: "c"}, {Name: "x", Command: "d"}},
		{{Name: "bad name", Command: "c"}},
		{{Name: "x"}},
		{{Name: "x", Command: "c", URL: "http://u"}},
	} {
		_, err := New().Request(adapters.Input{Prompt: "p", MCP: bad})
		require.Error(t, err)
		assert.Equal(t, outposterr.Configuration, outposterr.ClassOf(err))
	}
	b, _ := json.Marshal(cmd.Args)
	assert.NotContains(t, string(b), "secret")
}

func TestMCPVars(t *testing.T) {
	s := credentials.MCPServer{Name: "x", URL: "http://u", BearerTokenVar: "B", Headers: map[string]string{"X": "${A} and ${C}"}}
	assert.Equal(t, []string{"A", "B", "C"}, s.Vars())
	err := credentials.CheckMCPVars("claude", []credentials.MCPServer{s}, map[string]string{"A": "1", "B": "2"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "missing C for claude MCP server x")
	assert.NoError(t, credentials.CheckMCPVars("claude", []credentials.MCPServer{s}, map[string]string{"A": "1", "B": "2", "C": "3"}))
}
