// Package outposttest is Outpost's public test kit: a scripted model server
// that speaks the vendors' wire APIs well enough for the real agent CLIs to
// run whole turns against it, offline and without spending tokens. It is to
// agent pipelines what net/http/httptest is to HTTP handlers.
//
// # Starting a server
//
//	srv, err := outposttest.NewServer(outposttest.WithScenario(outposttest.ScenarioTool))
//	if err != nil { ... }
//	defer srv.Close()
//	env := outposttest.ClaudeEnv(srv) // ANTHROPIC_BASE_URL=srv.URL(), placeholder key, ...
//
// [NewServer] listens on 127.0.0.1 (a random port unless [WithAddr] says
// otherwise; only loopback addresses are accepted). [NewUnstartedServer]
// builds the same server without listening, for mounting [Server.Handler]
// elsewhere. [Server.Close] releases requests that hang, stops listening and
// closes connections; it is idempotent. The package prints nothing and reads
// no environment variables; every method is safe for concurrent use.
// Constructors take functional options ([Option]); an invalid option value
// makes the constructor fail.
//
// One server hosts several wire APIs, one file each, on the same URL:
//   - the Anthropic Messages API (anthropic.go), used by Claude Code —
//     POST /v1/messages (streaming SSE and plain JSON),
//     POST /v1/messages/count_tokens, GET /v1/models[/{id}];
//   - the OpenAI Responses API (responses.go), used by Codex CLI through a
//     custom model provider ([CodexArgs], [CodexEnv]) — POST /v1/responses
//     (streaming SSE and plain JSON); a WebSocket upgrade of
//     GET /v1/responses is refused with 426;
//   - the OpenAI Chat Completions API (chat.go), used by GitHub Copilot CLI
//     in BYOK mode ([CopilotEnv]) — POST /v1/chat/completions and
//     /chat/completions (streaming "data:" chunks and plain JSON),
//     GET /models.
//
// HEAD/GET /api/hello and / answer 200 (Claude Code's connectivity probe);
// other /v1/ paths answer an Anthropic not_found_error. A request body over
// 64 MiB is answered 413 in the API's error shape (request_too_large on the
// Messages API).
//
// # Scenarios
//
// Each primary model request is answered by one [Scenario]. The scenario is
// chosen, first match wins, by:
//
//  1. a directive in the current user turn (see below);
//  2. the next step of a scripted sequence ([WithSequence],
//     [Server.SetSequence]) — each primary request without a directive
//     consumes one step;
//  3. the current scenario ([WithScenario], changed at run time with
//     [Server.SetScenario]; default [ScenarioOK]).
//
// Auxiliary requests — requests that neither stream nor declare tools, such
// as title or topic side queries — are always answered like [ScenarioOK] and
// consume nothing.
//
// The current user turn is the last user message that carries text and no
// tool results; the user messages before it are earlier turns. Text of other
// roles (Claude Code sends a "system" role message with its environment) is
// ignored.
//
// # Directive syntax
//
// A directive anywhere in the text of the current user turn selects the
// scenario for that request and for the follow-up requests of the same turn
// (e.g. after a tool result):
//
//	[[outpost:scenario=NAME]]
//
// NAME is one of the [Scenarios] (ok, tool, rate_limit, quota, quota_warning,
// spend_limit, credits, org_rate_limit, insufficient_quota, overloaded,
// unavailable, server_error, unauthorized, hang, slow); it is
// case-insensitive. If several directives appear the last
// wins. An unknown name is answered with 400 invalid_request_error whose
// message names the valid ones. [Directive] builds the string.
//
// # Markers
//
// A marker is "MARK-" followed by letters, digits, '_' or '-' (e.g.
// MARK-abc123). [ScenarioOK] answers
//
//	outpost ok: MARK-abc123. remembered: MARK-1 MARK-2
//
// echoing the markers of the current turn and, after "remembered:", those of
// earlier user turns that the request carries — so a resumed or forked
// conversation is observable from the final text. Without markers the answer
// is "outpost ok.".
//
// [ScenarioTool] first answers with a text block and a Bash tool_use
// running [ToolCommand] (printf '%s' 'MARK-x' > 'outpost-MARK-x.txt'; see
// [ToolFile]); once the request carries a tool result after the current turn
// it answers "outpost tool done: wrote outpost-MARK-x.txt. outpost ok: ...".
// The decision is stateless: it depends only on the conversation sent.
// [RunDirective] scripts the command instead: the agent runs any shell
// command through its tool ("[[outpost:run=BASE64URL]]" beside the tool
// directive), the way a test scripts an agent's edits or a hostile agent;
// [WriteDirective] is the one that writes given content to a given path.
// [RunEachDirective] ("[[outpost:runs=B64,B64,…]]") is not stateless: the
// server hands the next of its commands to each conversation that starts a
// turn with it, so the K attempts of one task prompt make different edits.
//
// # Scripted answers
//
// [WithAnswers] and [Server.SetAnswers] (which replaces the queue) script
// exact final texts, e.g. JSON values for typed-response tests:
//
//	srv, err := outposttest.NewServer(outposttest.WithAnswers(`{"n":1}`, `{"n":2}`))
//
// Each primary model request answered with the ok answer ([ScenarioOK],
// [ScenarioSlow], [ScenarioQuotaWarning]) takes the next text, in order,
// streamed in the same chunks (so [WithChunkDelay] still applies to
// [ScenarioSlow]); once the queue is empty the ok text returns. Auxiliary
// requests, failures and [ScenarioTool] consume nothing.
//
// A Messages request that offers Claude Code's StructuredOutput tool (claude
// --json-schema) gets an answer that is a JSON object as a call of that tool,
// as a model following the schema would; after the tool refuses a call (its
// result is an error), the retry takes the next answer; after it accepts one,
// a further request gets a short text and consumes nothing.
//
// # Wire details (Anthropic)
//
// Streams follow the API exactly: message_start (usage with input,
// cache_creation, cache_read and output tokens), ping, per block
// content_block_start / content_block_delta (text_delta or input_json_delta,
// the first partial_json empty) / content_block_stop, message_delta
// (stop_reason end_turn or tool_use, final usage), message_stop; each as
// "event: <type>\ndata: <json>\n\n". Usage is estimated at four bytes a
// token; when the request uses cache_control, the prefix up to the last
// marked message is reported as cache creation on a conversation's first
// request and as cache read on later ones, so Claude Code reports realistic
// usage and cost. Errors are {"type":"error","error":{"type","message"},
// "request_id"} with a request-id header. Successful answers carry the
// subscription headers anthropic-ratelimit-unified-* with status "allowed".
// org_rate_limit answers 429 rate_limit_error in the API's current wording
// of an organization's token limit ([OrgRateLimitText]) with retry-after and
// anthropic-ratelimit-input-tokens-* headers; credits and insufficient_quota
// answer 400 invalid_request_error [CreditBalanceText].
//
// The Messages API is also what GitHub Copilot CLI calls with
// COPILOT_PROVIDER_TYPE=anthropic and COPILOT_PROVIDER_BASE_URL set to the
// server's URL (no "/v1": the client appends "/v1/messages"), so the
// Anthropic error bodies can be checked through Copilot's BYOK mode too.
//
// A request that hangs ([ScenarioHang]), or a slow stream interrupted by
// the client or by Close, ends by aborting the connection
// (http.ErrAbortHandler), never with a clean empty or truncated response.
//
// # Wire details (Responses)
//
// Streams are response.created, response.in_progress, then per output item
// response.output_item.added, its deltas (response.content_part.added /
// output_text.delta / output_text.done / content_part.done for messages,
// response.function_call_arguments.delta/.done for function calls,
// response.custom_tool_call_input.delta/.done for custom tools) and
// response.output_item.done, then response.completed with usage
// (input_tokens including input_tokens_details.cached_tokens, output_tokens
// including output_tokens_details.reasoning_tokens); every event has a
// sequence_number. Each answer starts with a reasoning item carrying a
// summary. The tool scenario asks for the shell the request offers:
// exec_command ({"cmd"}), shell ({"command":["bash","-lc",…]}), or in code
// mode the namespaced exec custom tool (JavaScript calling
// tools.exec_command). Developer and system messages and Codex's own
// context blocks (<environment_context>, AGENTS.md) are not user turns.
// Errors are {"error":{"message","type","param","code"}}: rate_limit →
// 429 rate_limit_exceeded; quota → 429 usage_limit_reached with resets_at,
// resets_in_seconds, plan_type and x-codex-primary-* headers (Codex says
// "You've hit your usage limit. … try again at <time>."); credits,
// spend_limit and insufficient_quota → 429 insufficient_quota
// ([InsufficientQuotaText]); org_rate_limit → 429 type tokens, code
// rate_limit_exceeded, "Rate limit reached for <model> in organization … on
// tokens per min (TPM): …"; overloaded → 503
// server_is_overloaded; unavailable → 503; server_error → 500;
// unauthorized → 401 invalid_api_key.
//
// # Wire details (Chat Completions)
//
// Streams are "data: {chat.completion.chunk}" lines: a role chunk, content
// pieces, tool_calls (id and name first, then the arguments in pieces), a
// chunk with finish_reason ("stop" or "tool_calls"), a usage chunk with
// empty choices when stream_options.include_usage is set
// (prompt_tokens including prompt_tokens_details.cached_tokens), then
// "data: [DONE]". The tool scenario calls Copilot's "bash" tool with
// {"command","description"} (or "Bash"/"shell" when offered). Errors use
// the OpenAI body with the Copilot service's wordings: rate_limit → 429
// "rate limit exceeded" (code rate_limited; Copilot retries it 5 times);
// quota → 429 "Sorry, you've hit a rate limit … Please try again in N
// hours M minutes." ([CopilotRateLimitText]; not retried); credits and
// spend_limit → 402 quota_exceeded "You have no quota"; OpenAI's own bodies
// for insufficient_quota (429 insufficient_quota, [InsufficientQuotaText])
// and org_rate_limit (as for Responses); overloaded → 503; unavailable →
// 503; server_error → 500; unauthorized → 401.
//
// # Request log
//
// [Server.Requests] returns a copy of every request (the newest
// [MaxLoggedRequests], so a long-running server's log stays bounded):
// method, path, query,
// headers with credential values replaced by [Redacted] (and the
// credential itself only as a [KeyFingerprint]), the decoded model,
// stream flag, tools, messages (roles; text, tool_use and tool_result
// blocks), the JSON Schema of a structured-output request (OutputSchema:
// Responses text.format or Chat Completions response_format of type
// json_schema), the directive and scenario used, the status sent and the
// token usage the answer reported ([Usage], one shape for every API).
// [Server.ModelRequests] keeps only the scenario-answered ones.
//
// # What Claude Code does against it
//
// README.md in this directory records what Claude Code 2.1.328 and Codex
// 0.169.0 request and print for every scenario (events, exit codes, retries,
// error texts); the tests in claude_test.go and codex_test.go keep those
// observations honest.
package outposttest
