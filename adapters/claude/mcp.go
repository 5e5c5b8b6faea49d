package claude

import (
	"encoding/json"
	"sort"
	"strconv"
	"strings"

	"github.com/outpost-dev/outpost/credentials"
)

// mcpArgs projects MCP servers into Claude Code's flags:
// --mcp-config=<json> (the = form, so the variadic flag cannot swallow later
// argv) with an explicit "type" on every entry (an entry without one is read
// as stdio and silently skipped), --strict-mcp-config so only these servers
// load, and --disallowedTools=mcp__<server>__<tool> for excluded tools.
// Secrets stay ${NAME} references, which Claude Code expands from its own
// environment. A startup timeout becomes MCP_TIMEOUT (shared by all
// servers: the largest wins). Tool allowlists cannot be expressed
// (--allowedTools does not restrict a bypass-mode run) and are refused.
func mcpArgs(servers []credentials.MCPServer) (args []string, env map[string]string, err error) {
	if len(servers) == 0 {
		return nil, nil, nil
	}
	cfg := map[string]map[string]any{}
	var disallowed []string
	timeout := 0
	for _, s := range servers {
		if err := s.Validate(); err != nil {
			return nil, nil, err
		}
		if len(s.IncludeTools) > 0 {
			return nil, nil, configErr("MCP server %s: Claude Code cannot restrict a server to some tools; use exclude_tools", s.Name)
		}
		if s.Required {
			return nil, nil, configErr("MCP server %s: Claude Code cannot require a server (a failed one is reported as a warning)", s.Name)
		}
		if _, dup := cfg[s.Name]; dup {
			return nil, nil, configErr("MCP server %s declared twice", s.Name)
		}
		entry := map[string]any{}
		if s.IsHTTP() {
			entry["type"] = "http"
			entry["url"] = s.URL
			if h := s.HTTPHeaders(); h != nil {
				entry["headers"] = h
			}
		} else {
			entry["type"] = "stdio"
			entry["command"] = s.Command
			entry["args"] = append([]string{}, s.Args...)
			if len(s.Env) > 0 {
				entry["env"] = s.Env
			}
		}
		cfg[s.Name] = entry
		for _, tool := range s.ExcludeTools {
			disallowed = append(disallowed, "mcp__"+s.Name+"__"+tool)
		}
		timeout = max(timeout, s.StartupTimeoutMS)
	}
	b, err := json.Marshal(map[string]any{"mcpServers": cfg})
	if err != nil {
		return nil, nil, configErr("encode MCP config: %v", err)
	}
	args = []string{"--mcp-config=" + string(b), "--strict-mcp-config"}
	if len(disallowed) > 0 {
		sort.Strings(disallowed)
		args = append(args, "--disallowedTools="+strings.Join(disallowed, ","))
	}
	if timeout > 0 {
		env = map[string]string{"MCP_TIMEOUT": strconv.Itoa(timeout)}
	}
	return args, env, nil
}
