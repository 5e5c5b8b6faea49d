package adapters

import (
	"encoding/json"
	"path"

	"github.com/outpost-dev/outpost/credentials"
)

// MCPConfigFile is the turn file (in the turn's scratch directory, mode
// 0600) that holds the MCP configuration of a CLI that reads it from a file
// (Claude Code's --mcp-config, Copilot CLI's --additional-mcp-config). Its
// env and header values, literal or ${NAME} references, stay in that file
// and out of every argv.
const MCPConfigFile = "mcp.json"

// MCPConfig builds the MCP configuration file Claude Code and Copilot CLI
// read, {"mcpServers":{name: entry}}, with the entry entry returns for each
// server (which refuses what the CLI cannot express). Every server is
// validated first; a name declared twice is a configuration error of agent
// name. No servers: nil and no error.
func MCPConfig(name string, servers []credentials.MCPServer, entry func(credentials.MCPServer) (map[string]any, error)) ([]byte, error) {
	if len(servers) == 0 {
		return nil, nil
	}
	cfg := map[string]map[string]any{}
	for _, s := range servers {
		if err := s.Validate(); err != nil {
			return nil, err
		}
		e, err := entry(s)
		if err != nil {
			return nil, err
		}
		if _, dup := cfg[s.Name]; dup {
			return nil, ConfigError(name, "MCP server %s declared twice", s.Name)
		}
		cfg[s.Name] = e
	}
	b, err := json.Marshal(map[string]any{"mcpServers": cfg})
	if err != nil {
		return nil, ConfigError(name, "encode MCP config: %v", err)
	}
	return b, nil
}

// MCPTurnFiles is the [TurnFiles] of a turn whose MCP configuration
// [MCPConfig] returned: the [MCPConfigFile], or nothing when the turn
// declares no servers or they are invalid (Request reports the error).
func MCPTurnFiles(cfg []byte, err error) []TurnFile {
	if err != nil || cfg == nil {
		return nil
	}
	return []TurnFile{{Name: MCPConfigFile, Data: cfg}}
}

// MCPConfigPath returns where the CLI of agent name reads the turn's
// [MCPConfigFile]: in the turn's scratch directory, which it must have.
func MCPConfigPath(name string, in Input) (string, error) {
	if !path.IsAbs(in.Scratch) {
		return "", ConfigError(name, "MCP servers need the turn's scratch directory for their configuration file")
	}
	return path.Join(in.Scratch, MCPConfigFile), nil
}
