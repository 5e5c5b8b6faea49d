package claude

import (
	"sort"
	"strconv"
	"strings"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/credentials"
)

var _ adapters.TurnFiles = (*Adapter)(nil)

// TurnFiles implements [adapters.TurnFiles]: the MCP configuration
// ([adapters.MCPConfigFile]), when the turn declares servers.
func (a *Adapter) TurnFiles(in adapters.Input) []adapters.TurnFile {
	cfg, _, _, err := mcpConfig(in.MCP)
	return adapters.MCPTurnFiles(cfg, err)
}

// mcpArgs projects MCP servers into Claude Code's flags:
// --mcp-config=<scratch>/mcp.json (the = form, so the variadic flag cannot
// swallow later argv; the file is [Adapter.TurnFiles]'), --strict-mcp-config
// so only these servers load, and --disallowedTools=mcp__<server>__<tool>
// for excluded tools.
func mcpArgs(in adapters.Input) (args []string, env map[string]string, err error) {
	cfg, disallowed, env, err := mcpConfig(in.MCP)
	if err != nil || cfg == nil {
		return nil, nil, err
	}
	file, err := adapters.MCPConfigPath(Name, in)
	if err != nil {
		return nil, nil, err
	}
	args = []string{"--mcp-config=" + file, "--strict-mcp-config"}
	if len(disallowed) > 0 {
		args = append(args, "--disallowedTools="+strings.Join(disallowed, ","))
	}
	return args, env, nil
}

// mcpConfig builds Claude Code's MCP configuration ([adapters.MCPConfig]):
// an explicit "type" on every entry (an entry without one is read as stdio
// and silently skipped), the sorted mcp__<server>__<tool> names of excluded
// tools, and the environment. Secrets stay ${NAME} references, which Claude
// Code expands from its own environment. A startup timeout becomes
// MCP_TIMEOUT (shared by all servers: the largest wins). Tool allowlists
// cannot be expressed (--allowedTools does not restrict a bypass-mode run)
// and are refused. A nil configuration means no servers.
func mcpConfig(servers []credentials.MCPServer) (cfgJSON []byte, disallowed []string, env map[string]string, err error) {
	timeout := 0
	cfgJSON, err = adapters.MCPConfig(Name, servers, func(s credentials.MCPServer) (map[string]any, error) {
		if len(s.IncludeTools) > 0 {
			return nil, configErr("MCP server %s: Claude Code cannot restrict a server to some tools; use exclude_tools", s.Name)
		}
		if s.Required {
			return nil, configErr("MCP server %s: Claude Code cannot require a server (a failed one is reported as a warning)", s.Name)
		}
		for _, tool := range s.ExcludeTools {
			disallowed = append(disallowed, "mcp__"+s.Name+"__"+tool)
		}
		timeout = max(timeout, s.StartupTimeoutMS)
		return s.ConfigEntry("stdio"), nil
	})
	if err != nil || cfgJSON == nil {
		return nil, nil, nil, err
	}
	sort.Strings(disallowed)
	if timeout > 0 {
		env = map[string]string{"MCP_TIMEOUT": strconv.Itoa(timeout)}
	}
	return cfgJSON, disallowed, env, nil
}
