package claude

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/credentials"
	"github.com/outpost-dev/outpost/outposterr"
)

func TestMCPProjection(t *testing.T) {
	in := adapters.Input{Prompt: "p", Scratch: "/home/agent/.outpost-turn-1", MCP: []credentials.MCPServer{
		{Name: "local", Command: "srv", Args: []string{"--flag"}, Env: map[string]string{"TOKEN": "${LOCAL_TOKEN}", "LEVEL": "MARK-literal"},
			ExcludeTools: []string{"rm"}},
		{Name: "docs", URL: "https://docs.example/mcp", BearerTokenVar: "DOCS_TOKEN", StartupTimeoutMS: 15000},
	}}
	cmd, err := New().Request(in)
	require.NoError(t, err)
	assert.Contains(t, cmd.Args, "--mcp-config=/home/agent/.outpost-turn-1/mcp.json")
	assert.Contains(t, cmd.Args, "--strict-mcp-config")
	assert.Contains(t, cmd.Args, "--disallowedTools=mcp__local__rm")
	assert.Equal(t, "15000", cmd.Env["MCP_TIMEOUT"])
	b, _ := json.Marshal(cmd.Args)
	assert.NotContains(t, string(b), "MARK-literal", "no env value in argv")
	assert.NotContains(t, string(b), "LOCAL_TOKEN")

	files := New().TurnFiles(in)
	require.Len(t, files, 1)
	assert.Equal(t, adapters.MCPConfigFile, files[0].Name)
	assert.JSONEq(t, `{"mcpServers":{
		"local":{"type":"stdio","command":"srv","args":["--flag"],"env":{"TOKEN":"${LOCAL_TOKEN}","LEVEL":"MARK-literal"}},
		"docs":{"type":"http","url":"https://docs.example/mcp","headers":{"Authorization":"Bearer ${DOCS_TOKEN}"}}}}`, string(files[0].Data))
	assert.Empty(t, New().TurnFiles(adapters.Input{Prompt: "p"}))

	_, err = New().Request(adapters.Input{Prompt: "p", MCP: in.MCP})
	require.Error(t, err, "without a scratch directory")
	assert.Equal(t, outposterr.Configuration, outposterr.ClassOf(err))

	for _, bad := range [][]credentials.MCPServer{
		{{Name: "x", Command: "c", IncludeTools: []string{"a"}}},
		{{Name: "x", Command: "c"}, {Name: "x", Command: "d"}},
		{{Name: "bad name", Command: "c"}},
		{{Name: "x"}},
		{{Name: "x", Command: "c", URL: "http://u"}},
		{{Name: "x", Command: "c", Args: []string{"--token=${TOKEN}"}}},
	} {
		_, err := New().Request(adapters.Input{Prompt: "p", Scratch: "/s", MCP: bad})
		require.Error(t, err)
		assert.Equal(t, outposterr.Configuration, outposterr.ClassOf(err))
	}
}

func TestMCPVars(t *testing.T) {
	s := credentials.MCPServer{Name: "x", URL: "http://u", BearerTokenVar: "B", Headers: map[string]string{"X": "${A} and ${C}"}}
	assert.Equal(t, []string{"A", "B", "C"}, s.Vars())
	err := credentials.CheckMCPVars("claude", []credentials.MCPServer{s}, map[string]string{"A": "1", "B": "2"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "missing C for claude MCP server x")
	assert.NoError(t, credentials.CheckMCPVars("claude", []credentials.MCPServer{s}, map[string]string{"A": "1", "B": "2", "C": "3"}))
}
