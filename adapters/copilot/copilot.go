// Package copilot is the adapter for GitHub Copilot CLI (`copilot`), pinned
// at [Version]. Every fact below was verified against the real 1.0.102
// binary driven against the outposttest scripted server (Chat Completions).
//
// # Request
//
// Every turn is one process with the prompt on stdin, which is then closed
// (with a non-terminal stdin and no -p, 1.0.102 runs one non-interactive
// turn):
//
//		copilot --output-format json --allow-all --no-ask-user --no-auto-update [--model m] [--reasoning-effort e] [--resume <id>] [extra…]
//
//	  - --allow-all grants every tool, path and URL (the sandbox is the
//	    boundary); --no-ask-user removes the ask_user tool; --no-auto-update
//	    keeps the pinned executable from switching to a newer downloaded one.
//	    Permission must be empty, "bypass" or "allow-all"; other modes are a
//	    configuration error (Copilot has no read-only mode).
//	  - Resume is --resume <id> with the exact id (strict: an unknown id fails
//	    with "No session, task, or name matched" on stderr, exit 1). --continue
//	    is never used. Fork is refused with a configuration error: Copilot has
//	    no fork, and copying a session under a new id is not supported.
//	  - Effort is --reasoning-effort and must be one of [Efforts].
//	  - Endpoint (BYOK, environment only): COPILOT_OFFLINE=true (no GitHub
//	    authentication, telemetry or update check), COPILOT_PROVIDER_TYPE=openai,
//	    COPILOT_PROVIDER_BASE_URL (the endpoint's base URL, "/v1" appended when
//	    it has no path: Copilot appends "/chat/completions"), and the key as
//	    COPILOT_PROVIDER_API_KEY (Endpoint.APIKey) or
//	    COPILOT_PROVIDER_BEARER_TOKEN (Endpoint.OAuthToken). A model is required
//	    in BYOK mode: COPILOT_MODEL is Input.Model, or [DefaultModel].
//	    Secrets travel only in the environment.
//	  - MaxRetries: Copilot has no retry knob (5 retries, 2 for 401); it is
//	    ignored (documented, not an error). RequestTimeout sets
//	    COPILOT_NATIVE_HTTP_TIMEOUT_MS (a server that never answers; it does not
//	    bound a stalled stream).
//	  - MCP servers become --additional-mcp-config=<json> and --deny-tool;
//	    what Copilot cannot express (required, startup timeout) is refused.
//	  - Environment: HOME from Input.Home; COPILOT_AUTO_UPDATE=false;
//	    XDG_CACHE_HOME=/tmp/.cache, because Copilot unpacks its bundled tree
//	    (native addons, built-in skills) there and runs it, so it must be
//	    writable and executable (a noexec tmpfs home breaks it). Input.Env is
//	    merged last; GH_TOKEN and GITHUB_TOKEN are dropped from it (an ambient
//	    Actions token is picked up silently and rejected; the credential plan
//	    strips them too).
//
// # Live input
//
// The JSON mode has no way to take a message into a running turn: stdin is
// the prompt, read to its end. 1.0.102 also serves the Agent Client Protocol
// (`copilot --acp`, JSON-RPC 2.0 over stdio: initialize, session/new or
// session/load, session/prompt, session/update notifications), and
// [Adapter.LiveRequest] uses it: the same flags and environment, the prompt
// and each live message a session/prompt. Verified against the real CLI: a
// session/prompt sent while one runs cancels the running one (stopReason
// "cancelled"; its partly streamed answer is dropped, its user message
// kept) and answers the new message in the same session, so a live message
// interrupts and redirects the turn; session/load continues a session made
// by the JSON mode and replays its history first; closing stdin ends the
// process at once. What ACP loses against the JSON mode: failures arrive
// only as agent text ("Info: … Retrying..." then "Error: <the text
// session.error carries>") with stopReason "end_turn" and no usage, which
// [ACPSession] turns back into retry and failure events; a missing session
// is the error "Resource not found: Session <id> not found". See
// [ACPSession] for the mapping.
//
// # Decoding
//
// See [Decoder]. The only line that names the session is the final
// top-level `result` (sessionId, exitCode): a turn without it has no
// resumable id. Success is exitCode 0 and outcome not "blocked";
// RequiresFinished makes a zero exit without it a process failure.
//
// # Usage
//
// Copilot 1.0.102 prints no usage on stdout in JSON mode: no
// assistant.usage and no session.shutdown lines were seen in any capture.
// The figures are only in the session files, after exit:
// ~/.copilot/session-state/<id>/events.jsonl holds one session.usage_record
// per model call (inputTokens including cacheReadTokens, outputTokens,
// reasoningTokens) and a session.shutdown with session-cumulative
// modelMetrics at every process exit. The capability is therefore
// [adapters.UsageSession]. The decoder still maps assistant.usage (message
// scope, by api call id) and session.shutdown (cumulative scope) should a
// build print them, so nothing is counted twice (the ledger prefers the
// cumulative report). [SessionUsageCommand] and [ParseSessionUsage] are the
// bounded read-only command and parser the harness can run after exit: this
// turn's usage is the sum of the usage records after the last session.start
// or session.resume. The harness has no hook for them yet, so live turns
// report usage unknown (Complete=false).
//
// # Recognizers
//
// Structured fields come first ([adapters.FailureRecognizer]): session.error's
// errorType (rate_limit: quota; authentication: auth), its statusCode (402:
// quota), and the provider's error type and code that the last
// model.call_failure with the same status reported (package provider:
// insufficient_quota and 429s are quota, 5xx outages, invalid_api_key auth).
// The words decide when the fields say nothing (an Anthropic 400
// invalid_request_error: credit balance or a bad request).
//
// [Adapter.Quota]: the Copilot rate-limit family ("Sorry, you've hit a rate
// limit … Please try again in 14 hours 23 minutes." — reset from the relative
// duration), "exceeded your Copilot token usage", 402 / quota_exceeded /
// "You have no quota", and retries exhausted on 429 ("Failed to get response
// from the AI model; retried 5 times … Last error: 429 …", session.error
// errorType rate_limit) — quota by decision, as for Codex. A BYOK provider's
// own error body reaches the session.error text unchanged, so the
// recognizers also read package provider's Anthropic and OpenAI wordings, the
// ones Claude Code and Codex use: "Your credit balance is too low" and the
// organization rate limit through provider type anthropic, insufficient_quota
// ("You exceeded your current quota") through openai. The premium
// allowance downgrade notice is not a failure. [Adapter.Unavailable]: 5xx
// statuses, "server error", "overloaded", connection errors, timeouts and
// the retries-exhausted text with a 5xx or unknown last error.
// [Adapter.Auth]: "No authentication information found", 401/403, "does
// not have Copilot Requests permission", server-to-server tokens, "Offline
// mode requires a local model provider". [Adapter.SessionMissing]: "No
// session, task, or name matched".
//
// # Storage
//
// A conversation is ~/.copilot/session-state/<id>/ (events.jsonl and
// workspace.yaml required). Verified on 1.0.102: restoring that directory
// alone into a fresh home (no session-store.db) resumes the conversation
// with its whole history, in another working directory once `cwd:` in
// workspace.yaml and the session.start/session.resume context in
// events.jsonl are relocated.
//
// The package is pure: no network, clock, environment or disk access.
package copilot

import (
	"fmt"
	"slices"
	"strings"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/bootstrap"
	"github.com/outpost-dev/outpost/sandbox"
)

// Version is the Copilot CLI release this adapter is written and tested
// against: the version the bootstrap catalog pins (written there only).
var Version = bootstrap.Pinned("copilot")

// Name is the adapter's name.
const Name = "copilot"

// DefaultModel is the model named in BYOK mode when the input names none
// (Copilot requires one with a custom provider).
const DefaultModel = "gpt-4.1"

// CacheDir is the XDG_CACHE_HOME the CLI gets (writable and executable).
const CacheDir = "/tmp/.cache"

// Efforts are the --reasoning-effort values of the pinned CLI.
var Efforts = []string{"none", "minimal", "low", "medium", "high", "xhigh", "max"}

// permissions are the Permission values that mean --allow-all.
var permissions = []string{"", "bypass", "allow-all", "yolo"}

// Environment variables of the BYOK provider.
const (
	OfflineVar     = "COPILOT_OFFLINE"
	BaseURLVar     = "COPILOT_PROVIDER_BASE_URL"
	TypeVar        = "COPILOT_PROVIDER_TYPE"
	APIKeyVar      = "COPILOT_PROVIDER_API_KEY"
	BearerVar      = "COPILOT_PROVIDER_BEARER_TOKEN"
	ModelVar       = "COPILOT_MODEL"
	AutoUpdateVar  = "COPILOT_AUTO_UPDATE"
	HTTPTimeoutVar = "COPILOT_NATIVE_HTTP_TIMEOUT_MS"
)

// Adapter is the Copilot CLI adapter. Build it with [New]; the zero value is
// not ready. It is immutable and safe for concurrent use. Name, Binary and
// the recognizers Quota, Unavailable and Auth (see Recognizers in the package
// doc) come from the embedded [adapters.CLI].
type Adapter struct {
	adapters.CLI
}

// Option configures an [Adapter].
type Option = adapters.Option[Adapter]

// WithBinary sets the program name or path argv[0] uses (default "copilot").
func WithBinary(name string) Option { return adapters.WithBinary[Adapter](name) }

// WithArgs appends extra arguments to every command (after Outpost's own).
func WithArgs(args ...string) Option { return adapters.WithArgs[Adapter](args...) }

// capabilities: resumable, not forkable, the final result is required,
// usage from the session files (see the package doc).
var capabilities = adapters.Capabilities{Resumable: true, RequiresFinished: true, Usage: adapters.UsageSession}

// New returns a Copilot adapter.
func New(opts ...Option) *Adapter { return adapters.Build(Name, capabilities, recognizer, opts...) }

var _ adapters.SessionRecognizer = (*Adapter)(nil)

func configErr(format string, args ...any) error { return adapters.ConfigError(Name, format, args...) }

// BaseURL returns the provider base URL Copilot is given for an endpoint
// base URL: "/v1" is appended when the URL has no path.
func BaseURL(base string) (string, error) { return adapters.ClientBaseURL(Name, base) }

// Request builds the command of one turn. It is pure; invalid input is an
// outposterr configuration error.
func (a *Adapter) Request(in adapters.Input) (sandbox.Command, error) {
	env, err := a.env(in)
	if err != nil {
		return sandbox.Command{}, err
	}
	args := []string{a.Binary(), "--output-format", "json", "--allow-all", "--no-ask-user", "--no-auto-update"}
	args = append(args, a.flags(in)...)
	if in.Continue != "" {
		args = append(args, "--resume", in.Continue)
	}
	mcp, _ := mcpArgs(in) // validated by env
	args = append(args, mcp...)
	args = a.AppendExtra(args)
	return sandbox.Command{Args: args, Env: env, Dir: in.Workdir, Stdin: []byte(in.Prompt)}, nil
}

// flags are the model and effort flags of a turn.
func (a *Adapter) flags(in adapters.Input) []string {
	var args []string
	if in.Model != "" {
		args = append(args, "--model", in.Model)
	}
	if in.Effort != "" {
		args = append(args, "--reasoning-effort", in.Effort)
	}
	return args
}

// env validates in and returns the environment of a turn; [Adapter.Request]
// and [Adapter.LiveRequest] share it.
func (a *Adapter) env(in adapters.Input) (map[string]string, error) {
	if err := in.ValidateFor(Name); err != nil {
		return nil, err
	}
	if in.Fork {
		return nil, configErr("fork is not supported: Copilot CLI cannot branch a session (resume it instead)")
	}
	if !slices.Contains(permissions, in.Permission) {
		return nil, configErr("unknown permission mode %q (Copilot runs with --allow-all: empty, bypass or allow-all)", in.Permission)
	}
	if in.Effort != "" && !slices.Contains(Efforts, in.Effort) {
		return nil, configErr("unknown effort %q (want one of %s)", in.Effort, strings.Join(Efforts, ", "))
	}
	if _, err := mcpArgs(in); err != nil {
		return nil, err
	}
	if err := in.CheckLimits(Name); err != nil {
		return nil, err
	}
	env := map[string]string{
		AutoUpdateVar:    "false",
		"XDG_CACHE_HOME": CacheDir,
	}
	if in.Home != "" {
		env["HOME"] = in.Home
	}
	if ep := in.Endpoint; ep != nil {
		base, err := adapters.ClientEndpoint(Name, ep)
		if err != nil {
			return nil, err
		}
		env[OfflineVar] = "true"
		env[TypeVar] = "openai"
		env[BaseURLVar] = base
		switch {
		case ep.APIKey != "":
			env[APIKeyVar] = ep.APIKey
		case ep.OAuthToken != "":
			env[BearerVar] = ep.OAuthToken
		}
		model := in.Model
		if model == "" {
			model = DefaultModel
		}
		env[ModelVar] = model
	}
	if in.RequestTimeout > 0 {
		env[HTTPTimeoutVar] = in.RequestTimeoutMillis()
	}
	for k, v := range in.Env {
		if !sandbox.ValidEnvName(k) {
			return nil, configErr("invalid environment variable name %q", k)
		}
		if slices.Contains(ambientTokens, k) {
			continue
		}
		env[k] = v
	}
	return env, nil
}

// NewDecoder returns a decoder for one turn's stdout.
func (a *Adapter) NewDecoder() adapters.Decoder { return NewDecoder() }

// String names the adapter and its pin.
func (a *Adapter) String() string { return fmt.Sprintf("copilot %s", Version) }
