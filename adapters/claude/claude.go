// Package claude is the adapter for Anthropic's Claude Code CLI (`claude`),
// pinned at [Version].
//
// # Request
//
// A turn runs `claude --print --verbose --output-format stream-json`, with the
// prompt written to stdin, which is then closed (Claude blocks on an open
// stdin pipe). Then, in this order: the permission flag, --model, --effort,
// --resume <id> [--fork-session], --include-partial-messages (option), extra
// arguments (option). argv never carries a secret: keys and tokens travel in
// the environment only.
//
//   - Permission: the empty mode is bypass (`--dangerously-skip-permissions`):
//     the sandbox is the boundary. Bypass mode (empty or "bypassPermissions")
//     also sets IS_SANDBOX=1, because Claude refuses bypass as root otherwise;
//     this is the documented price of running in a sandbox we control. Other
//     modes are passed as `--permission-mode <m>` and must be one the pinned
//     CLI knows (acceptEdits, auto, bypassPermissions, default, manual, dontAsk,
//     plan); anything else is a configuration error before any process starts.
//   - Effort must be low, medium, high, xhigh or max.
//   - Conversation ids (Continue) may only hold letters, digits, '-' and '_',
//     so no id can become a flag or a path. Fork without Continue is a
//     configuration error. Model names may not start with '-' or hold spaces
//     or control characters.
//   - Environment: DISABLE_AUTOUPDATER=1 and
//     CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 always; HOME from Input.Home;
//     CLAUDE_CODE_MAX_RETRIES from Input.MaxRetries; API_TIMEOUT_MS from
//     Input.RequestTimeout. An Endpoint sets ANTHROPIC_BASE_URL,
//     ANTHROPIC_API_KEY (when the endpoint has a key; a placeholder is fine for
//     local bridges) and CLAUDE_CODE_DISABLE_EXPERIMENTAL_BETAS=1. Input.Env is
//     merged last and wins, so a caller can override any default on purpose.
//
// # Live input
//
// [Adapter.LiveRequest] builds the same command with --input-format
// stream-json added after --output-format stream-json, and keeps stdin open.
// Every stdin line is then a user message, the prompt first:
//
//	{"type":"user","uuid":"<new uuid>","message":{"role":"user","content":[{"type":"text","text":"…"}]},"parent_tool_use_id":null}
//
// Verified against the real 2.1.328: Claude Code acknowledges each message
// that carries a uuid with command_lifecycle lines (queued, started, then
// completed, or cancelled when its turn failed). A message that arrives
// while a turn runs is queued and runs as the next turn, with its own
// system/init and result (several queued messages run merged, as one turn);
// one that arrives while a tool runs is handed to the model within the
// running turn, after the tool result. The process stays alive after a
// result until stdin closes, then finishes what is queued and exits.
// Claude Code skips a message whose uuid its conversation already holds, so
// uuids are random ([WithMessageIDs] overrides them for tests). --json-schema
// holds for every result of the turn. See [LiveSession] for when the turn
// ends.
//
// # Decoding
//
// See [Decoder]. Every stream-json line becomes at least one event; lines the
// decoder does not understand (invalid JSON, unknown types, system subtypes
// other than init and api_retry, stream events other than text and thinking
// deltas) become raw events carrying the line.
//
// Failures: a synthetic assistant message (Claude's own report of a failed
// API call: an "error" field, is_api_error_message, model "<synthetic>")
// becomes a failure event whose Code is Claude's error word (rate_limit,
// billing_error, authentication_failed, server_error, unknown) and whose
// Status is api_error_status. A result with is_error true — even with subtype
// "success", which 2.1.328 prints for every API error — or with a subtype
// other than "success" becomes a failure event (result text plus errors[]
// texts; Code is the subtype, or terminal_reason when the subtype is
// "success") and an unsuccessful finished event. A failed resume of an
// unknown id prints only a result with subtype error_during_execution and
// errors ["No conversation found with session ID: …"], and no init line.
//
// Usage: each assistant line yields a message-scoped report keyed by
// message.id (Claude repeats a message once per content block; the ledger
// de-duplicates). Its output_tokens are the message_start snapshot (often 1),
// so the message sum is only a lower bound; with partial messages, the
// message_delta stream event adds the exact figures under the same id. The
// result line yields the turn-scoped total, which the ledger prefers.
// Verified against the real 2.1.328 (fixtures tool, resume, fork):
// result.usage sums every model call of the turn, while modelUsage and
// total_cost_usd are cumulative over the whole session, so after --resume
// they repeat the earlier turns' tokens and cost. model_usage_since_last_result
// is exactly this turn, per model (side calls to other models included),
// with its cost; the turn total is taken from it, else from result.usage
// with total_cost_usd, else from modelUsage.
//
// # Recognizers
//
// Structured fields come first ([adapters.FailureRecognizer]): a failure's
// class is decided by Claude's error word (billing_error and rate_limit are
// quota, authentication_failed auth, overloaded and server_error outages),
// then by api_error_type and api_error_status as package provider reads
// them (a 429 rate_limit_error is quota whatever its wording); the words
// below decide only when the fields say nothing (invalid_request_error:
// credit balance, spend cap), and otherwise name the outage or
// authentication failure and give a quota's reset. The server throttle is a
// 429 rate_limit as well: its words ("not your usage limit") veto the quota.
//
// [Adapter.Quota] matches account limits: the plan/session/weekly/5-hour/Opus/
// Sonnet "You've hit your … limit · resets …" family, "… limit reached ∙
// resets …", "Claude AI usage limit reached|<epoch>", "usage limit reached …
// reset at …", the API spend cap ("You have reached your specified API usage
// limits … regain access on …"), credit balance too low, and the API-key
// organization rate limit (429 rate_limit_error "would exceed your
// organization's rate limit of N input tokens per minute", older wordings
// included). The API's own bodies (credit balance, spend cap, organization
// rate limit, error types) are read by package provider's Anthropic
// wordings, the same ones Copilot's anthropic provider type uses. The
// organization rate limit is quota by decision: it is the account's own
// limit, the turn only fails after Claude already retried it with backoff,
// and the caller must wait rather than retry at once (its reset time is
// unknown).
// Not quota: the server throttle ("… (not your usage limit)", an outage, see
// Unavailable), "Approaching usage limit" (a warning), context limits
// (prompt too long), and CLI retry chatter ("… · Retrying in N seconds…").
// Reset times are parsed with package reset against the instant the text was
// seen; 2.1.328 words them "resets 11am (UTC)" for the 5-hour window and
// "resets Dec 5, 11am (UTC)" for the weekly and Opus windows.
//
// [Adapter.Unavailable] names outages: "overloaded" (529), "server throttle",
// "http 5xx", "connection error", "timeout". [Adapter.Auth] names
// authentication failures: "not logged in", "oauth token expired", "invalid
// oauth token", "invalid bearer token", "invalid api key", "authentication
// failed" (401), "permission denied" (403 permission_error).
//
// The package is pure: no network, clock or environment reads, and no disk
// access beyond the read-only, cached zone-database lookup [time.LoadLocation]
// does for a zone named in a reset text.
package claude

import (
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/bootstrap"
	"github.com/outpost-dev/outpost/sandbox"
)

// Version is the Claude Code release this adapter is written and tested
// against: the version the bootstrap catalog pins (written there only).
var Version = bootstrap.Pinned("claude")

// Name is the adapter's name.
const Name = "claude"

// PermissionModes are the --permission-mode values the pinned CLI accepts
// ("default" is an accepted alias of "manual").
var PermissionModes = []string{"acceptEdits", "auto", "bypassPermissions", "default", "manual", "dontAsk", "plan"}

// Efforts are the --effort values the pinned CLI accepts.
var Efforts = []string{"low", "medium", "high", "xhigh", "max"}

// Adapter is the Claude Code adapter. Build it with [New]; the zero value is
// not ready. It is immutable and safe for concurrent use. Name, Binary and
// the recognizers Quota, Unavailable and Auth (see Recognizers in the package
// doc) come from the embedded [adapters.CLI].
type Adapter struct {
	adapters.CLI
	partial bool
	ids     func() string // live-input message ids; nil: random UUIDs
}

// Option configures an [Adapter].
type Option = adapters.Option[Adapter]

// WithBinary sets the program name or path argv[0] uses (default "claude").
func WithBinary(name string) Option { return adapters.WithBinary[Adapter](name) }

// WithPartialMessages adds --include-partial-messages, so text and thinking
// stream as text-delta and reasoning events before each complete message.
func WithPartialMessages() Option { return func(a *Adapter) { a.partial = true } }

// WithArgs appends extra arguments to every command (after Outpost's own).
// They are the caller's responsibility; use the "--flag=value" form for
// variadic flags such as --mcp-config.
func WithArgs(args ...string) Option { return adapters.WithArgs[Adapter](args...) }

// capabilities: resumable, forkable, a result event is required,
// structured output, usage from events. It also takes live input
// ([Adapter.LiveRequest]).
var capabilities = adapters.Capabilities{Resumable: true, Forkable: true, RequiresFinished: true,
	StructuredOutput: true, Usage: adapters.UsageEvents}

// New returns a Claude Code adapter.
func New(opts ...Option) *Adapter { return adapters.Build(Name, capabilities, recognizer, opts...) }

var _ adapters.TurnLimiter = (*Adapter)(nil)

// TurnsExhausted recognizes the result of a turn stopped by --max-turns.
func (a *Adapter) TurnsExhausted(f adapters.FinishedDetail) bool {
	return !f.OK && (f.Reason == "max_turns" || f.Reason == "error_max_turns")
}

func configErr(format string, args ...any) error { return adapters.ConfigError(Name, format, args...) }

// Request builds the command of one turn. It is pure; invalid input is an
// outposterr configuration error.
func (a *Adapter) Request(in adapters.Input) (sandbox.Command, error) {
	args, env, err := a.command(in, false)
	if err != nil {
		return sandbox.Command{}, err
	}
	return sandbox.Command{Args: args, Env: env, Dir: in.Workdir, Stdin: []byte(in.Prompt)}, nil
}

// command validates in and builds the argv and environment of a turn; live
// adds --input-format stream-json (see [Adapter.LiveRequest]).
func (a *Adapter) command(in adapters.Input, live bool) ([]string, map[string]string, error) {
	if err := in.ValidateFor(Name); err != nil {
		return nil, nil, err
	}
	args := []string{a.Binary(), "--print", "--verbose", "--output-format", "stream-json"}
	if live {
		args = append(args, "--input-format", "stream-json")
	}
	bypass := false
	switch in.Permission {
	case "":
		bypass = true
		args = append(args, "--dangerously-skip-permissions")
	default:
		if !slices.Contains(PermissionModes, in.Permission) {
			return nil, nil, configErr("unknown permission mode %q (want one of %s)",
				in.Permission, strings.Join(PermissionModes, ", "))
		}
		bypass = in.Permission == "bypassPermissions"
		args = append(args, "--permission-mode", in.Permission)
	}
	if in.Model != "" {
		args = append(args, "--model", in.Model)
	}
	if in.Effort != "" {
		if !slices.Contains(Efforts, in.Effort) {
			return nil, nil, configErr("unknown effort %q (want one of %s)", in.Effort, strings.Join(Efforts, ", "))
		}
		args = append(args, "--effort", in.Effort)
	}
	if in.MaxTurns > 0 {
		// Hidden from --help in 2.1.328 but honoured in print mode: the CLI
		// ends with subtype error_max_turns (terminal reason max_turns).
		args = append(args, "--max-turns", strconv.Itoa(in.MaxTurns))
	}
	if len(in.Schema) > 0 {
		// Not a secret: a JSON Schema may travel in argv. Claude Code offers
		// the model a StructuredOutput tool, validates its input against the
		// schema (one retry of its own), and reports it as the result text.
		if !json.Valid(in.Schema) {
			return nil, nil, configErr("the output schema is not valid JSON")
		}
		args = append(args, "--json-schema", string(in.Schema))
	}
	mcpFlags, mcpEnv, err := mcpArgs(in)
	if err != nil {
		return nil, nil, err
	}
	args = append(args, mcpFlags...)
	switch {
	case in.Continue != "":
		args = append(args, "--resume", in.Continue)
		if in.Fork {
			args = append(args, "--fork-session")
		}
	}
	if a.partial {
		args = append(args, "--include-partial-messages")
	}
	args = a.AppendExtra(args)

	env := map[string]string{
		"DISABLE_AUTOUPDATER":                      "1",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
	}
	if bypass {
		env["IS_SANDBOX"] = "1"
	}
	if in.Home != "" {
		env["HOME"] = in.Home
	}
	if err := in.CheckLimits(Name); err != nil {
		return nil, nil, err
	}
	if in.MaxRetries != nil {
		env["CLAUDE_CODE_MAX_RETRIES"] = strconv.Itoa(*in.MaxRetries)
	}
	if in.RequestTimeout > 0 {
		env["API_TIMEOUT_MS"] = in.RequestTimeoutMillis()
	}
	if ep := in.Endpoint; ep != nil {
		u, err := url.Parse(ep.BaseURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, nil, configErr("invalid endpoint base URL %q", ep.BaseURL)
		}
		if err := ep.CheckSecret(Name); err != nil {
			return nil, nil, err
		}
		env["ANTHROPIC_BASE_URL"] = ep.BaseURL
		switch {
		case ep.APIKey != "":
			env["ANTHROPIC_API_KEY"] = ep.APIKey
		case ep.OAuthToken != "":
			env["CLAUDE_CODE_OAUTH_TOKEN"] = ep.OAuthToken
		}
		env["CLAUDE_CODE_DISABLE_EXPERIMENTAL_BETAS"] = "1"
	}
	for k, v := range mcpEnv {
		env[k] = v
	}
	for k, v := range in.Env {
		if !sandbox.ValidEnvName(k) {
			return nil, nil, configErr("invalid environment variable name %q", k)
		}
		env[k] = v
	}
	return args, env, nil
}

// NewDecoder returns a decoder for one turn's stdout.
func (a *Adapter) NewDecoder() adapters.Decoder { return NewDecoder() }

// String names the adapter and its pin.
func (a *Adapter) String() string { return fmt.Sprintf("claude %s", Version) }
