package credentials

import (
	"net/url"
	"regexp"
	"sort"
	"strings"

	"github.com/outpost-dev/outpost/outposterr"
)

// MCPServer is a Model Context Protocol server declared once for a turn and
// projected by each adapter into its CLI's own form. Secrets follow the
// driver rule: they are passed by variable name only — an Env or Headers
// value may reference a declared variable as ${NAME}, and BearerTokenVar
// names the variable holding an HTTP bearer token — and never in Command,
// Args or URL, which are visible in process listings ([MCPServer.Validate]
// refuses a reference there). No value of Env or Headers, literal or
// referenced, is put in any argv: adapters hand the configuration to their
// CLI in a 0600 per-turn file or through its environment.
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
	envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	// headerName is an HTTP field name (RFC 9110 token).
	headerName = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
)

// Bounds of one declaration: generous for real servers, small enough that a
// runaway file cannot turn into a huge config.
const (
	maxMCPValue = 32 << 10
	maxMCPItems = 256
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

// ConfigEntry returns the server's entry in the {"mcpServers": {name:
// entry}} JSON configuration Claude Code and Copilot read: type "http" with
// url and [MCPServer.HTTPHeaders], or type commandType (the CLI's word for
// a command server: "stdio", "local") with command, args and env. Values
// keep their ${NAME} references for the CLI to expand.
func (s MCPServer) ConfigEntry(commandType string) map[string]any {
	entry := map[string]any{}
	if s.IsHTTP() {
		entry["type"] = "http"
		entry["url"] = s.URL
		if h := s.HTTPHeaders(); h != nil {
			entry["headers"] = h
		}
		return entry
	}
	entry["type"] = commandType
	entry["command"] = s.Command
	entry["args"] = append([]string{}, s.Args...)
	if len(s.Env) > 0 {
		entry["env"] = s.Env
	}
	return entry
}

// Validate checks the declaration: a name, exactly one transport (a stdio
// command, or an http or https URL without credentials in it), no variable
// reference where a process listing would show it (Command, Args, URL),
// variable names and header names that are names, and values without
// control characters that a CLI could not carry (NUL, newlines in headers).
// An env name must not be [Reserved]; relocation lists the CLIs' relocation
// variables (the registry's), which are reserved too.
func (s MCPServer) Validate(relocation ...string) error {
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
	case s.BearerTokenVar != "" && !envName.MatchString(s.BearerTokenVar):
		return outposterr.New(outposterr.Configuration, "MCP server %s: bearer_token_var %q is not a variable name", s.Name, s.BearerTokenVar)
	case s.StartupTimeoutMS < 0:
		return outposterr.New(outposterr.Configuration, "MCP server %s: negative startup_timeout_ms", s.Name)
	case len(s.Args)+len(s.Env)+len(s.Headers)+len(s.IncludeTools)+len(s.ExcludeTools) > maxMCPItems:
		return outposterr.New(outposterr.Configuration, "MCP server %s: more than %d args, variables, headers and tools", s.Name, maxMCPItems)
	}
	// Argv is visible to every process on the machine (container processes
	// included): a secret goes in env or headers as ${NAME}, never here.
	for i, a := range append([]string{s.Command}, s.Args...) {
		what := "command"
		if i > 0 {
			what = "args"
		}
		if strings.Contains(a, "${") {
			return outposterr.New(outposterr.Configuration,
				"MCP server %s: %s reference a variable; argv is visible to every process, so pass secrets in env (or headers) as ${NAME}", s.Name, what)
		}
		if err := checkValue(s.Name, what, a, false); err != nil {
			return err
		}
	}
	if s.URL != "" {
		if err := checkURL(s); err != nil {
			return err
		}
	}
	for k, v := range s.Env {
		if !envName.MatchString(k) {
			return outposterr.New(outposterr.Configuration, "MCP server %s: env name %q is not a variable name", s.Name, k)
		}
		if Reserved(k, relocation...) {
			// The server runs inside the CLI's sandbox: the same names a
			// project may not set for the CLI (PATH, LD_PRELOAD, ...).
			return outposterr.New(outposterr.Configuration, "MCP server %s: env %s is reserved (Outpost or the sandbox sets it, or it loads other code)", s.Name, k)
		}
		if err := checkValue(s.Name, "env "+k, v, false); err != nil {
			return err
		}
	}
	for k, v := range s.Headers {
		if !headerName.MatchString(k) {
			return outposterr.New(outposterr.Configuration, "MCP server %s: header name %q is not a header name", s.Name, k)
		}
		if err := checkValue(s.Name, "header "+k, v, true); err != nil {
			return err
		}
	}
	for _, tool := range append(append([]string(nil), s.IncludeTools...), s.ExcludeTools...) {
		if tool == "" || strings.ContainsAny(tool, "\x00\r\n") || len(tool) > 256 {
			return outposterr.New(outposterr.Configuration, "MCP server %s: tool name %q is not a tool name", s.Name, tool)
		}
	}
	return nil
}

// checkURL accepts http and https URLs with a host and no user
// information; a variable reference (a token in the query) is refused like
// one in args: a URL is configuration, not a secret.
func checkURL(s MCPServer) error {
	if strings.Contains(s.URL, "${") {
		return outposterr.New(outposterr.Configuration,
			"MCP server %s: url references a variable; pass secrets in headers (or bearer_token_var) as ${NAME}", s.Name)
	}
	u, err := url.Parse(s.URL)
	switch {
	case err != nil:
		return outposterr.New(outposterr.Configuration, "MCP server %s: url is not a URL", s.Name)
	case u.Scheme != "http" && u.Scheme != "https":
		return outposterr.New(outposterr.Configuration, "MCP server %s: url scheme %q: only http and https servers are supported", s.Name, u.Scheme)
	case u.Host == "":
		return outposterr.New(outposterr.Configuration, "MCP server %s: url has no host", s.Name)
	case u.User != nil:
		return outposterr.New(outposterr.Configuration,
			"MCP server %s: url carries credentials; pass them in headers (or bearer_token_var) as ${NAME}", s.Name)
	}
	return checkValue(s.Name, "url", s.URL, true)
}

// checkValue bounds a value and refuses NUL (no environment or argv can
// carry it) and, in a single-line field, line breaks. It never quotes the
// value: it may be a secret.
func checkValue(server, what, v string, oneLine bool) error {
	switch {
	case len(v) > maxMCPValue:
		return outposterr.New(outposterr.Configuration, "MCP server %s: %s is longer than %d KiB", server, what, maxMCPValue>>10)
	case strings.ContainsRune(v, 0):
		return outposterr.New(outposterr.Configuration, "MCP server %s: %s contains a NUL byte", server, what)
	case oneLine && strings.ContainsAny(v, "\r\n"):
		return outposterr.New(outposterr.Configuration, "MCP server %s: %s contains a line break", server, what)
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
