// Package antigravity is the adapter for Google Antigravity's CLI (agy).
//
// Built from the documented protocol, not from captures: agy cannot be
// downloaded on the machines this was written on. The fixtures under
// testdata/ are written from the documented event shapes and the public
// issue texts (see testdata/README.md) so that they can be re-captured the
// day a real binary is available.
//
// Invocation is driver mode: `agy --input-format stream-json --output-format
// stream-json --dangerously-skip-permissions`, with one JSON user line on
// stdin, which is then closed. Events carry their kind under the key
// "event" and their payload under the same-named key: init (the
// conversation id), step_update (response text deltas, tool steps), result
// (status, response, error, usage).
//
// Decisions:
//   - A turn succeeds only with a final result whose status is SUCCESS and
//     whose response is not empty: agy exits 0 after a quota failure.
//   - Resume is --conversation <id> in the same lease (warm). There is no
//     portable capture: the adapter implements no Storage, so the harness
//     never claims a conversation can move to a new sandbox. Fork is refused.
//   - Usage: input = input_tokens, cached = cache_read_tokens, output =
//     output_tokens + thinking_tokens; agy reports no cost.
//   - Auto-update is off (AGY_CLI_DISABLE_AUTO_UPDATE=true). agy documents
//     no endpoint override, so an Endpoint is refused.
package antigravity

import (
	"encoding/json"
	"regexp"
	"strings"
	"time"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/adapters/reset"
	"github.com/outpost-dev/outpost/credentials"
	"github.com/outpost-dev/outpost/sandbox"
	"github.com/outpost-dev/outpost/usage"
)

// Name is the adapter name; Binary the program; Version the pin the
// documented protocol was written against.
const (
	Name    = "antigravity"
	Binary  = "agy"
	Version = "1.2.12"
)

// Adapter drives agy.
type Adapter struct{}

var (
	_ adapters.Configurator      = (*Adapter)(nil)
	_ adapters.Adapter           = (*Adapter)(nil)
	_ adapters.Authenticator     = (*Adapter)(nil)
	_ adapters.SessionRecognizer = (*Adapter)(nil)
)

// New returns the adapter.
func New() *Adapter { return &Adapter{} }

// Name implements adapters.Adapter.
func (a *Adapter) Name() string { return Name }

// Binary implements adapters.Adapter.
func (a *Adapter) Binary() string { return Binary }

// Capabilities implements adapters.Adapter.
func (a *Adapter) Capabilities() adapters.Capabilities {
	return adapters.Capabilities{Resumable: true, RequiresFinished: true, Usage: adapters.UsageEvents}
}

func configErr(format string, args ...any) error { return adapters.ConfigError(Name, format, args...) }

// Request implements adapters.Adapter.
func (a *Adapter) Request(in adapters.Input) (sandbox.Command, error) {
	if err := in.ValidateFor(Name); err != nil {
		return sandbox.Command{}, err
	}
	if in.Fork {
		return sandbox.Command{}, configErr("agy does not support automated fork")
	}
	if in.Endpoint != nil {
		return sandbox.Command{}, configErr("agy has no documented model endpoint override")
	}
	args := []string{Binary, "--input-format", "stream-json", "--output-format", "stream-json"}
	switch in.Permission {
	case "":
		args = append(args, "--dangerously-skip-permissions")
	case "accept-edits", "plan":
		args = append(args, "--mode", in.Permission)
	default:
		return sandbox.Command{}, configErr("unknown permission mode %q (accept-edits or plan; empty for bypass)", in.Permission)
	}
	if in.Model != "" {
		args = append(args, "--model", in.Model)
	}
	if in.Effort != "" {
		return sandbox.Command{}, configErr("agy has no reasoning effort setting")
	}
	if _, err := a.Configuration(in); err != nil {
		return sandbox.Command{}, err
	}
	if in.Continue != "" {
		args = append(args, "--conversation", in.Continue)
	}
	line, err := json.Marshal(map[string]any{"event": "user", "message": map[string]string{"content": in.Prompt}})
	if err != nil {
		return sandbox.Command{}, configErr("encode prompt: %v", err)
	}
	env := map[string]string{"AGY_CLI_DISABLE_AUTO_UPDATE": "true"}
	if in.Home != "" {
		env["HOME"] = in.Home
	}
	for k, v := range in.Env {
		env[k] = v
	}
	return sandbox.Command{Args: args, Env: env, Dir: in.Workdir, Stdin: append(line, '\n')}, nil
}

// NewDecoder implements adapters.Adapter.
func (a *Adapter) NewDecoder() adapters.Decoder { return &decoder{} }

type decoder struct{ conversation string }

type line struct {
	Event string `json:"event"`
	Init  *struct {
		ConversationID string `json:"conversation_id"`
	} `json:"init"`
	Step *struct {
		StepType  string `json:"step_type"`
		StepIndex int    `json:"step_index"`
		State     string `json:"state"`
		TextDelta string `json:"text_delta"`
		ToolName  string `json:"tool_name"`
		ToolInfo  *struct {
			Parameters json.RawMessage `json:"parameters"`
			Result     json.RawMessage `json:"result"`
		} `json:"tool_info"`
		Output string `json:"output"`
	} `json:"step_update"`
	Result *struct {
		Status   string  `json:"status"`
		Response string  `json:"response"`
		Error    string  `json:"error"`
		Duration float64 `json:"duration_seconds"`
		NumTurns int     `json:"num_turns"`
		Usage    *struct {
			Input    int64 `json:"input_tokens"`
			Cached   int64 `json:"cache_read_tokens"`
			Output   int64 `json:"output_tokens"`
			Thinking int64 `json:"thinking_tokens"`
		} `json:"usage"`
	} `json:"result"`
}

func raw(b []byte) []adapters.Event { return []adapters.Event{adapters.RawEvent(b)} }

// Decode implements adapters.Decoder.
func (d *decoder) Decode(b []byte) []adapters.Event {
	if len(strings.TrimSpace(string(b))) == 0 {
		return nil // a blank line carries nothing
	}
	var l line
	if !adapters.ParseLine(b, &l) {
		return raw(b)
	}
	switch {
	case l.Event == "init" && l.Init != nil && l.Init.ConversationID != "":
		d.conversation = l.Init.ConversationID
		return []adapters.Event{{Kind: adapters.KindConversation, Conversation: l.Init.ConversationID}}
	case l.Event == "step_update" && l.Step != nil:
		return d.step(l, b)
	case l.Event == "result" && l.Result != nil:
		return d.result(l)
	}
	return raw(b)
}

func (d *decoder) step(l line, b []byte) []adapters.Event {
	s := l.Step
	callID := d.conversation + ":" + itoa(s.StepIndex)
	switch s.StepType {
	case "agent_response":
		if s.TextDelta != "" {
			return []adapters.Event{{Kind: adapters.KindTextDelta, Text: s.TextDelta}}
		}
		if s.Output != "" && s.State == "DONE" {
			return []adapters.Event{{Kind: adapters.KindText, Text: s.Output}}
		}
	case "tool":
		switch s.State {
		case "ACTIVE":
			var input json.RawMessage
			if s.ToolInfo != nil && json.Valid(s.ToolInfo.Parameters) {
				input = s.ToolInfo.Parameters
			}
			return []adapters.Event{{Kind: adapters.KindTool, Tool: &adapters.ToolCall{CallID: callID, Name: s.ToolName, Input: input}}}
		case "DONE", "ERROR":
			text := s.Output
			if text == "" && s.ToolInfo != nil && len(s.ToolInfo.Result) > 0 {
				var str string
				if json.Unmarshal(s.ToolInfo.Result, &str) == nil {
					text = str
				} else {
					text = string(s.ToolInfo.Result)
				}
			}
			return []adapters.Event{adapters.ToolResultEvent(callID, s.ToolName, s.State == "ERROR", text)}
		}
	}
	return raw(b)
}

func (d *decoder) result(l line) []adapters.Event {
	r := l.Result
	var out []adapters.Event
	if r.Usage != nil {
		out = append(out, adapters.Event{Kind: adapters.KindUsage, Usage: &usage.Report{Scope: usage.ScopeTurn, Usage: usage.Usage{
			Input: r.Usage.Input, Cached: r.Usage.Cached, Output: r.Usage.Output + r.Usage.Thinking, Reasoning: r.Usage.Thinking}}})
	}
	ok := strings.EqualFold(r.Status, "SUCCESS") && strings.TrimSpace(r.Response) != ""
	if ok {
		out = append(out, adapters.Event{Kind: adapters.KindResult, Text: r.Response})
	} else {
		text := r.Error
		if text == "" {
			text = "agy reported " + strings.ToLower(r.Status)
			if strings.EqualFold(r.Status, "SUCCESS") {
				text = "agy reported success with an empty response"
			}
		}
		out = append(out, adapters.Event{Kind: adapters.KindFailure, Text: text, Failure: &adapters.FailureDetail{Code: r.Status}})
	}
	return append(out, adapters.FinishedEvent(ok, r.Status))
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

var (
	quotaRE = regexp.MustCompile(`(?i)resource_exhausted|individual quota reached|exhausted your capacity|exceeded your current quota|quota will reset|resource has been exhausted`)
	unavRE  = regexp.MustCompile(`(?i)\bunavailable\b|overloaded|no capacity available|model_capacity_exhausted|\b50[0-4]\b|internal error|deadline exceeded|connection (refused|reset)`)
	authRE  = regexp.MustCompile(`(?i)authentication timed out|not authenticated|unauthenticated|api key not valid|permission denied|\b401\b`)
	resetRE = regexp.MustCompile(`(?i)(?:resets in|reset after)\s+([0-9hmsd.]+)`)
)

// Quota implements adapters.Adapter: RESOURCE_EXHAUSTED and the "Individual
// quota reached… Resets in 2h39m52s" family, with the reset made absolute.
func (a *Adapter) Quota(text string, at time.Time) (bool, time.Time) {
	if !quotaRE.MatchString(text) {
		return false, time.Time{}
	}
	if m := resetRE.FindStringSubmatch(text); m != nil {
		if t, ok := reset.Compact(m[1], at); ok {
			return true, t
		}
	}
	return true, time.Time{}
}

// Unavailable implements adapters.Adapter.
func (a *Adapter) Unavailable(text string) (string, bool) {
	lower := strings.ToLower(text)
	switch m := strings.ToLower(unavRE.FindString(text)); {
	case m == "":
		return "", false
	case strings.Contains(lower, "overloaded"), strings.Contains(lower, "capacity"):
		return "overloaded", true
	case strings.Contains(m, "connection"):
		return "connection error", true
	default:
		return "unavailable", true
	}
}

// Auth implements adapters.Adapter.
func (a *Adapter) Auth(text string) (string, bool) {
	m := strings.ToLower(authRE.FindString(text))
	switch {
	case m == "":
		return "", false
	case strings.Contains(m, "timed out"):
		return "authentication timed out (no usable stored login)", true
	case strings.Contains(m, "api key"):
		return "invalid API key", true
	}
	return "not authenticated", true
}

// SessionMissing implements adapters.SessionRecognizer.
func (a *Adapter) SessionMissing(text string) bool {
	t := strings.ToLower(text)
	return strings.Contains(t, "conversation") && (strings.Contains(t, "not found") || strings.Contains(t, "no such"))
}

// Credential files and variables of agy.
const (
	TokenFile   = ".gemini/antigravity-cli/antigravity-oauth-token"
	SettingsDst = ".gemini/antigravity-cli/settings.json"
	APIKeyVar   = "GEMINI_API_KEY"
)

// Credentials implements adapters.Authenticator: account = the host OAuth
// token file (file storage, not the keyring), installed at the same path;
// usage = GEMINI_API_KEY plus a generated settings file selecting it.
func (a *Adapter) Credentials(auth credentials.Auth, vars map[string]string) (credentials.Plan, error) {
	switch auth.Form {
	case credentials.None:
		return credentials.Plan{Strip: []string{APIKeyVar}}, nil
	case credentials.Account:
		if auth.Source == credentials.SourceVariable {
			return credentials.Plan{}, credentials.Unsupported(Name, auth, "account", "account:file", "usage")
		}
		if _, ok := credentials.Var(vars, APIKeyVar); ok {
			return credentials.Plan{}, configErr("%s would be used instead of the account login; remove it or choose usage authentication", APIKeyVar)
		}
		return credentials.Plan{Strip: []string{APIKeyVar}, Files: []credentials.HostFile{{
			Path: TokenFile, Dest: TokenFile, Login: "agy, signing in with file-based token storage",
			Alternative: "usage with " + APIKeyVar}}}, nil
	case credentials.Usage:
		if auth.Source == credentials.SourceFile {
			return credentials.Plan{}, credentials.Unsupported(Name, auth, "account", "account:file", "usage")
		}
		key, ok := credentials.Var(vars, APIKeyVar)
		if !ok {
			return credentials.Plan{}, credentials.Missing(Name, APIKeyVar, "create a key in Google AI Studio")
		}
		return credentials.Plan{Env: map[string]string{APIKeyVar: key},
			Generated: []credentials.Generated{{Dest: SettingsDst, Content: []byte(`{"modelProvider":"gemini"}` + "\n")}}}, nil
	}
	return credentials.Plan{}, credentials.Unsupported(Name, auth, "account", "account:file", "usage", "none")
}

// DeclaredVars implements [adapters.Declarer].
func (a *Adapter) DeclaredVars() []string { return []string{APIKeyVar} }

// MCPConfigFile is agy's MCP configuration, relative to the home.
const MCPConfigFile = ".gemini/config/mcp_config.json"

// Configuration implements [adapters.Configurator]: MCP servers merge into
// the mcpServers section of ~/.gemini/config/mcp_config.json
// ({command,args,env} or {serverUrl,headers}, plus disabledTools). Values
// keep their ${NAME} references. agy cannot require a server, filter to an
// allowlist or bound startup: those are refused.
func (a *Adapter) Configuration(in adapters.Input) (credentials.ConfigPlan, error) {
	if len(in.MCP) == 0 {
		return credentials.ConfigPlan{}, nil
	}
	entries := map[string]any{}
	for _, s := range in.MCP {
		if err := s.Validate(); err != nil {
			return credentials.ConfigPlan{}, err
		}
		switch {
		case s.Required:
			return credentials.ConfigPlan{}, configErr("MCP server %s: agy cannot require a server", s.Name)
		case len(s.IncludeTools) > 0:
			return credentials.ConfigPlan{}, configErr("MCP server %s: agy has no tool allowlist; use exclude_tools", s.Name)
		case s.StartupTimeoutMS > 0:
			return credentials.ConfigPlan{}, configErr("MCP server %s: agy has no startup timeout setting", s.Name)
		}
		if _, dup := entries[s.Name]; dup {
			return credentials.ConfigPlan{}, configErr("MCP server %s declared twice", s.Name)
		}
		e := map[string]any{"disabled": false}
		if s.IsHTTP() {
			e["serverUrl"] = s.URL
			if h := s.HTTPHeaders(); h != nil {
				e["headers"] = h
			}
		} else {
			e["command"] = s.Command
			e["args"] = append([]string{}, s.Args...)
			if len(s.Env) > 0 {
				e["env"] = s.Env
			}
		}
		if len(s.ExcludeTools) > 0 {
			e["disabledTools"] = append([]string{}, s.ExcludeTools...)
		}
		entries[s.Name] = e
	}
	return credentials.ConfigPlan{Files: []credentials.ConfigFile{{Dest: MCPConfigFile, Section: []string{"mcpServers"}, Entries: entries}}}, nil
}
