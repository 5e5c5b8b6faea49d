// Package codex is the adapter for OpenAI's Codex CLI (`codex`), pinned at
// [Version].
//
// # Request
//
// Every turn is one `codex exec --json` process with the prompt on stdin
// ("-"), which is then closed:
//
//	codex -c k=v… exec --json --skip-git-repo-check <permission> [-m model] -
//	codex -c k=v… exec --json --skip-git-repo-check <permission> resume <id> [-m model] -
//	codex -c k=v… exec --json --skip-git-repo-check <permission> fork <id> [-m model] -
//
// All -c pairs come before `exec`: -c is a global flag, and at 0.159 a -c
// after `resume` discarded every -c given before it. The exec flags come
// before the resume/fork subcommand (0.169.0 applies them there; some, such as
// -s, are rejected after it); -m is accepted after the subcommand and put
// there. Extra arguments ([WithArgs]) go last, before "-".
//
// Always set (-c): check_for_update_on_startup=false (no update check),
// shell_environment_policy.inherit="core" (model-run commands do not inherit
// the CLI's whole environment, keys included), and the switches that keep a
// headless run off the network beyond its model endpoint:
// features.plugins=false, features.remote_plugin=false,
// features.plugin_sharing=false, features.apps=false, analytics.enabled=false,
// feedback.enabled=false (with them, 0.169.0 makes no DNS lookup besides the
// endpoint's; without them it resolves github.com, api.github.com and the
// vendor's backend on start).
//
//   - Permission: the empty mode, "bypass" and "danger-full-access-bypass"
//     are --dangerously-bypass-approvals-and-sandbox (the sandbox is the
//     boundary; exec already never asks for approval). "read-only",
//     "workspace-write" and "danger-full-access" select Codex's own sandbox
//     with -c sandbox_mode="…" (which needs bubblewrap and user namespaces in
//     the lease). Anything else is a configuration error.
//   - Effort is -c model_reasoning_effort="…" and must be one of [Efforts]
//     (the client does not check it against the model).
//   - Ids (Continue) are validated like Claude's (letters, digits, '-', '_';
//     Codex's are UUIDv7), so an id can never become a flag. Fork without
//     Continue is a configuration error.
//   - Endpoint: a custom model provider "outpost" defined with -c pairs:
//     name, base_url, wire_api="responses", env_key="OUTPOST_CODEX_API_KEY",
//     requires_openai_auth=false. The key (Endpoint.APIKey, or
//     Endpoint.OAuthToken, which Codex can only send as the same bearer
//     token) travels in that environment variable, never in argv. A base URL
//     without a path gets "/v1" appended (Codex appends "/responses"; the
//     Anthropic-style base URL of the outposttest server serves both APIs).
//   - MaxRetries sets the provider's stream_max_retries and
//     request_max_retries; RequestTimeout its stream_idle_timeout_ms. Both
//     need an Endpoint: the built-in provider cannot be redefined with -c,
//     so without one they are left to Codex (documented, not an error).
//   - Environment: HOME from Input.Home; CODEX_HOME is left unset, so Codex
//     uses $HOME/.codex and creates it itself (verified on 0.169.0 with a
//     fresh, empty HOME); TZ=UTC, because Codex words a usage-limit reset as
//     a clock time in its own zone ("try again at 12:00 PM.") and [Quota]
//     reads zone-less times as UTC. Input.Env is merged last and wins (a
//     caller who overrides TZ gets reset times read in the wrong zone).
//
// # Decoding
//
// See [Decoder]. Usage: turn.completed.usage is thread-cumulative on 0.169.0
// (verified with the resume and fork fixtures: every counter of a resumed
// turn is the earlier turns' total plus this turn's, and a fork starts from
// its parent's total), so it is reported with scope cumulative; the turn's own
// usage is the difference from the previous total of the conversation
// (usage.Ledger.Baseline), which the caller must supply.
//
// # Recognizers
//
// An exec turn reports its failure in words only ("turn.failed" with a
// message), so the words decide. An app-server turn also reports
// codexErrorInfo, read first ([adapters.FailureRecognizer]; verified on
// 0.169.0): usageLimitExceeded (a plan usage limit, and insufficient_quota,
// which Codex words "Quota exceeded. Check your plan and billing details.")
// is quota, serverOverloaded and internalServerError outages,
// httpConnectionFailed and responseTooManyFailedAttempts classified by their
// httpStatusCode (429 quota, 401 auth, 5xx outage).
//
// [Adapter.Quota] matches the usage-limit family ("You've hit your usage
// limit … try again at Dec 3rd, 2026 12:00 AM." / "… try again in 2 days 17
// hours 14 minutes."), "Quota exceeded. Check your plan and billing
// details." (Codex's words for insufficient_quota; the OpenAI body itself,
// "You exceeded your current quota", is read by package provider's OpenAI
// wordings, as for Copilot), "out of credits", "spend cap", and the
// retries-exhausted 429 ("exceeded retry limit, last status: 429") — the last
// is quota by decision, as for Claude's organization rate limit: the CLI
// already retried it and the caller must wait. Retry chatter ("Reconnecting…")
// and context-window overflows are not quota. [Adapter.Unavailable]:
// "http 5xx", "overloaded" (at capacity, high demand), "server throttle"
// (too many concurrent requests), "stream disconnected", "connection error",
// "timeout". [Adapter.Auth]: "invalid api key", "authentication failed" (401),
// "missing api key" (the provider's env_key variable unset), "refresh token
// reused|expired|revoked", "login required". [Adapter.SessionMissing]: "no
// rollout found for thread id", "thread not loaded", "state db missing
// rollout path".
//
// # Live input: codex app-server (AppServerRequest, AppSession)
//
// `codex exec` reads its prompt once. A turn that must accept more user
// messages while it runs goes through `codex app-server` (JSON-RPC 2.0 over
// stdio, one JSON object a line, without the "jsonrpc" field), verified on
// 0.169.0:
//
//	→ {"id":1,"method":"initialize","params":{"clientInfo":{…}}}
//	→ {"method":"initialized"}
//	→ {"id":2,"method":"thread/start"|"thread/resume"|"thread/fork","params":{…}}
//	← {"id":2,"result":{"thread":{"id":…}}}       then turn/start can name the thread:
//	→ {"id":3,"method":"turn/start","params":{"threadId":…,"input":[{"type":"text","text":…}]}}
//	← {"id":3,"result":{"turn":{"id":…}}}         then turn/steer can name the turn:
//	→ {"id":N,"method":"turn/steer","params":{"threadId":…,"expectedTurnId":…,"input":[…]}}
//	← notifications: thread/started, turn/started, item/started|completed,
//	  item/agentMessage/delta, error{willRetry}, thread/tokenUsage/updated,
//	  turn/completed{turn{status,error}}
//	← server requests (approvals, user input, tool calls): answered -32601.
//
// A steered message is appended to the running turn: Codex ends the model
// call in flight and sends a new one whose input carries the message, and
// the turn's final answer covers both. Closing stdin ends the server (exit 0).
//
// Because turn/start needs the thread id and turn/steer the turn id, both
// known only from the server's answers, an app-server turn is a small
// conversation: [AppSession] is its per-turn state. Its Decode returns the
// events of a line and queues what must be written back ([AppSession.Pending]);
// [AppSession.EncodeInput] encodes a live message once the turn is running.
// The adapters contract has no hook for either yet (adapters.LiveInput is
// stateless, and the harness writes nothing to stdin after the start), so the
// harness does not drive app-server turns today: it needs a per-turn
// LiveInput (the decoder's) and to write a decoder's pending replies after
// each line. The capability stays false on [Adapter].
//
// The package is pure: no network, clock, environment or disk access.
package codex

import (
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/bootstrap"
	"github.com/outpost-dev/outpost/sandbox"
)

// Version is the Codex CLI release this adapter is written and tested
// against: the version the bootstrap catalog pins (written there only).
var Version = bootstrap.Pinned("codex")

// Name is the adapter's name.
const Name = "codex"

// Provider is the id of the custom model provider an Endpoint defines.
const Provider = "outpost"

// KeyEnv is the variable the custom provider reads its key from (env_key).
const KeyEnv = "OUTPOST_CODEX_API_KEY"

// Efforts are the model_reasoning_effort values the pinned CLI's catalog knows.
var Efforts = []string{"none", "minimal", "low", "medium", "high", "xhigh", "max", "ultra"}

// SandboxModes are the Permission values that select Codex's own sandbox.
var SandboxModes = []string{"read-only", "workspace-write", "danger-full-access"}

// bypassModes are the Permission values that mean "no Codex sandbox".
var bypassModes = []string{"", "bypass", "danger-full-access-bypass"}

// quiet are the -c pairs every turn carries (see the package doc).
var quiet = []string{
	"check_for_update_on_startup=false",
	`shell_environment_policy.inherit="core"`,
	"features.plugins=false",
	"features.remote_plugin=false",
	"features.plugin_sharing=false",
	"features.apps=false",
	"analytics.enabled=false",
	"feedback.enabled=false",
}

// Adapter is the Codex CLI adapter. Build it with [New]; the zero value is
// not ready. It is immutable and safe for concurrent use. Name, Binary and
// the recognizers Quota, Unavailable and Auth (see Recognizers in the package
// doc) come from the embedded [adapters.CLI].
type Adapter struct {
	adapters.CLI
	config []string
}

// Option configures an [Adapter].
type Option = adapters.Option[Adapter]

// WithBinary sets the program name or path argv[0] uses (default "codex").
func WithBinary(name string) Option { return adapters.WithBinary[Adapter](name) }

// WithArgs appends extra exec arguments to every command (after Outpost's
// own, before the final "-"). They are the caller's responsibility.
func WithArgs(args ...string) Option { return adapters.WithArgs[Adapter](args...) }

// WithConfig adds -c key=value overrides (before `exec`, after Outpost's own,
// so they win). Values are TOML; strings need their quotes.
func WithConfig(pairs ...string) Option {
	return func(a *Adapter) { a.config = append(a.config, pairs...) }
}

// capabilities: resumable, forkable, a terminal turn event is required,
// structured output, usage from events (thread-cumulative, see the package
// doc).
var capabilities = adapters.Capabilities{Resumable: true, Forkable: true, RequiresFinished: true,
	StructuredOutput: true, Usage: adapters.UsageEvents}

// New returns a Codex adapter.
func New(opts ...Option) *Adapter { return adapters.Build(Name, capabilities, recognizer, opts...) }

var _ adapters.SessionRecognizer = (*Adapter)(nil)

// OutputSchemaFile is the name, inside the turn's scratch directory, of the
// JSON Schema file `codex exec --output-schema` reads.
const OutputSchemaFile = "output-schema.json"

var _ adapters.TurnFiles = (*Adapter)(nil)

// DefaultModel is the model the pinned codex runs when neither the input nor
// the CLI's configuration names one: the first entry of its bundled model
// catalog, and the model of the requests a turn without -m sends (checked
// with codex 0.169.0 against the scripted server). `codex exec --json` does
// not report the model, so the harness prices such turns at this model.
const DefaultModel = "gpt-6.1-sol"

var _ adapters.DefaultModeler = (*Adapter)(nil)

// DefaultModel returns [DefaultModel].
func (a *Adapter) DefaultModel() string { return DefaultModel }

// TurnFiles implements [adapters.TurnFiles]: the output schema of a typed
// exec turn.
func (a *Adapter) TurnFiles(in adapters.Input) []adapters.TurnFile {
	if len(in.Schema) == 0 {
		return nil
	}
	return []adapters.TurnFile{{Name: OutputSchemaFile, Data: append([]byte(nil), in.Schema...)}}
}

// validModel also refuses quotes and backslashes: the model may reach a
// TOML string in a -c override.
func validModel(m string) bool {
	return adapters.ValidModel(m) && !strings.ContainsAny(m, `"\`)
}

func configErr(format string, args ...any) error { return adapters.ConfigError(Name, format, args...) }

// tomlString quotes s as a TOML basic string.
func tomlString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\u%04X`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// BaseURL returns the Responses base URL Codex is given for an endpoint base
// URL: "/v1" is appended when the URL has no path.
func BaseURL(base string) (string, error) { return adapters.ClientBaseURL(Name, base) }

// Request builds the command of one turn. It is pure; invalid input is an
// outposterr configuration error.
func (a *Adapter) Request(in adapters.Input) (sandbox.Command, error) {
	c, err := a.common(in)
	if err != nil {
		return sandbox.Command{}, err
	}
	if len(in.Schema) > 0 && !path.IsAbs(in.Scratch) {
		return sandbox.Command{}, configErr("a typed response needs the turn's scratch directory for its schema file")
	}
	args := []string{a.Binary()}
	for _, kv := range c.cfg {
		args = append(args, "-c", kv)
	}
	args = append(args, "exec", "--json", "--skip-git-repo-check")
	if c.bypass {
		args = append(args, "--dangerously-bypass-approvals-and-sandbox")
	}
	if in.Continue != "" {
		if in.Fork {
			args = append(args, "fork", in.Continue)
		} else {
			args = append(args, "resume", in.Continue)
		}
	}
	if in.Model != "" {
		args = append(args, "-m", in.Model)
	}
	if len(in.Schema) > 0 {
		args = append(args, "--output-schema", path.Join(in.Scratch, OutputSchemaFile))
	}
	args = a.AppendExtra(args)
	args = append(args, "-")
	return sandbox.Command{
		Args:  args,
		Env:   c.env,
		Dir:   in.Workdir,
		Stdin: []byte(in.Prompt),
	}, nil
}

// common is what exec and app-server turns share: validated input, the -c
// pairs (Outpost's, then the caller's) and the environment.
type common struct {
	cfg    []string
	env    map[string]string
	bypass bool
}

func (a *Adapter) common(in adapters.Input) (common, error) {
	var c common
	if err := in.ValidateFor(Name); err != nil {
		return c, err
	}
	c.cfg = append(c.cfg, quiet...)
	c.env = map[string]string{}
	switch {
	case slices.Contains(bypassModes, in.Permission):
		c.bypass = true
	case slices.Contains(SandboxModes, in.Permission):
		c.cfg = append(c.cfg, "sandbox_mode="+tomlString(in.Permission), `approval_policy="never"`)
	default:
		return c, configErr("unknown permission mode %q (want bypass or one of %s)",
			in.Permission, strings.Join(SandboxModes, ", "))
	}
	if in.Effort != "" {
		if !slices.Contains(Efforts, in.Effort) {
			return c, configErr("unknown effort %q (want one of %s)", in.Effort, strings.Join(Efforts, ", "))
		}
		c.cfg = append(c.cfg, "model_reasoning_effort="+tomlString(in.Effort))
	}
	if err := in.CheckLimits(Name); err != nil {
		return c, err
	}
	if ep := in.Endpoint; ep != nil {
		base, err := adapters.ClientEndpoint(Name, ep)
		if err != nil {
			return c, err
		}
		p := "model_providers." + Provider + "."
		c.cfg = append(c.cfg,
			"model_provider="+tomlString(Provider),
			p+"name="+tomlString("Outpost endpoint"),
			p+"base_url="+tomlString(base),
			p+`wire_api="responses"`,
			p+"requires_openai_auth=false",
		)
		if key := ep.APIKey + ep.OAuthToken; key != "" {
			c.cfg = append(c.cfg, p+"env_key="+tomlString(KeyEnv))
			c.env[KeyEnv] = key
		}
		if in.MaxRetries != nil {
			n := strconv.Itoa(*in.MaxRetries)
			c.cfg = append(c.cfg, p+"stream_max_retries="+n, p+"request_max_retries="+n)
		}
		if in.RequestTimeout > 0 {
			c.cfg = append(c.cfg, p+"stream_idle_timeout_ms="+in.RequestTimeoutMillis())
		}
	}
	mcp, mcpEnv, err := mcpConfig(in.MCP)
	if err != nil {
		return c, err
	}
	c.cfg = append(c.cfg, mcp...)
	c.cfg = append(c.cfg, a.config...)
	if in.Model != "" && !validModel(in.Model) {
		return c, configErr("invalid model name %q", in.Model)
	}
	if in.Home != "" {
		c.env["HOME"] = in.Home
	}
	// Codex prints usage-limit resets as zone-less clock times in its own
	// zone; UTC makes them readable (Quota reads them as UTC).
	c.env["TZ"] = "UTC"
	for k, v := range in.Env {
		if !sandbox.ValidEnvName(k) {
			return c, configErr("invalid environment variable name %q", k)
		}
		c.env[k] = v
	}
	// MCP values reach Codex through its environment, never argv; a
	// literal must not change a variable the turn already sets.
	for k, v := range mcpEnv {
		if old, ok := c.env[k]; ok && old != v {
			return c, configErr("MCP env %s differs from the declared variable %s; reference it as ${%s}", k, k, k)
		}
		c.env[k] = v
	}
	return c, nil
}

// NewDecoder returns a decoder for one turn's stdout.
func (a *Adapter) NewDecoder() adapters.Decoder { return NewDecoder() }

// String names the adapter and its pin.
func (a *Adapter) String() string { return fmt.Sprintf("codex %s", Version) }
