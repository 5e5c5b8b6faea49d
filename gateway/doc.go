// Package gateway is Outpost's model gateway: a reverse proxy, run outside
// the sandbox, that holds the real model credential so the agent CLI inside
// a lease never sees it. The lease gets a base URL pointing at the gateway
// and a per-lease placeholder key; the gateway checks the placeholder,
// swaps in the real credential and forwards the request to an allowlisted
// upstream. On the way back it measures what the wire says: statuses,
// models and token usage, for every request of the turn.
//
// The same code serves an in-process gateway (outpost run and batch, Docker
// leases reaching it through a unix socket) and a Kubernetes sidecar (the
// pod's containers share its loopback, so the sidecar listens on
// 127.0.0.1).
//
// # Lifecycle
//
//	gw, err := gateway.New(gateway.Options{Upstreams: []string{"https://api.anthropic.com"}})
//	err = gw.ListenUnix("/run/outpost-<pid>/gateway.sock") // directory 0700
//	defer gw.Close()
//
// Per turn (per lease):
//
//	g, err := gw.Grant(gateway.GrantSpec{Label: turnID, Upstream: "https://api.anthropic.com",
//		Credential: gateway.Credential{Scheme: gateway.SchemeAPIKey, Secret: key},
//		Price: price, Budget: budget}) // Price and Budget optional
//	spec.Forwards = []sandbox.Forward{{Socket: sock, Port: gateway.DefaultLeasePort}}
//	spec.Network = "none"
//	turn.Input.Endpoint = g.Endpoint(gateway.LeaseURL(gateway.DefaultLeasePort))
//	res, err := harness.Run(ctx, turn)
//	g.Revoke()           // idempotent; cancels requests still running
//	snap := g.Snapshot() // final after Revoke: usage, statuses, evidence
//
// A host lease (no isolation) uses [Gateway.ListenTCP] and the URL it
// returns instead of a forward. A warm session keeps one grant for its
// lease (the CLI's environment cannot change between turns of a live
// process) and takes each turn's part with [Snapshot.Since].
//
// # A gateway beside the lease
//
// A gateway that runs somewhere else — the sidecar container of a
// Kubernetes pod, which shares the pod's loopback with the lease but none
// of its files or processes — is driven over a pair of streams (the
// sidecar program's standard input and output, carried by the API
// server's exec). There the gateway listens with [Gateway.ListenTCP] on
// 127.0.0.1 and serves [Gateway.ServeControl] on its streams; the runner
// holds a [Remote] on the other end, waits for [Remote.Ready] (the base
// URLs the gateway serves) and opens each turn's grant with
// [Remote.Grant]. A [RemoteGrant] is used like a [Grant]; its snapshots
// are read back over the same streams. The real credential crosses only
// that channel — no pod spec, Secret or environment holds it — and the
// channel's end (a released lease) revokes every grant opened through it.
// `outpost gateway sidecar` is that program.
//
// # Credentials and placeholders
//
// A [Grant] binds a random placeholder (256 bits, prefixed
// [PlaceholderPrefix]) to one real [Credential] and one upstream. The lease
// may present the placeholder in whichever header its CLI uses —
// x-api-key, Authorization: Bearer, api-key; several headers must agree.
// Every credential header of the lease is removed and the real credential
// is set in its [Scheme]'s header. A request without a valid placeholder
// (none, unknown, revoked, conflicting, the real key itself) is answered
// 401 by the gateway, in the API's error shape, and never forwarded. The
// placeholder is worthless anywhere else and after [Grant.Revoke].
//
// Forms that can be bridged, because the CLI only presents them and never
// refreshes them:
//   - Claude Code: ANTHROPIC_API_KEY ([SchemeAPIKey]),
//     CLAUDE_CODE_OAUTH_TOKEN from `claude setup-token` ([SchemeClaudeOAuth]:
//     the lease gets the placeholder as its OAuth token, so the CLI stays in
//     subscription mode), ANTHROPIC_AUTH_TOKEN ([SchemeBearer]);
//   - Codex: an API key (CODEX_API_KEY, OPENAI_API_KEY; [SchemeBearer]
//     through the adapter's custom model provider);
//   - Copilot CLI: the BYOK provider key (COPILOT_PROVIDER_API_KEY or
//     _BEARER_TOKEN) of an OpenAI-compatible provider ([SchemeBearer]; the
//     upstream is the provider's base URL without its trailing /v1). Azure
//     deployments use other paths and an api-key header, which the route
//     list does not cover yet.
//
// Forms that must stay inside the lease: login files the CLI refreshes
// itself (~/.claude/.credentials.json, Codex's auth.json with a ChatGPT
// login, Copilot's GitHub login and COPILOT_GITHUB_TOKEN for GitHub-hosted
// models, Antigravity's OAuth file), because the CLI talks to its vendor's
// own endpoints with them and rotates them.
//
// # What is forwarded
//
// Upstreams are an allowlist ([Options.Upstreams]; https except for
// loopback hosts); a grant names one, and the lease cannot steer the host:
// the request's path is appended to the grant's upstream after it matched
// one of the allowed routes exactly —
// POST /v1/messages, /v1/messages/count_tokens; GET /v1/models[/{id}];
// HEAD/GET /api/hello (Anthropic); POST /v1/responses (Responses);
// POST /v1/chat/completions, /chat/completions, GET /models (Chat
// Completions). Anything else (other endpoints of the provider, escaped
// or dotted paths, absolute request targets) is answered 404 by the
// gateway; a WebSocket upgrade is answered 426 (Codex then streams over
// HTTP). The query string passes through. Forwarding and X-Forwarded-*
// headers are not added. Responses pass through unbuffered: a stream is
// flushed after every read, so each event reaches the lease as soon as the
// upstream sent it. The gateway asks upstreams for uncompressed responses
// so it can read them on the way.
//
// Responses pass through unchanged but for one thing: every occurrence of
// the grant's real credential — in response headers (names too, in any
// case), the headers of 1xx responses, the body and trailers — is replaced
// by [Redaction] ("[REDACTED]") before the lease gets it, so an upstream
// that echoes the key it was sent (in an error message, a debug header)
// hands the lease nothing. A body is read as it arrives and passed on at
// once, except for a tail that could be the beginning of the key (at most
// its length less one byte, and never a complete event line), which waits
// for the next read; a body that ends there passes it on, a body cut by an
// error drops it. Since a redaction changes a body's length, the lease gets
// bodies without Content-Length (chunked). Usage is measured on the
// upstream's bytes, before redaction. Only the key's literal bytes are
// replaced: an upstream that returned it transformed (encoded, cut) would
// not be caught.
//
// # Measurement
//
// Every request of a grant becomes an [Exchange]: method, path, status,
// who answered, model, usage, cost, and for failures the error type, code,
// bounded message (the real credential removed), retry-after and reset.
// Usage is read from the wire, independent of what the CLI prints:
//   - Anthropic Messages: message_start's usage, overridden field by field
//     by message_delta's cumulative usage (a stream without message_delta is
//     incomplete); a JSON body's usage;
//   - Responses: the usage of response.completed (or .incomplete, .failed);
//     a JSON body's usage;
//   - Chat Completions: the chunk carrying usage (sent when the client asks
//     for stream_options.include_usage, as Copilot CLI does); a JSON body's
//     usage.
//
// Counters map onto usage.Usage: Input is uncached input (OpenAI's input
// and prompt counts include the cached part, which is subtracted), Cached
// the cache reads, CacheCreated Anthropic's cache writes, Output the output
// tokens with Reasoning their reasoning part. [Snapshot] sums a grant's
// exchanges; its Usage.Complete is false when a successful model call
// carried no usage or was cut short.
//
// # Budgets
//
// A [Budget] is a cost cap in dollars, priced by the grant's [PriceFunc].
// Give one to a single grant for a per-turn cap, or share it for a
// per-batch cap. The cap is checked when a request starts: once spent, the
// request is answered [BudgetStatus] (400) with a body, in the API's error
// shape, whose message starts with [BudgetMarker] ("outpost budget
// exceeded"). Claude Code 2.1.328, Codex 0.169.0 and Copilot CLI 1.0.102
// each report that once, without retrying, with the message in their
// failure text. A model without a price fails the budget closed.
//
// A successful model call whose usage did not come whole — cut before its
// closing usage (the lease hung up, the turn ended, the upstream broke
// off) or sent without any (a Chat stream without include_usage, a
// compressed body) — was billed upstream all the same: the budget is
// charged an estimate ([Exchange.Estimate]), what was measured with the
// input raised to one token per two request bytes when none was measured
// and the output to one token per four response bytes, priced for the
// model the response named, else the one the request named. A stream that
// ended with an error event is not charged. A grant records at most
// Options.MaxRequestsPerGrant requests; later ones are refused and counted
// ([Snapshot.Dropped]).
//
// # Evidence for classification
//
// [Snapshot.Evidence] reads the status history: a budget refusal anywhere
// in the turn decides; otherwise the last request decides when it failed
// (earlier failures were retried past). Its kinds map onto outposterr as
// proposed here for the harness:
//   - budget → a quota failure without reset time, its message naming the
//     cap (retrying is useless until the cap is raised);
//   - quota (402; 429 with Anthropic's unified status "rejected", or an
//     OpenAI insufficient_quota or usage_limit_reached error) → quota, with
//     the wire's reset time when the CLI's text gives none;
//   - auth (401, 403) → a process failure with Auth set;
//   - overloaded (529, 503 overloaded), unavailable (502, 503, 504,
//     unreachable upstream), server_error (other 5xx) → a process failure
//     with Unavailable set to Evidence.Reason;
//   - rate_limit (other 429) and request (other 4xx) → a process failure.
//
// Proposed precedence when the CLI's own words are also available, for a
// failed turn: (1) a gateway budget refusal; (2) quota, when either the CLI's
// recognizer or the wire says so (the CLI's reset time first, the wire's
// otherwise) — Claude Code in API-key mode words a quota like a rate limit
// and Copilot's service sends its quota as a plain 429, so each source
// catches what the other misses; (3) auth, from either; (4) an outage, from
// either; (5) the CLI's remaining recognizers and exit status. A turn that
// succeeded is never reclassified by its retried failures.
//
// The package prints nothing and reads no environment: the default
// transport uses no proxy from the environment. Logs go to
// [Options.Logger] at debug level and never carry a credential or a
// placeholder. All methods are safe for concurrent use.
package gateway
