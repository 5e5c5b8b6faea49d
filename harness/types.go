package harness

import (
	"context"
	"encoding/json"
	"log/slog"
	"time"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/conversation"
	"github.com/outpost-dev/outpost/credentials"
	"github.com/outpost-dev/outpost/gateway"
	"github.com/outpost-dev/outpost/internal/lines"
	"github.com/outpost-dev/outpost/sandbox"
	"github.com/outpost-dev/outpost/typed"
	"github.com/outpost-dev/outpost/usage"
)

// Defaults for [Limits] fields left zero.
const (
	DefaultDeadline    = time.Hour
	DefaultIdleTimeout = 10 * time.Minute
	DefaultSettle      = 5 * time.Second
	DefaultKillGrace   = 2 * time.Second
	DefaultDrain       = 500 * time.Millisecond
	// DefaultTailBytes bounds each of the stdout and stderr tails kept in a Result.
	DefaultTailBytes = 64 << 10
	// DefaultTextBytes bounds Result.Text: a longer answer is cut and
	// marked (Result.TextTruncated), so memory never follows what a CLI prints.
	DefaultTextBytes = 4 << 20
	// DefaultKeptEvents bounds Result.Events when Turn.KeepEvents is set;
	// later events still reach OnEvent and are counted.
	DefaultKeptEvents = 20000
	// MaxLineBytes bounds one output line; a longer line is dropped with a
	// warning event, and the turn goes on.
	MaxLineBytes = lines.MaxBytes
	// cleanupTimeout bounds cleanup that runs after cancellation.
	cleanupTimeout = 30 * time.Second
	// captureMax bounds a conversation capture that keeps moving (a
	// conversation is at most conversation.MaxArchiveBytes).
	captureMax = 10 * time.Minute
)

// captureStall stops a conversation capture that moved no byte out of the
// sandbox for this long (a variable for tests).
var captureStall = cleanupTimeout

// Limits bound a turn in time and memory. Zero fields take the defaults
// above ([DefaultLimits]).
type Limits struct {
	// Deadline bounds the whole turn: lease acquisition, seeding and every
	// attempt — a re-seeded conversation, a typed response's repair, each
	// continuation of a steered turn — share it, counted from Run's start
	// or from [Turn.Begin].
	Deadline time.Duration
	// IdleTimeout fails a turn whose CLI prints nothing for this long.
	IdleTimeout time.Duration
	// Settle is how long a CLI may keep running after its finished event
	// before it is stopped and its result kept.
	Settle time.Duration
	// KillGrace is the time between SIGTERM and SIGKILL.
	KillGrace time.Duration
	// Drain is how long output already in flight is still read after the
	// CLI's process exited.
	Drain time.Duration
	// TailBytes bounds each of the kept stdout/stderr tails.
	TailBytes int
	// TextBytes bounds Result.Text.
	TextBytes int
	// KeptEvents bounds Result.Events (Turn.KeepEvents).
	KeptEvents int

	// MaxCostUSD stops the turn once its cost reaches this many dollars (0:
	// no cap). The running cost is the CLI's reported cost when it reports
	// one, else the list price of the tokens reported so far (package
	// usage's table; also at a custom endpoint, where the estimate is only
	// used to enforce the cap). When tokens are reported but neither is
	// known (a model without a price) the cap cannot be enforced and the
	// turn is stopped too, as the model gateway's budgets do. The stop is a
	// process failure with Details.Budget "cost".
	MaxCostUSD float64
	// MaxTokens stops the turn once it has used this many tokens of every
	// class (input, cached input, cache writes, output; 0: no cap). It needs
	// no price. The stop is a process failure with Details.Budget "tokens".
	//
	// When the turn's credential goes through the model gateway (Turn.Gateway),
	// both caps are enforced there too: the gateway measures every response,
	// refuses requests once a cap is spent, and the harness stops the turn
	// at once. Its measurement is then the turn's usage of record.
	MaxTokens int64
	// MaxTurns stops the turn when the agent starts more assistant turns
	// (model responses between tool results) than this (0: no cap). A CLI
	// that caps its own turns (adapters.TurnLimiter, Claude Code
	// --max-turns) is told and stops itself. The stop is a process failure
	// with Details.Budget "turns".
	MaxTurns int
}

// Begin starts the turn's lifetime now and returns its deadline, for a
// caller that does part of the turn's work before Run (the root package's
// Runner copies a turn's source and opens its lease first) and bounds that
// work by it: Run then keeps this deadline instead of counting
// Limits.Deadline again from its own start.
func (t *Turn) Begin() time.Time {
	t.deadline = time.Now().Add(t.Limits.withDefaults().Deadline)
	return t.deadline
}

// deadlineContext bounds ctx by the turn's deadline (Run sets it once for
// the whole turn; a turn not started by Run gets Limits.Deadline from now).
func (t Turn) deadlineContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if t.deadline.IsZero() {
		return context.WithTimeout(ctx, t.Limits.Deadline)
	}
	return context.WithDeadline(ctx, t.deadline)
}

// With returns l with every non-zero field of over: a turn's own limits
// over a runner's. Defaults are applied later, by Run, to what is left
// zero.
func (l Limits) With(over Limits) Limits {
	set := func(dst *time.Duration, v time.Duration) {
		if v > 0 {
			*dst = v
		}
	}
	set(&l.Deadline, over.Deadline)
	set(&l.IdleTimeout, over.IdleTimeout)
	set(&l.Settle, over.Settle)
	set(&l.KillGrace, over.KillGrace)
	set(&l.Drain, over.Drain)
	for _, p := range []struct{ dst, v *int }{{&l.TailBytes, &over.TailBytes}, {&l.TextBytes, &over.TextBytes},
		{&l.KeptEvents, &over.KeptEvents}, {&l.MaxTurns, &over.MaxTurns}} {
		if *p.v != 0 {
			*p.dst = *p.v
		}
	}
	if over.MaxCostUSD != 0 {
		l.MaxCostUSD = over.MaxCostUSD
	}
	if over.MaxTokens != 0 {
		l.MaxTokens = over.MaxTokens
	}
	return l
}

// DefaultLimits returns the limits a zero [Limits] stands for.
func DefaultLimits() Limits { return Limits{}.withDefaults() }

func (l Limits) withDefaults() Limits {
	def := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	defInt := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&l.Deadline, DefaultDeadline)
	def(&l.IdleTimeout, DefaultIdleTimeout)
	def(&l.Settle, DefaultSettle)
	def(&l.KillGrace, DefaultKillGrace)
	def(&l.Drain, DefaultDrain)
	defInt(&l.TailBytes, DefaultTailBytes)
	defInt(&l.TextBytes, DefaultTextBytes)
	defInt(&l.KeptEvents, DefaultKeptEvents)
	return l
}

// Turn is one turn to run. Adapter and either Sandbox or Provider are required.
type Turn struct {
	// Adapter describes the CLI.
	Adapter adapters.Adapter
	// Input is passed to Adapter.Request; Workdir and Home default to the
	// sandbox's Root and Home.
	Input adapters.Input

	// Sandbox is a warm lease to run in; the harness does not release it.
	Sandbox sandbox.Sandbox
	// Provider and Spec acquire a cold lease when Sandbox is nil; the
	// harness releases it after the turn.
	Provider sandbox.Provider
	Spec     sandbox.Spec

	// Gateway, when set, keeps a bridgeable credential out of the lease
	// (see [Bridge]): the CLI gets a placeholder and the gateway's address.
	Gateway *Bridge

	// Credentials, when set, are planned before any sandbox exists,
	// materialized into the lease before the CLI runs, and rotated logins
	// are written back to the host after the turn.
	Credentials *Credentials

	// Store, when set, keeps the conversation outside the sandbox: the one
	// to continue is restored into the lease before the CLI runs, and the
	// turn's conversation is captured after it, failed turns included.
	Store conversation.Store
	// Reseed, when the CLI cannot find the conversation to continue (a
	// session error), retries once in a new conversation whose prompt
	// carries the stored transcript (bounded) before the new prompt.
	Reseed bool

	// OnEvent receives every event as soon as it is decoded, in order, from
	// one goroutine. It must not block for long.
	OnEvent func(adapters.Event)
	// StopOnQuotaRetry stops the turn as soon as the CLI's own retry
	// notices prove a quota failure (their text reads as quota, or the CLI
	// retries after a blocking rate-limit signal) instead of letting the CLI
	// burn its retries; the turn then fails with a quota error.
	StopOnQuotaRetry bool
	// Live, when set, carries user messages to deliver into the running
	// turn, in order (steering). An adapter that implements
	// adapters.LiveInput runs its CLI's live-input command and the messages
	// join the running turn. Any other adapter whose CLI can continue a
	// conversation is steered by interrupt-and-resume: a message stops the
	// CLI (SIGINT to its process group, then the usual grace) once it has
	// named its conversation, and the turn continues that conversation in
	// the same lease with the message as the next prompt — one result to
	// the caller, usage summed, events in order. Messages sent before the
	// turn can take them wait; each delivered one becomes an input event.
	// Messages still undelivered when the turn ends are reported in
	// Result.Warnings. Closing the channel is optional.
	Live <-chan string
	// steer is the interrupt-and-resume state of a steered turn.
	steer *steer
	// deadline is when the turn's Limits.Deadline runs out, set by Begin
	// or Run.
	deadline time.Time
	// plan is the turn's credential plan, made once (CredentialPlan,
	// Validate or Run) for the Credentials it was made from (planFrom).
	plan     *credentials.Plan
	planFrom *Credentials
	// budget is the turn's budget at the gateway (its caps, drawing on
	// Gateway.Budget), shared by its attempts; nil without caps or gateway.
	budget *gateway.Budget
	// Schema, when set, asks for a typed response: a final answer that is
	// one JSON value matching this JSON Schema (compile it with
	// typed.Compile). A CLI with native structured output gets the schema
	// (Claude Code --json-schema; Codex --output-schema, a file removed after
	// the turn); the others are asked in the prompt. The answer is
	// validated; a failed check gets one repair turn on the same
	// conversation and lease, then the turn fails with a protocol error
	// naming what failed. Result.Value holds the validated value.
	Schema *typed.Schema
	// KeepEvents stores events in Result.Events (otherwise only counts),
	// bounded by Limits.KeptEvents.
	KeepEvents bool

	// Limits bound the turn in time and memory (zero fields: defaults).
	Limits Limits

	// Seed fills a fresh lease's workspace before anything else runs in it
	// (the task workspace of a batch job). It needs a cold lease with its
	// own workspace: Provider set and Spec.Workspace empty.
	Seed *Seed
	// Patch, when set, collects the patch of everything changed in the
	// workspace after the turn (also after failures) into Result.Patch.
	Patch *PatchOptions

	// Logger receives debug logs; nil discards them. Secrets are never logged.
	Logger *slog.Logger
	// Now is the clock (nil: time.Now). Tests inject one.
	Now func() time.Time
}

// Credentials is the caller's explicit authentication choice for a turn.
type Credentials struct {
	// Auth is the form (account, usage, none) and its variant.
	Auth credentials.Auth
	// Vars are the declared variables (from .outpost/.env and explicit
	// forwards). They are all set in the CLI's environment, except those
	// the plan strips, and the plan draws credential values from them.
	Vars map[string]string
	// HostHome is the host user's home, where login files are read.
	HostHome string
	// Secret names variables of Vars whose values are secrets whatever
	// their names: like the values of secret-named variables (a part such
	// as KEY, TOKEN, SECRET or PASSWORD), they are replaced by
	// [gateway.Redaction] in everything the CLI prints (see the package
	// documentation).
	Secret []string
	// Relocate holds the caller's values of relocation variables
	// (CLAUDE_CONFIG_DIR, CODEX_HOME, COPILOT_HOME).
	Relocate map[string]string
	// Config is configuration to merge into the CLI's config files.
	Config credentials.ConfigPlan
	// NoWriteBack disables writing rotated logins back to the host.
	NoWriteBack bool
	// ShareLogins allows one single-use login (a Codex ChatGPT auth.json) to
	// be installed in several sandboxes at once; by default a second
	// concurrent turn with it is refused.
	ShareLogins bool
}

// Result is what a turn produced. Run always returns a non-nil Result, also
// on failure, with as much as is known.
type Result struct {
	// Agent is the adapter name; CLIVersion the version the CLI reported.
	Agent      string `json:"agent"`
	CLIVersion string `json:"cli_version,omitempty"`
	Model      string `json:"model,omitempty"`
	// Value is the validated JSON answer of a typed response (Turn.Schema).
	Value json.RawMessage `json:"value,omitempty"`
	// Repaired says a typed response needed its repair turn; the result is
	// then the repair turn's, with both turns' usage.
	Repaired bool `json:"repaired,omitempty"`
	// Conversation is the conversation id the CLI reported (the new id on fork).
	Conversation string `json:"conversation,omitempty"`
	// Text is the final answer: the result event's text, else the
	// concatenated text events; at most Limits.TextBytes.
	Text string `json:"text"`
	// TextTruncated says Text was cut at Limits.TextBytes.
	TextTruncated bool `json:"text_truncated,omitempty"`
	// Usage is the turn's token and cost account.
	Usage usage.Usage `json:"usage"`
	// UsageSource says whose measurement Usage is: "gateway" when the
	// turn's requests went through the model gateway, which measured every
	// response on the wire (then CLIUsage keeps what the CLI reported, as
	// a cross-check), "cli" when it is the CLI's own report.
	UsageSource string       `json:"usage_source,omitempty"`
	CLIUsage    *usage.Usage `json:"cli_usage,omitempty"`
	// Events holds the events when Turn.KeepEvents is set (at most
	// Limits.KeptEvents; Counts counts them all).
	Events []adapters.Event `json:"events,omitempty"`
	// Counts counts events by kind.
	Counts map[adapters.Kind]int `json:"counts"`
	// Exit is the CLI's exit status; Exited is false when it never started.
	Exit   sandbox.ExitStatus `json:"exit"`
	Exited bool               `json:"exited"`
	// Started and Duration time the turn.
	Started  time.Time     `json:"started"`
	Duration time.Duration `json:"duration"`
	// Err is the classified error (an *outposterr.Error), nil on success.
	Err error `json:"-"`
	// StdoutTail and StderrTail are the last bytes of each stream.
	StdoutTail string `json:"stdout_tail,omitempty"`
	StderrTail string `json:"stderr_tail,omitempty"`
	// cumulative is the conversation-wide usage total the CLI reported, if
	// it reports one; it is stored with the conversation as the next
	// turn's baseline.
	cumulative *usage.Usage

	// Patch is what the turn changed in the workspace (Turn.Patch).
	Patch *Patch `json:"patch,omitempty"`

	// Warnings lists harness-level warnings (CLI stopped after settle, usage incomplete).
	Warnings []string `json:"warnings,omitempty"`
	// SecretPrinted says the CLI printed a secret the lease holds, or
	// wrote one into the workspace's changes: it was replaced by
	// [gateway.Redaction] everywhere (masked in the patch; see the package
	// documentation), and a warning says so.
	SecretPrinted bool `json:"secret_printed,omitempty"`
	// redact is the last attempt's redactor, for the patch.
	redact *outputRedactor
}

// OK reports whether the turn succeeded.
func (r *Result) OK() bool { return r != nil && r.Err == nil }
