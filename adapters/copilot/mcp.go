package copilot

import (
	"encoding/json"
	"sort"

	"github.com/outpost-dev/outpost/credentials"
)

// mcpArgs projects MCP servers into --additional-mcp-config=<json>
// ({"mcpServers":{name:{type:"local"|"http", command, args, env | url,
// headers, tools}}}) and excluded tools into --deny-tool=<server>(<tool>).
// Values keep their ${NAME} references for Copilot to expand from its own
// environment; a bearer token variable becomes an Authorization header.
// Copilot cannot require a server.
func mcpArgs(servers []credentials.MCPServer) ([]string, error) {
	if len(servers) == 0 {
		return nil, nil
	}
	cfg := map[string]map[string]any{}
	var deny []string
	for _, s := range servers {
		if err := s.Validate(); err != nil {
			return nil, err
		}
		if s.Required {
			return nil, configErr("MCP server %s: Copilot CLI cannot require a server", s.Name)
		}
		if s.StartupTimeoutMS > 0 {
			return nil, configErr("MCP server %s: Copilot CLI has no startup timeout setting", s.Name)
		}
		if _, dup := cfg[s.Name]; dup {
			return nil, configErr("MCP server %s declared twice", s.Name)
		}
		entry := map[string]any{"tools": []string{"*"}}
		if len(s.IncludeTools) > 0 {
			entry["tools"] = s.IncludeTools
		}
		if s.IsHTTP() {
			entry["type"] = "http"
			entry["url"] = s.URL
			if h := s.HTTPHeaders(); h != nil {
				entry["headers"] = h
			}
		} else {
			entry["type"] = "local"
			entry["command"] = s.Command
			entry["args"] = append([]string{}, s.Args...)
			if len(s.Env) > 0 {
				entry["env"] = s.Env
			}
		}
		cfg[s.Name] = entry
		for _, tool := range s.ExcludeTools {
			deny = append(deny, "--deny-tool="+s.Name+"("+tool+")")
		}
	}
	b, err := json.Marshal(map[string]any{"mcpServers": cfg})
	if err != nil {
		return nil, configErr("encode MCP config: %v", err)
	}
	sort.Strings(deny)
	return append([]string{"--additional-mcp-config=" + string(b)}, deny...), nil
}
