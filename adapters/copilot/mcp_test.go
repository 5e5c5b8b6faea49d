package copilot

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/credentials"
	"github.com/outpost-dev/outpost/outposterr"
)

// TestMCPProjection: the configuration goes to a turn file that
// --additional-mcp-config=@path names; no env or header value, literal or
// reference, is in argv (one-shot or ACP).
func TestMCPProjection(t *testing.T) {
	in := adapters.Input{Prompt: "p", Scratch: "/home/agent/.outpost-turn-1", MCP: []credentials.MCPServer{
		{Name: "local", Command: "srv", Args: []string{"--flag"}, Env: map[string]string{"TOKEN": "${LOCAL_TOKEN}", "LEVEL": "MARK-literal"},
			ExcludeTools: []string{"rm"}},
		{Name: "docs", URL: "https://docs.example/mcp", Headers: map[string]string{"X-Team": "MARK-header"}, IncludeTools: []string{"search"}},
	}}
	a := New()
	cmd, err := a.Request(in)
	require.NoError(t, err)
	live, _, err := a.LiveRequest(in)
	require.NoError(t, err)
	for _, argv := range [][]string{cmd.Args, live.Args} {
		assert.Contains(t, argv, "--additional-mcp-config=@/home/agent/.outpost-turn-1/mcp.json")
		assert.Contains(t, argv, "--deny-tool=local(rm)")
		b, _ := json.Marshal(argv)
		assert.NotContains(t, string(b), "MARK-")
		assert.NotContains(t, string(b), "LOCAL_TOKEN")
	}
	files := a.TurnFiles(in)
	require.Len(t, files, 1)
	assert.Equal(t, adapters.MCPConfigFile, files[0].Name)
	assert.JSONEq(t, `{"mcpServers":{
		"local":{"type":"local","command":"srv","args":["--flag"],"env":{"TOKEN":"${LOCAL_TOKEN}","LEVEL":"MARK-literal"},"tools":["*"]},
		"docs":{"type":"http","url":"https://docs.example/mcp","headers":{"X-Team":"MARK-header"},"tools":["search"]}}}`, string(files[0].Data))
	assert.Empty(t, a.TurnFiles(adapters.Input{Prompt: "p"}))

	_, err = a.Request(adapters.Input{Prompt: "p", MCP: in.MCP})
	require.Error(t, err, "without a scratch directory")
	assert.Equal(t, outposterr.Configuration, outposterr.ClassOf(err))
}
