// Package adapters defines the contract between the turn engine and one
// coding-agent CLI, and the normalized [Event] every CLI's output becomes.
//
// An [Adapter] is data plus small pure functions: it builds the argv, env and
// stdin of a turn ([Adapter.Request]), decodes each line the CLI prints into
// zero or more events ([Decoder]), and recognizes quota, outage and
// authentication texts. It touches no disk, network or clock: times it needs
// (a relative reset such as "try again in 2 hours") come in as arguments.
//
// Design choices, deliberate:
//   - Decoding goes through a per-turn [Decoder] from [Adapter.NewDecoder]
//     rather than a bare Decode method, so a decoder can keep per-turn state
//     (tool names by call id, consolidated versus delta messages) without globals.
//   - Recognizers take the instant the text was seen ([Adapter.Quota]'s at),
//     which turns relative and clock-time resets into absolute instants while
//     keeping adapters free of a clock.
//   - An authentication recognizer ([Adapter.Auth]) sits beside Quota and
//     Unavailable: every CLI needs one, and callers must tell "log in again"
//     from "wait" and "retry".
//   - Live input is a whole command and protocol session ([LiveInput],
//     [LiveSession]) rather than a stdin encoder: a CLI that takes messages
//     into a running turn (codex app-server) speaks a request/response
//     protocol on stdin that must answer the CLI, wait until a turn runs and
//     close stdin when it ends, none of which one encoder can do.
//   - Files a turn needs ([TurnFiles]) are described, never written, by the
//     adapter; the harness writes them and owns their teardown. Exit codes
//     can carry a class ([ExitMapper]) for spec-defined drivers.
//
// Optional abilities are separate small interfaces found by type assertion.
//
// The built-in CLI adapters share their skeleton: each embeds a [CLI] (name,
// program, extra arguments, capabilities, built with [Build] and options
// such as [WithBinary]) and reads failure texts with a [Recognizer] built from its
// own [Wordings]; only the wordings and the way a CLI words resets differ.
package adapters

import (
	"encoding/json"
	"time"

	"github.com/outpost-dev/outpost/credentials"
	"github.com/outpost-dev/outpost/sandbox"
	"github.com/outpost-dev/outpost/usage"
)

// UsageMode says where an adapter's usage figures come from.
type UsageMode string

// Usage modes.
const (
	UsageEvents      UsageMode = "events"
	UsageSession     UsageMode = "session"
	UsageUnavailable UsageMode = "unavailable"
)

// Capabilities describes what an adapter's CLI can do. What an optional
// interface already says is not repeated here: an adapter takes live input
// when it implements [LiveInput].
type Capabilities struct {
	Resumable bool
	Forkable  bool
	// RequiresFinished: a turn without a successful finished event failed,
	// whatever the exit status.
	RequiresFinished bool
	// StructuredOutput: the CLI constrains its final answer to Input.Schema
	// itself (Codex --output-schema, Claude Code --json-schema); otherwise the harness asks for the
	// JSON in the prompt. Either way the harness validates the answer.
	StructuredOutput bool
	Usage            UsageMode
}

// Input is everything an adapter needs to build one turn's command.
type Input struct {
	// Prompt is the user message.
	Prompt string
	// Model and Effort select the model and reasoning effort; empty: CLI default.
	Model  string
	Effort string
	// Continue is the conversation id to resume; empty starts a new one.
	Continue string
	// Fork continues from Continue in a new conversation, leaving it intact.
	Fork bool
	// Permission is the CLI's permission mode; empty means the
	// non-interactive default (bypass: the sandbox is the boundary).
	Permission string
	// Workdir is the working directory inside the sandbox.
	Workdir string
	// Home is the CLI's home directory inside the sandbox.
	Home string
	// Endpoint points the CLI at a custom model endpoint (a gateway or the
	// outposttest scripted server).
	Endpoint *Endpoint
	// MaxRetries caps the CLI's own retries of failed model calls, where the
	// CLI has a knob for it; nil leaves the CLI default. The harness owns the
	// retry budget, not the CLI.
	MaxRetries *int
	// RequestTimeout bounds one model request where the CLI has a knob.
	RequestTimeout time.Duration
	// Env is extra environment for the CLI (credentials, caller variables).
	Env map[string]string
	// MCP lists MCP servers to give the CLI, projected into its own form.
	// Adapters refuse an option their CLI cannot express.
	MCP []credentials.MCPServer
	// Schema is the JSON Schema the final answer must match (a typed
	// response), compacted; adapters with Capabilities.StructuredOutput pass
	// it to their CLI, the others ignore it.
	Schema json.RawMessage
	// Scratch is a directory inside the sandbox that exists for this turn
	// only, for the files [TurnFiles] asks for; set by the harness.
	Scratch string
	// MaxTurns caps the CLI's assistant turns where it can cap them itself
	// ([TurnLimiter]); 0: no cap. Other adapters ignore it (the harness
	// counts turns for them).
	MaxTurns int
}

// TurnFile is a file a turn's command reads, made for that turn only.
type TurnFile struct {
	// Name is the file's name inside Input.Scratch.
	Name string
	Data []byte
}

// TurnFiles is implemented by adapters whose command reads files made for
// one turn (Codex reads the output schema from a file). The harness writes
// them under Input.Scratch before the CLI starts and removes the directory
// after it ends — on success, failure and cancellation alike, bounded and
// idempotently. Pure.
type TurnFiles interface {
	TurnFiles(in Input) []TurnFile
}

// DefaultModeler is implemented by adapters whose pinned CLI runs a known
// model when the input names none and the CLI does not report the model it
// ran. The harness prices such a turn at that model's list price when the
// CLI reports no cost (package usage). Pure.
type DefaultModeler interface {
	DefaultModel() string
}

// Endpoint is a custom model endpoint.
type Endpoint struct {
	// BaseURL is the API base URL, e.g. "http://127.0.0.1:8080".
	BaseURL string
	// APIKey is the key sent to the endpoint (a placeholder for local bridges).
	APIKey string
	// OAuthToken, when set instead of APIKey, authenticates as a subscription
	// account would (Claude: CLAUDE_CODE_OAUTH_TOKEN), which makes the CLI
	// read and report subscription rate limits.
	OAuthToken string
}

// Adapter describes one CLI.
type Adapter interface {
	// Name is the short, stable name ("claude").
	Name() string
	// Binary is the program name the CLI is installed as.
	Binary() string
	// Capabilities says what the CLI can do.
	Capabilities() Capabilities
	// Request builds the command for one turn. It is pure.
	Request(in Input) (sandbox.Command, error)
	// NewDecoder returns a decoder for one turn's stdout.
	NewDecoder() Decoder
	// Quota reports whether text is a quota or usage-limit failure, and when
	// it resets (zero if unknown). at is when the text was seen; relative
	// and zone-less clock times are resolved against it.
	Quota(text string, at time.Time) (matched bool, resetAt time.Time)
	// Unavailable reports whether text is an outage of the model service and
	// names the reason ("overloaded", "http 503", "connection error").
	Unavailable(text string) (reason string, ok bool)
	// Auth reports whether text is an authentication failure and names it.
	Auth(text string) (reason string, ok bool)
}

// Decoder turns one turn's output lines into events. Decode never panics and
// never drops a line silently: invalid JSON and unknown types become raw events.
type Decoder interface {
	Decode(line []byte) []Event
}

// LiveInput is implemented by adapters whose CLI accepts user messages into
// a running turn. The harness uses it instead of [Adapter.Request] only when
// the caller wants to steer a turn (harness.Turn.Live); a turn without live
// input keeps the CLI's ordinary one-shot command.
type LiveInput interface {
	// LiveRequest builds the command of a live-input turn, whose stdin stays
	// open (sandbox.Command.KeepStdinOpen), and the session that speaks the
	// CLI's protocol on it. It validates input as Request does and is pure.
	LiveRequest(in Input) (sandbox.Command, LiveSession, error)
}

// LiveSession is the protocol state of one live-input turn. The harness
// calls it from one goroutine: every stdout line goes to Decode (it replaces
// the adapter's decoder for the turn), Pending is written to stdin after
// each line, caller messages are encoded with EncodeInput once Ready, and
// stdin is closed when Done.
type LiveSession interface {
	Decoder
	// Pending returns, and forgets, protocol bytes to write to stdin now.
	Pending() []byte
	// Ready reports whether a turn is running that can take a message.
	Ready() bool
	// EncodeInput encodes a user message for the running turn.
	EncodeInput(text string) ([]byte, error)
	// Done reports whether the turn finished; the harness then closes stdin.
	Done() bool
}

// TurnLimiter is implemented by adapters whose CLI caps its own assistant
// turns (Input.MaxTurns) and reports reaching the cap in its terminal
// event; TurnsExhausted recognizes that report. Pure.
type TurnLimiter interface {
	TurnsExhausted(f FinishedDetail) bool
}

// SessionRecognizer is implemented by adapters that can tell, from a failure
// text, that the conversation a turn tried to continue does not exist. The
// harness then reports a session error instead of a process failure.
type SessionRecognizer interface {
	SessionMissing(text string) bool
}

// Authenticator is implemented by adapters that can plan their CLI's
// credentials. It is pure: vars holds the declared variable values.
type Authenticator interface {
	Credentials(auth credentials.Auth, vars map[string]string) (credentials.Plan, error)
}

// Storage is implemented by adapters whose CLI keeps a conversation in
// files that can be carried to another sandbox. Paths are relative to the
// CLI's home directory. Both methods are pure.
//
// ConversationPaths (with Keep, for a StorageFilter) is also the allowlist
// of what a conversation archive may hold: files at those paths or beneath
// them, nothing else. It must never name a file the CLI executes or takes
// settings from (settings, hooks, shell startup files, credentials).
type Storage interface {
	// ConversationPaths lists the files or directories holding conversation
	// id of a CLI that ran in cwd. The first path is required; the others
	// (sidecars) may be missing.
	ConversationPaths(id, cwd string) []string
	// Relocate rewrites one captured file for a CLI that will run in newCwd
	// and returns its new home-relative path and content.
	Relocate(path string, content []byte, oldCwd, newCwd string) (string, []byte)
}

// StorageFilter is implemented by Storage adapters whose conversation
// paths are directories shared with other conversations: only the files
// Keep accepts are captured.
type StorageFilter interface {
	Keep(id, path string) bool
}

// Declarer is implemented by adapters that name the variables a project
// may declare for them (credentials), for `outpost init`.
type Declarer interface {
	DeclaredVars() []string
}

// Upstreamer is implemented by adapters whose CLI talks to a model API a
// gateway can stand in front of. Upstreams lists the API base URLs the
// gateway may forward the CLI's requests to, given the project's variables:
// the CLI's default API and any endpoint a variable points it at (the
// Upstream of the bridges its Credentials plan). The runner's gateway
// allows the union over every registered agent.
type Upstreamer interface {
	Upstreams(vars map[string]string) []string
}

// Relocator is implemented by adapters whose CLI reads variables that move
// its home-relative files away from where Outpost installs and captures
// them (CLAUDE_CONFIG_DIR). The host's values say where the login files
// are; a project may not set them for any CLI.
type Relocator interface {
	RelocationVars() []string
}

// SessionUsage is implemented by adapters whose CLI writes usage only to
// its session files (Copilot): after the turn the harness runs the bounded,
// read-only command in the sandbox and parses its output.
type SessionUsage interface {
	// SessionUsageCommand returns the command that prints the usage source
	// of conversation id under home; ok is false when there is none.
	SessionUsageCommand(home, id string) (cmd sandbox.Command, ok bool)
	// ParseSessionUsage turns the command's output into the turn's usage.
	ParseSessionUsage(out []byte) (usage.Report, bool)
}

// ExitMapper is implemented by adapters that know what their CLI's exit
// codes mean (spec-defined drivers). A failed turn whose CLI exited with a
// mapped code is classified by it: "quota", "unavailable", "auth",
// "session" or "process"; "" leaves the usual classification.
type ExitMapper interface {
	ExitMeaning(code int) string
}

// Configurator is implemented by adapters whose CLI reads part of a turn's
// input (MCP servers) from configuration files rather than flags: the
// harness merges the plan into the sandbox home before the CLI starts.
type Configurator interface {
	Configuration(in Input) (credentials.ConfigPlan, error)
}
