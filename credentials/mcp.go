package credentials

import (
	"regexp"
	"sort"

	"github.com/outpost-dev/outpost/outposterr"
)

// MCPServer is a Model Context Protocol server declared once for a turn and
// projected by each adapter into its CLI's own form. Secrets are passed by
// variable name only: an Env or Headers value may reference a declared
// variable as ${NAME}, and BearerTokenVar names the variable holding an
// HTTP bearer token; the value itself never appears in a plan or in argv.
type MCPServer struct {
	// Name identifies the server (letters, digits, '_' and '-').
	Name string `json:"name"`
	// Command and Args start a stdio server inside the sandbox.
	Command string   `json:"command,omitempty"`
	Args    []string `json:"args,omitempty"`
	// Env is the stdio server's environment; values may be ${NAME} references.
	Env map[string]string `json:"env,omitempty"`
	// URL is an HTTP (streamable) server.
	URL string `json:"url,omitempty"`
	// Headers are sent to an HTTP server; values may be ${NAME} references.
	Headers map[string]string `json:"headers,omitempty"`
	// BearerTokenVar names the variable holding a bearer token for URL.
	BearerTokenVar string `json:"bearer_token_var,omitempty"`
	// IncludeTools restricts the server to these tools (not every CLI can).
	IncludeTools []string `json:"include_tools,omitempty"`
	// ExcludeTools hides these tools.
	ExcludeTools []string `json:"exclude_tools,omitempty"`
	// StartupTimeoutMS bounds the server's startup where the CLI allows it.
	StartupTimeoutMS int `json:"startup_timeout_ms,omitempty"`
	// Required fails the turn when the server cannot start, instead of
	// running without its tools (not every CLI can).
	Required bool `json:"required,omitempty"`
}

var (
	mcpName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
	varRef  = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)
)

// IsHTTP reports whether the server is reached over HTTP.
func (s MCPServer) IsHTTP() bool { return s.URL != "" }

// HTTPHeaders returns the headers of an HTTP server as a CLI's config file
// carries them: the declared headers plus, with BearerTokenVar, an
// Authorization header that references the variable ("Bearer ${NAME}"),
// never its value. Nil when there are none.
func (s MCPServer) HTTPHeaders() map[string]string {
	if len(s.Headers) == 0 && s.BearerTokenVar == "" {
		return nil
	}
	h := make(map[string]string, len(s.Headers)+1)
	for k, v := range s.Headers {
		h[k] = v
	}
	if s.BearerTokenVar != "" {
		h["Authorization"] = "Bearer ${" + s.BearerTokenVar + "}"
	}
	return h
}

// Validate checks the declaration.
func (s MCPServer) Validate() error {
	switch {
	case !mcpName.MatchString(s.Name):
		return outposterr.New(outposterr.Configuration, "MCP server name %q: use letters, digits, '_' and '-'", s.Name)
	case s.Command == "" && s.URL == "":
		return outposterr.New(outposterr.Configuration, "MCP server %s: set command (stdio) or url (http)", s.Name)
	case s.Command != "" && s.URL != "":
		return outposterr.New(outposterr.Configuration, "MCP server %s: command and url are exclusive", s.Name)
	case s.BearerTokenVar != "" && s.URL == "":
		return outposterr.New(outposterr.Configuration, "MCP server %s: bearer_token_var needs url", s.Name)
	case len(s.Headers) > 0 && s.URL == "":
		return outposterr.New(outposterr.Configuration, "MCP server %s: headers need url", s.Name)
	case len(s.Env) > 0 && s.Command == "":
		return outposterr.New(outposterr.Configuration, "MCP server %s: env needs command", s.Name)
	}
	return nil
}

// Vars returns the variable names the server references, sorted.
func (s MCPServer) Vars() []string {
	set := map[string]bool{}
	if s.BearerTokenVar != "" {
		set[s.BearerTokenVar] = true
	}
	for _, m := range []map[string]string{s.Env, s.Headers} {
		for _, v := range m {
			for _, ref := range varRef.FindAllStringSubmatch(v, -1) {
				set[ref[1]] = true
			}
		}
	}
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// CheckMCPVars reports the first variable an MCP server needs that vars
// does not hold, as a configuration error naming the agent.
func CheckMCPVars(agent string, servers []MCPServer, vars map[string]string) error {
	for _, s := range servers {
		if err := s.Validate(); err != nil {
			return err
		}
		for _, name := range s.Vars() {
			if _, ok := Var(vars, name); !ok {
				return outposterr.New(outposterr.Configuration,
					"missing %s for %s MCP server %s; declare it in .outpost/.env or forward it with --env %s", name, agent, s.Name, name)
			}
		}
	}
	return nil
}
