package copilot

import (
	"sort"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/credentials"
)

var _ adapters.TurnFiles = (*Adapter)(nil)

// TurnFiles implements [adapters.TurnFiles]: the MCP configuration
// ([adapters.MCPConfigFile]), when the turn declares servers.
func (a *Adapter) TurnFiles(in adapters.Input) []adapters.TurnFile {
	cfg, _, err := mcpConfig(in.MCP)
	return adapters.MCPTurnFiles(cfg, err)
}

// mcpArgs projects MCP servers into --additional-mcp-config=@<scratch>/mcp.json
// (Copilot reads a file named with a leading @; the file is
// [Adapter.TurnFiles]') and excluded tools into --deny-tool=<server>(<tool>).
func mcpArgs(in adapters.Input) ([]string, error) {
	cfg, deny, err := mcpConfig(in.MCP)
	if err != nil || cfg == nil {
		return nil, err
	}
	file, err := adapters.MCPConfigPath(Name, in)
	if err != nil {
		return nil, err
	}
	return append([]string{"--additional-mcp-config=@" + file}, deny...), nil
}

// mcpConfig builds Copilot's MCP configuration ([adapters.MCPConfig]:
// entries of type "local"|"http" with command, args, env | url, headers,
// and tools) and the sorted --deny-tool flags. Values keep their ${NAME}
// references for Copilot to expand from its own environment; a bearer token
// variable becomes an Authorization header. Copilot cannot require a server
// or bound its startup. A nil configuration means no servers.
func mcpConfig(servers []credentials.MCPServer) ([]byte, []string, error) {
	var deny []string
	cfg, err := adapters.MCPConfig(Name, servers, func(s credentials.MCPServer) (map[string]any, error) {
		if s.Required {
			return nil, configErr("MCP server %s: Copilot CLI cannot require a server", s.Name)
		}
		if s.StartupTimeoutMS > 0 {
			return nil, configErr("MCP server %s: Copilot CLI has no startup timeout setting", s.Name)
		}
		entry := s.ConfigEntry("local")
		entry["tools"] = []string{"*"}
		if len(s.IncludeTools) > 0 {
			entry["tools"] = s.IncludeTools
		}
		for _, tool := range s.ExcludeTools {
			deny = append(deny, "--deny-tool="+s.Name+"("+tool+")")
		}
		return entry, nil
	})
	if err != nil || cfg == nil {
		return nil, nil, err
	}
	sort.Strings(deny)
	return cfg, deny, nil
}
