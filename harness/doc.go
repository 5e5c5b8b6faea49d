// Package harness is the turn engine: [Run] executes one turn of an agent
// CLI in a sandbox and returns a [Result] with a classified error, and
// [Replay] judges a recorded run the same way.
//
// A turn, in order:
//
//  1. Preflight, before any sandbox exists: the adapter can resume or fork
//     as asked, the prompt is not empty, the credential plan resolves, and
//     every variable an MCP server references is declared.
//  2. A cold lease is acquired from Turn.Provider (or Turn.Sandbox is used
//     warm and left alone). With Turn.Seed its fresh workspace is filled
//     from a tar stream through Sandbox.CopyIn (a task workspace; an
//     earlier turn's patch is re-applied with git apply).
//  3. Credentials and configuration are materialized into the lease's
//     private home (package credentials/install); a stored conversation to
//     continue is checked whole (only the files the adapter declares as its
//     conversation storage; anything else is a session error and nothing is
//     written), then streamed into it, relocated to the new workspace.
//  4. The CLI runs, in the same exec as a check that the lease user can
//     create and remove a file in the workspace (when it cannot, the turn
//     fails as configuration naming the owner and the remedies, and the
//     CLI never starts; a CLI missing from the lease is a sandbox error).
//     Its stdout is decoded line by line and every event reaches
//     Turn.OnEvent as it arrives; stderr lines become events too. Before
//     any line is read, every secret the lease holds is replaced in it by
//     [gateway.Redaction], so events, text, tails and errors never hold
//     it: the values of the CLI's variables named like secrets (a part
//     such as KEY, TOKEN, SECRET or PASSWORD) that look like one
//     (credentials.LooksSecret), the variables Credentials.Secret names,
//     the tokens of the login files installed, and the values declared
//     secret (the variables an adapter declares as its own, such as a
//     driver's secrets, and MCP servers' references and headers). Step 7
//     masks them in the stored conversation and the patch; the first time
//     the CLI prints one, a warning says so (Result.SecretPrinted). The turn
//     ends on the CLI process's own exit (never on its pipes closing), then
//     a short drain window collects output in flight and the rest of the
//     process group is killed. The deadline, the idle timeout and the
//     settle window after the final event stop the CLI with SIGTERM, then
//     SIGKILL after Limits.KillGrace; so does cancellation of ctx. With
//     Turn.Live the adapter's live-input command runs instead (its stdin
//     stays open): protocol replies and the caller's messages are written by
//     a pump that never blocks supervision, messages wait until a turn can
//     take them, and stdin is closed when the turn ends. An adapter without
//     live input whose CLI can continue a conversation is steered by
//     interrupt-and-resume instead: a message stops the CLI with SIGINT once
//     it has named its conversation, and further attempts in the same lease
//     continue it with the messages as prompts, joined into one result.
//     Limits.MaxCostUSD and Limits.MaxTurns stop the CLI the same way once
//     the running cost (the CLI's reported cost, else list prices) or the
//     count of assistant turns passes them.
//  5. Classification ([outposterr]): exit status, failure events, blocking
//     quota events and the stderr of a failed turn — never assistant text.
//     Only process failures become quota; outages stay process failures with
//     Unavailable set; authentication failures set Auth; a stop at a cost or
//     turn cap sets Budget. A failed turn whose sandbox killed the CLI out of
//     memory, or refused it a fork at its process limit
//     ([sandbox.LimitReporter]), is a process failure with Limit set.
//  6. Usage: per-message reports de-duplicated, a turn total preferred,
//     cumulative counters diffed against the total stored with the
//     conversation, and the adapter's session reader run after exit.
//  7. The conversation is streamed to Turn.Store (failed turns too; only the
//     adapter's declared files, within the conversation package's limits,
//     with each secret of step 4 overwritten by a mask of its own length; a
//     file skipped or a conversation not stored is a Result warning), rotated
//     logins are written back, files made for the invocation (a Codex
//     output schema, in a per-turn scratch directory) are removed, and a
//     cold lease is released — all under a bounded context.WithoutCancel,
//     on success, failure and cancellation alike. Before the release, with
//     Turn.Patch, git inside the lease computes the patch of every change
//     against the base commit with a private index (Result.Patch), the
//     lease's secrets masked in it as in the stored conversation.
//
// A typed response (Turn.Schema) wraps this: the schema goes to a CLI with
// native structured output or into the prompt, the final answer is checked
// (package typed), and a failed check gets exactly one repair turn on the
// same conversation and lease; a second failure is a protocol error.
//
// A turn is prepared before it runs: [Turn.Validate] checks it without a
// sandbox (step 1) and keeps the credential plan it resolved on the turn,
// so a caller can refuse a bad turn before it bootstraps a CLI or opens a
// sandbox engine, and Run, each of its attempts and a gateway router
// asking [Turn.CredentialPlan] use that plan instead of planning again.
// The root package's Runner.Prepare returns such a validated turn
// (outpost.Prepared) that Runner.Run then completes with its lease.
//
// A turn has one lifetime: Limits.Deadline, counted once from the start of
// Run (or from Turn.Begin, when the caller prepares part of the turn
// first), bounds acquiring the lease, seeding it and every attempt — a
// re-seeded conversation, the typed response's repair turn, each
// continuation of a steered turn — so a later attempt gets what is left,
// never a fresh deadline. Only the cleanup of step 7 runs past it, under
// its own bound.
//
// Design choices: the repair turns of typed responses live here,
// in Run, rather than in a layer above it, so every caller (the CLI, batch,
// a library user) gets the same bounded repair. Bootstrapping the pinned
// CLI is not a step of Run either: the caller delivers it through
// Turn.Provider and Turn.Spec before Run acquires the lease. The root
// package's Runner bootstraps each agent's CLI once (package bootstrap)
// and asks the opened sandbox kind's engine (sandbox.Engine.Lease) for the
// provider and spec of the turn, which carry it the engine's way: a Docker
// engine on this machine mounts the verified cache entry read-only through
// Spec.Mounts (a bind mount is set when the container is created and
// copies nothing), an engine elsewhere or a Kubernetes pod gets it copied
// in by a provider wrapping the engine's, and the host sandbox runs it
// from the cache through Spec.Env's PATH.
package harness
