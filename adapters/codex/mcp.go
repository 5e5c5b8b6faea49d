package codex

import (
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/outpost-dev/outpost/credentials"
)

// wholeRef matches a value that is exactly one ${NAME} reference.
var wholeRef = regexp.MustCompile(`^\$\{([A-Za-z_][A-Za-z0-9_]*)\}$`)

// mcpConfig projects MCP servers into Codex's -c overrides under
// mcp_servers.<name>: command/args with env_vars forwarding variables by
// name (stdio), url with bearer_token_env_var and env_http_headers (HTTP),
// enabled_tools/disabled_tools, startup_timeout_ms, and tool calls approved
// (exec would otherwise cancel them).
//
// Codex has no flag that reads a configuration file, so no env or header
// value may go into a -c pair (argv is visible to every process): every
// value travels in Codex's own environment, returned in env. A ${NAME}
// reference is forwarded by name; a literal env value K=V sets Codex's own
// K (forwarded the same way), and a header value is put in a variable
// OUTPOST_MCP_<server>_<header> (indexes) that env_http_headers names.
// Codex does not expand ${NAME} inside values, so a secret must be passed
// whole: an env entry NAME=${NAME}, or a header whose value is exactly
// ${VAR}; anything else is refused.
func mcpConfig(servers []credentials.MCPServer) ([]string, map[string]string, error) {
	var out []string
	env := map[string]string{}
	seen := map[string]bool{}
	for si, s := range servers {
		if err := s.Validate(); err != nil {
			return nil, nil, err
		}
		if seen[s.Name] {
			return nil, nil, configErr("MCP server %s declared twice", s.Name)
		}
		seen[s.Name] = true
		p := "mcp_servers." + s.Name + "."
		if s.IsHTTP() {
			out = append(out, p+"url="+tomlString(s.URL))
			if s.BearerTokenVar != "" {
				out = append(out, p+"bearer_token_env_var="+tomlString(s.BearerTokenVar))
			}
			fromEnv := map[string]string{}
			keys := make([]string, 0, len(s.Headers))
			for k := range s.Headers {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for hi, k := range keys {
				v := s.Headers[k]
				switch m := wholeRef.FindStringSubmatch(v); {
				case m != nil:
					fromEnv[k] = m[1]
				case strings.Contains(v, "${"):
					return nil, nil, configErr("MCP server %s: header %s mixes text and a variable; Codex can only send a whole variable", s.Name, k)
				default:
					name := mcpHeaderPrefix + strconv.Itoa(si) + "_" + strconv.Itoa(hi)
					env[name] = v
					fromEnv[k] = name
				}
			}
			if len(fromEnv) > 0 {
				out = append(out, p+"env_http_headers="+tomlTable(fromEnv))
			}
		} else {
			out = append(out, p+"command="+tomlString(s.Command), p+"args="+tomlArray(s.Args))
			var forward []string
			for k, v := range s.Env {
				switch m := wholeRef.FindStringSubmatch(v); {
				case m != nil && m[1] == k:
				case strings.Contains(v, "${"):
					return nil, nil, configErr("MCP server %s: env %s must be ${%s} (Codex forwards variables by their own name)", s.Name, k, k)
				default:
					if ownVar(k) {
						return nil, nil, configErr("MCP server %s: env %s would set Codex's own %s; Codex forwards MCP variables from its environment", s.Name, k, k)
					}
					if old, ok := env[k]; ok && old != v {
						return nil, nil, configErr("MCP server %s: env %s differs from another server's; Codex forwards one %s to all", s.Name, k, k)
					}
					env[k] = v
				}
				forward = append(forward, k)
			}
			if len(forward) > 0 {
				sort.Strings(forward)
				out = append(out, p+"env_vars="+tomlArray(forward))
			}
		}
		if len(s.IncludeTools) > 0 {
			out = append(out, p+"enabled_tools="+tomlArray(s.IncludeTools))
		}
		if len(s.ExcludeTools) > 0 {
			out = append(out, p+"disabled_tools="+tomlArray(s.ExcludeTools))
		}
		if s.StartupTimeoutMS > 0 {
			out = append(out, p+"startup_timeout_ms="+strconv.Itoa(s.StartupTimeoutMS))
		}
		if s.Required {
			out = append(out, p+"required=true")
		}
		out = append(out, p+`default_tools_approval_mode="approve"`)
	}
	return out, env, nil
}

// mcpHeaderPrefix starts the variables that carry header values.
const mcpHeaderPrefix = "OUTPOST_MCP_"

// ownVar reports whether Codex (or Outpost for Codex) reads or sets the
// variable name itself, so an MCP server's literal value must not reach
// Codex's environment under it.
func ownVar(name string) bool {
	if strings.HasPrefix(name, "OUTPOST_") {
		return name == KeyEnv || strings.HasPrefix(name, mcpHeaderPrefix)
	}
	return credentials.Reserved(name) ||
		strings.HasPrefix(name, "CODEX_") || strings.HasPrefix(name, "OPENAI_") || strings.HasPrefix(name, "RUST_")
}
func tomlArray(items []string) string {
	q := make([]string, len(items))
	for i, it := range items {
		q[i] = tomlString(it)
	}
	return "[" + strings.Join(q, ",") + "]"
}

func tomlTable(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = tomlString(k) + "=" + tomlString(m[k])
	}
	return "{" + strings.Join(parts, ",") + "}"
}
