package copilot

import (
	"encoding/json"
	"path"
	"sort"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/credentials"
)

// MCPConfigFile is the turn file (in the turn's scratch directory, mode
// 0600) that holds the MCP configuration --additional-mcp-config reads.
const MCPConfigFile = "mcp.json"

var _ adapters.TurnFiles = (*Adapter)(nil)

// TurnFiles implements [adapters.TurnFiles]: the MCP configuration, when
// the turn declares servers. Its env and header values stay in that 0600
// file and out of every argv.
func (a *Adapter) TurnFiles(in adapters.Input) []adapters.TurnFile {
	cfg, _, err := mcpConfig(in.MCP)
	if err != nil || cfg == nil {
		return nil // Request reports the error
	}
	return []adapters.TurnFile{{Name: MCPConfigFile, Data: cfg}}
}

// mcpArgs projects MCP servers into --additional-mcp-config=@<scratch>/mcp.json
// (Copilot reads a file named with a leading @; the file is
// [Adapter.TurnFiles]') and excluded tools into --deny-tool=<server>(<tool>).
func mcpArgs(in adapters.Input) ([]string, error) {
	cfg, deny, err := mcpConfig(in.MCP)
	if err != nil || cfg == nil {
		return nil, err
	}
	if !path.IsAbs(in.Scratch) {
		return nil, configErr("MCP servers need the turn's scratch directory for their configuration file")
	}
	return append([]string{"--additional-mcp-config=@" + path.Join(in.Scratch, MCPConfigFile)}, deny...), nil
}

// mcpConfig builds Copilot's MCP configuration ({"mcpServers":{name:{type:
// "local"|"http", command, args, env | url, headers, tools}}}) and the
// sorted --deny-tool flags. Values keep their ${NAME} references for Copilot
// to expand from its own environment; a bearer token variable becomes an
// Authorization header. Copilot cannot require a server or bound its
// startup. A nil configuration means no servers.
func mcpConfig(servers []credentials.MCPServer) ([]byte, []string, error) {
	if len(servers) == 0 {
		return nil, nil, nil
	}
	cfg := map[string]map[string]any{}
	var deny []string
	for _, s := range servers {
		if err := s.Validate(); err != nil {
			return nil, nil, err
		}
		if s.Required {
			return nil, nil, configErr("MCP server %s: Copilot CLI cannot require a server", s.Name)
		}
		if s.StartupTimeoutMS > 0 {
			return nil, nil, configErr("MCP server %s: Copilot CLI has no startup timeout setting", s.Name)
		}
		if _, dup := cfg[s.Name]; dup {
			return nil, nil, configErr("MCP server %s declared twice", s.Name)
		}
		entry := s.ConfigEntry("local")
		entry["tools"] = []string{"*"}
		if len(s.IncludeTools) > 0 {
			entry["tools"] = s.IncludeTools
		}
		cfg[s.Name] = entry
		for _, tool := range s.ExcludeTools {
			deny = append(deny, "--deny-tool="+s.Name+"("+tool+")")
		}
	}
	b, err := json.Marshal(map[string]any{"mcpServers": cfg})
	if err != nil {
		return nil, nil, configErr("encode MCP config: %v", err)
	}
	sort.Strings(deny)
	return b, deny, nil
}
