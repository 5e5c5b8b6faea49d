package claude

import (
	"encoding/json"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/credentials"
)

// MCPConfigFile is the turn file (in the turn's scratch directory, mode
// 0600) that holds the MCP configuration --mcp-config points at.
const MCPConfigFile = "mcp.json"

var _ adapters.TurnFiles = (*Adapter)(nil)

// TurnFiles implements [adapters.TurnFiles]: the MCP configuration, when
// the turn declares servers. Its env and header values, literal or ${NAME}
// references, stay in that 0600 file and out of every argv.
func (a *Adapter) TurnFiles(in adapters.Input) []adapters.TurnFile {
	cfg, _, _, err := mcpConfig(in.MCP)
	if err != nil || cfg == nil {
		return nil // Request reports the error
	}
	return []adapters.TurnFile{{Name: MCPConfigFile, Data: cfg}}
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
	if !path.IsAbs(in.Scratch) {
		return nil, nil, configErr("MCP servers need the turn's scratch directory for their configuration file")
	}
	args = []string{"--mcp-config=" + path.Join(in.Scratch, MCPConfigFile), "--strict-mcp-config"}
	if len(disallowed) > 0 {
		args = append(args, "--disallowedTools="+strings.Join(disallowed, ","))
	}
	return args, env, nil
}

// mcpConfig builds Claude Code's MCP configuration: an explicit "type" on
// every entry (an entry without one is read as stdio and silently skipped),
// the sorted mcp__<server>__<tool> names of excluded tools, and the
// environment. Secrets stay ${NAME} references, which Claude Code expands
// from its own environment. A startup timeout becomes MCP_TIMEOUT (shared
// by all servers: the largest wins). Tool allowlists cannot be expressed
// (--allowedTools does not restrict a bypass-mode run) and are refused.
// A nil configuration means no servers.
func mcpConfig(servers []credentials.MCPServer) (cfgJSON []byte, disallowed []string, env map[string]string, err error) {
	if len(servers) == 0 {
		return nil, nil, nil, nil
	}
	cfg := map[string]map[string]any{}
	timeout := 0
	for _, s := range servers {
		if err := s.Validate(); err != nil {
			return nil, nil, nil, err
		}
		if len(s.IncludeTools) > 0 {
			return nil, nil, nil, configErr("MCP server %s: Claude Code cannot restrict a server to some tools; use exclude_tools", s.Name)
		}
		if s.Required {
			return nil, nil, nil, configErr("MCP server %s: Claude Code cannot require a server (a failed one is reported as a warning)", s.Name)
		}
		if _, dup := cfg[s.Name]; dup {
			return nil, nil, nil, configErr("MCP server %s declared twice", s.Name)
		}
		entry := s.ConfigEntry("stdio")
		cfg[s.Name] = entry
		for _, tool := range s.ExcludeTools {
			disallowed = append(disallowed, "mcp__"+s.Name+"__"+tool)
		}
		timeout = max(timeout, s.StartupTimeoutMS)
	}
	b, err := json.Marshal(map[string]any{"mcpServers": cfg})
	if err != nil {
		return nil, nil, nil, configErr("encode MCP config: %v", err)
	}
	sort.Strings(disallowed)
	if timeout > 0 {
		env = map[string]string{"MCP_TIMEOUT": strconv.Itoa(timeout)}
	}
	return b, disallowed, env, nil
}
