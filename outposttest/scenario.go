package outposttest

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/outpost-dev/outpost/internal/shquote"
)

// Scenario names how the server answers a model request. The zero value
// means [ScenarioOK].
type Scenario string

// The scenarios. Their wire behaviour is described per API in the package
// documentation; the names are what a prompt directive accepts.
const (
	// ScenarioOK answers with a final text that echoes the markers of the
	// current user turn and remembers the markers of earlier user turns.
	ScenarioOK Scenario = "ok"
	// ScenarioTool first asks for a Bash tool call that writes a file into
	// the working directory (see [ToolFile]); once the client sends the
	// tool result back it answers with a final text.
	ScenarioTool Scenario = "tool"
	// ScenarioRateLimit answers 429 rate_limit_error with a retry-after header.
	ScenarioRateLimit Scenario = "rate_limit"
	// ScenarioQuota answers 429 rate_limit_error carrying Anthropic's
	// subscription usage-limit headers (anthropic-ratelimit-unified-*,
	// status rejected, reset at the configured instant).
	ScenarioQuota Scenario = "quota"
	// ScenarioSpendLimit answers 400 invalid_request_error "You have reached
	// your specified API usage limits. You will regain access on <date> at
	// 00:00 UTC." (the API-key spend cap).
	ScenarioSpendLimit Scenario = "spend_limit"
	// ScenarioQuotaWarning answers like [ScenarioOK] but with the
	// subscription headers saying "allowed_warning" (utilization 0.92).
	ScenarioQuotaWarning Scenario = "quota_warning"
	// ScenarioCredits answers 400 invalid_request_error "Your credit balance
	// is too low to access the Anthropic API. ..."
	ScenarioCredits Scenario = "credits"
	// ScenarioOrgRateLimit answers an organization's per-minute token limit,
	// with a retry-after header: on the Messages API 429 rate_limit_error
	// worded as Anthropic words it ([OrgRateLimitText]: "This request would
	// exceed your organization's rate limit of 30,000 input tokens per minute
	// (org: …, model: …). …"), on the OpenAI APIs 429 type tokens, code
	// rate_limit_exceeded ("Rate limit reached for <model> in organization
	// … on tokens per min (TPM): …").
	ScenarioOrgRateLimit Scenario = "org_rate_limit"
	// ScenarioInsufficientQuota answers OpenAI's exhausted quota on the
	// OpenAI APIs: 429 type and code insufficient_quota, "You exceeded your
	// current quota, please check your plan and billing details. …". The
	// Messages API has no such error; there it answers like [ScenarioCredits].
	ScenarioInsufficientQuota Scenario = "insufficient_quota"
	// ScenarioOverloaded answers 529 overloaded_error.
	ScenarioOverloaded Scenario = "overloaded"
	// ScenarioUnavailable answers 503 api_error (an outage).
	ScenarioUnavailable Scenario = "unavailable"
	// ScenarioServerError answers 500 api_error.
	ScenarioServerError Scenario = "server_error"
	// ScenarioUnauthorized answers 401 authentication_error "Invalid bearer token".
	ScenarioUnauthorized Scenario = "unauthorized"
	// ScenarioHang accepts the request and never answers: the handler
	// returns only when the client goes away or the server is closed.
	ScenarioHang Scenario = "hang"
	// ScenarioSlow streams the [ScenarioOK] answer with a delay (see
	// [WithChunkDelay]) before every stream event.
	ScenarioSlow Scenario = "slow"
)

// Scenarios lists every scenario.
var Scenarios = []Scenario{ScenarioOK, ScenarioTool, ScenarioRateLimit, ScenarioQuota, ScenarioQuotaWarning,
	ScenarioSpendLimit, ScenarioCredits, ScenarioOrgRateLimit, ScenarioInsufficientQuota, ScenarioOverloaded,
	ScenarioUnavailable, ScenarioServerError, ScenarioUnauthorized, ScenarioHang, ScenarioSlow}

// Valid reports whether s is one of [Scenarios].
func (s Scenario) Valid() bool {
	for _, k := range Scenarios {
		if s == k {
			return true
		}
	}
	return false
}

// ParseScenario returns the scenario named name, or an error naming the
// valid ones.
func ParseScenario(name string) (Scenario, error) {
	s := Scenario(strings.TrimSpace(strings.ToLower(name)))
	if !s.Valid() {
		return "", fmt.Errorf("unknown scenario %q (valid: %s)", name, scenarioNames())
	}
	return s, nil
}

func scenarioNames() string {
	names := make([]string, len(Scenarios))
	for i, s := range Scenarios {
		names[i] = string(s)
	}
	return strings.Join(names, ", ")
}

// Directive returns the prompt directive that selects s for one request,
// e.g. "[[outpost:scenario=tool]]".
func Directive(s Scenario) string { return "[[outpost:scenario=" + string(s) + "]]" }

// RunDirective returns a prompt directive that makes the agent run command
// through its shell tool: [ScenarioTool] with command in place of
// [ToolCommand]. Once the tool result comes back the answer is
// ScenarioTool's closing text. The command travels base64url-encoded, so
// any text survives the prompt.
func RunDirective(command string) string {
	return Directive(ScenarioTool) + "[[outpost:run=" + base64.RawURLEncoding.EncodeToString([]byte(command)) + "]]"
}

// WriteCommand returns a shell command that writes content to path (made
// with its parent directories), for [RunDirective]: an agent's scripted
// edit. Any text survives: the content travels base64-encoded.
func WriteCommand(path, content string) string {
	return "mkdir -p \"$(dirname " + shquote.Quote(path) + ")\" && printf '%s' " +
		shquote.Quote(base64.StdEncoding.EncodeToString([]byte(content))) + " | base64 -d > " + shquote.Quote(path)
}

// WriteDirective returns a prompt directive that makes the agent write
// content to path through its shell tool ([RunDirective] of [WriteCommand]).
func WriteDirective(path, content string) string { return RunDirective(WriteCommand(path, content)) }

// RunEachDirective is [RunDirective] with one command per conversation:
// the first conversation whose turn carries this directive runs
// commands[0], the next commands[1], and so on, cycling. A conversation is
// counted as its first request of the turn (no tool result yet) reaches
// the server, so K attempts of one prompt, however they interleave, run
// each command once when K is len(commands) (which attempt runs which is
// the order they reach the server).
func RunEachDirective(commands ...string) string {
	enc := make([]string, len(commands))
	for i, c := range commands {
		enc[i] = base64.RawURLEncoding.EncodeToString([]byte(c))
	}
	return Directive(ScenarioTool) + "[[outpost:runs=" + strings.Join(enc, ",") + "]]"
}

// runsRE matches a [RunEachDirective].
var runsRE = regexp.MustCompile(`\[\[outpost:runs=([A-Za-z0-9_-]+(?:,[A-Za-z0-9_-]+)*)\]\]`)

// runEach returns the commands of the current turn's last run-each
// directive and the directive's text (its key).
func (c conversation) runEach() ([]string, string, bool) {
	m := runsRE.FindAllStringSubmatch(c.current, -1)
	if len(m) == 0 {
		return nil, "", false
	}
	var out []string
	for _, e := range strings.Split(m[len(m)-1][1], ",") {
		b, err := base64.RawURLEncoding.DecodeString(e)
		if err != nil {
			return nil, "", false
		}
		out = append(out, string(b))
	}
	return out, m[len(m)-1][0], true
}

// runRE matches a [RunDirective].
var runRE = regexp.MustCompile(`\[\[outpost:run=([A-Za-z0-9_-]+)\]\]`)

// runCommand returns the command of the current turn's last run directive.
func (c conversation) runCommand() (string, bool) {
	m := runRE.FindAllStringSubmatch(c.current, -1)
	if len(m) == 0 {
		return "", false
	}
	b, err := base64.RawURLEncoding.DecodeString(m[len(m)-1][1])
	if err != nil {
		return "", false
	}
	return string(b), true
}

// directiveRE matches a directive anywhere in the text of the current user
// turn. The name is validated separately so a typo is an error, not ok.
//
// A directive may carry options after the name, separated by ';':
// times=N applies the scenario to the first N requests whose current turn
// carries the same markers (or, without markers, the same text), and
// answers ok after that — an outage or a quota
// that "recovers", e.g. [[outpost:scenario=unavailable;times=2]].
var directiveRE = regexp.MustCompile(`\[\[outpost:scenario=([A-Za-z0-9_-]*)((?:;[a-z]+=[0-9]+)*)\]\]`)

// directiveTimes returns the times=N option of the current turn's last
// directive, or 0 when there is none.
func (c conversation) directiveTimes() int {
	m := directiveRE.FindAllStringSubmatch(c.current, -1)
	if len(m) == 0 {
		return 0
	}
	for _, opt := range strings.Split(m[len(m)-1][2], ";") {
		if v, ok := strings.CutPrefix(opt, "times="); ok {
			n, _ := strconv.Atoi(v)
			return n
		}
	}
	return 0
}

// markerRE matches a marker: "MARK-" followed by letters, digits, '_' or '-'.
// The alphabet is shell- and file-name-safe on purpose (see [ToolFile]).
var markerRE = regexp.MustCompile(`MARK-[A-Za-z0-9_-]+`)

// Markers returns the distinct markers in text, in order of appearance.
func Markers(text string) []string {
	return appendUnique(nil, markerRE.FindAllString(text, -1)...)
}

func appendUnique(dst []string, items ...string) []string {
	for _, it := range items {
		if !slices.Contains(dst, it) {
			dst = append(dst, it)
		}
	}
	return dst
}

// ToolFile returns the name and content of the file that [ScenarioTool]
// asks the agent to write for a turn whose first marker is marker:
// "outpost-<marker>.txt" holding exactly marker. Without a marker it is
// "outpost-tool.txt" holding "outpost".
func ToolFile(marker string) (name, content string) {
	if marker == "" {
		return "outpost-tool.txt", "outpost"
	}
	return "outpost-" + marker + ".txt", marker
}

// ToolCommand is the shell command [ScenarioTool] asks the Bash tool to run.
func ToolCommand(marker string) string {
	name, content := ToolFile(marker)
	return fmt.Sprintf("printf '%%s' '%s' > '%s'", content, name)
}

// conversation is the API-neutral view of a model request that scenarios
// decide on. Each API decoder builds one.
type conversation struct {
	// current is the text of the current user turn: the last user message
	// that carries text and no tool results.
	current string
	// earlier is the text of the user turns before the current one.
	earlier string
	// toolResults counts tool results sent after the current user turn.
	toolResults int
	// lastToolResult is the text of the latest of them; lastToolError its
	// error flag.
	lastToolResult string
	lastToolError  bool
	// structuredTool names the tool through which the client takes a
	// structured answer (Claude Code's StructuredOutput, --json-schema),
	// when the request offers it.
	structuredTool string
	// model is the model the request names.
	model string
}

// directive returns the scenario named by a directive in the current turn,
// "" when there is none, or an error for an unknown name.
func (c conversation) directive() (Scenario, error) {
	m := directiveRE.FindAllStringSubmatch(c.current, -1)
	if len(m) == 0 {
		return "", nil
	}
	return ParseScenario(m[len(m)-1][1])
}

// okText is the final answer of ScenarioOK (and the closing text of
// ScenarioTool): it echoes the markers of the current turn and lists the
// remembered markers of earlier turns.
func (c conversation) okText() string {
	cur := Markers(c.current)
	var b strings.Builder
	b.WriteString("outpost ok")
	if len(cur) > 0 {
		b.WriteString(": ")
		b.WriteString(strings.Join(cur, " "))
	}
	b.WriteString(".")
	if rem := c.remembered(cur); len(rem) > 0 {
		b.WriteString(" remembered: ")
		b.WriteString(strings.Join(rem, " "))
	}
	return b.String()
}

func (c conversation) remembered(cur []string) []string {
	var out []string
	for _, m := range Markers(c.earlier) {
		if !slices.Contains(cur, m) {
			out = append(out, m)
		}
	}
	return out
}

func (c conversation) marker() string {
	if m := Markers(c.current); len(m) > 0 {
		return m[0]
	}
	return ""
}

// plan is what the server answers, API-neutral. Exactly one of failure,
// hang or a message (text and/or tool call) is set.
type plan struct {
	scenario Scenario
	// model is the model the request names (some error texts quote it).
	model   string
	failure *failure
	hang    bool
	delay   time.Duration
	// preamble is text sent before a tool call.
	preamble string
	text     string
	tool     *toolCall
	// header is sent with a successful answer.
	header map[string]string
}

type toolCall struct {
	name    string
	command string
	desc    string
	// input, when set, is the call's whole input (a structured answer).
	input map[string]any
}

// failure is an API error, rendered per API.
type failure struct {
	status  int
	kind    string // Anthropic error type, e.g. rate_limit_error
	message string
	header  map[string]string
}

// decide turns a scenario and a conversation into a plan.
func (s *Server) decide(sc Scenario, c conversation) plan {
	if n := c.directiveTimes(); n > 0 && sc != ScenarioOK {
		// Counted per marker set, not per text: a CLI resuming after a
		// failed turn merges the new prompt into the unanswered one.
		key := string(sc) + "\x00" + c.current
		if m := Markers(c.current); len(m) > 0 {
			key = string(sc) + "\x00" + strings.Join(m, " ")
		}
		s.timesMu.Lock()
		if s.times == nil {
			s.times = map[string]int{}
		}
		s.times[key]++
		used := s.times[key]
		s.timesMu.Unlock()
		if used > n {
			sc = ScenarioOK // the scripted failure has run its course
		}
	}
	p := plan{scenario: sc, model: c.model}
	now := s.cfg.now()
	switch sc {
	case ScenarioTool:
		if c.toolResults > 0 {
			name, _ := ToolFile(c.marker())
			p.text = "outpost tool done: wrote " + name + ". " + c.okText()
			if _, ok := c.runCommand(); ok {
				p.text = "outpost tool done: ran the command. " + c.okText()
			}
			if _, _, ok := c.runEach(); ok {
				p.text = "outpost tool done: ran the command. " + c.okText()
			}
			return p
		}
		name, _ := ToolFile(c.marker())
		p.preamble = "I will write " + name + "."
		p.tool = &toolCall{name: "Bash", command: ToolCommand(c.marker()), desc: "Write the outpost marker file"}
		if cmd, ok := c.runCommand(); ok {
			p.preamble = "I will run the command."
			p.tool = &toolCall{name: "Bash", command: cmd, desc: "Run the scripted command"}
		}
		if cmds, key, ok := c.runEach(); ok {
			s.timesMu.Lock()
			if s.runs == nil {
				s.runs = map[string]int{}
			}
			i := s.runs[key] % len(cmds)
			s.runs[key]++
			s.timesMu.Unlock()
			p.preamble = "I will run the command."
			p.tool = &toolCall{name: "Bash", command: cmds[i], desc: "Run the scripted command"}
		}
	case ScenarioRateLimit:
		secs := int((s.cfg.retryAfter + time.Second - 1) / time.Second)
		p.failure = &failure{status: 429, kind: "rate_limit_error",
			message: "This request would exceed your account's rate limit. Please try again later.",
			header:  map[string]string{"retry-after": fmt.Sprint(secs)}}
	case ScenarioQuota:
		reset := s.quotaReset(now)
		secs := max(int(reset.Sub(now).Round(time.Second)/time.Second), 0)
		h := s.unifiedHeaders("rejected", reset, 1)
		h["retry-after"] = fmt.Sprint(secs)
		h["anthropic-ratelimit-unified-overage-status"] = "rejected"
		h["anthropic-ratelimit-unified-overage-disabled-reason"] = "org_level_disabled"
		p.failure = &failure{status: 429, kind: "rate_limit_error",
			message: "This request would exceed your account's rate limit. Please try again later.",
			header:  h}
	case ScenarioQuotaWarning:
		s.okAnswer(&p, c)
		p.header = s.unifiedHeaders("allowed_warning", s.quotaReset(now), 0.92)
	case ScenarioSpendLimit:
		reset := s.quotaReset(now).UTC()
		p.failure = &failure{status: 400, kind: "invalid_request_error",
			message: "You have reached your specified API usage limits. You will regain access on " +
				reset.Format("2006-01-02") + " at " + reset.Format("15:04") + " UTC."}
	case ScenarioCredits, ScenarioInsufficientQuota:
		p.failure = &failure{status: 400, kind: "invalid_request_error", message: CreditBalanceText}
	case ScenarioOrgRateLimit:
		secs := int((s.cfg.retryAfter + time.Second - 1) / time.Second)
		p.failure = &failure{status: 429, kind: "rate_limit_error", message: OrgRateLimitText(c.model),
			header: map[string]string{"retry-after": fmt.Sprint(secs),
				"anthropic-ratelimit-input-tokens-limit":     fmt.Sprint(orgInputTokensPerMinute),
				"anthropic-ratelimit-input-tokens-remaining": "0",
				"anthropic-ratelimit-input-tokens-reset":     now.Add(time.Duration(secs) * time.Second).UTC().Format(time.RFC3339)}}
	case ScenarioOverloaded:
		p.failure = &failure{status: 529, kind: "overloaded_error", message: "Overloaded"}
	case ScenarioUnavailable:
		p.failure = &failure{status: 503, kind: "api_error", message: "Service Unavailable"}
	case ScenarioServerError:
		p.failure = &failure{status: 500, kind: "api_error", message: "Internal server error"}
	case ScenarioUnauthorized:
		p.failure = &failure{status: 401, kind: "authentication_error", message: "Invalid bearer token"}
	case ScenarioHang:
		p.hang = true
	case ScenarioSlow:
		p.delay = s.cfg.chunkDelay
		s.okAnswer(&p, c)
	default: // ScenarioOK
		p.scenario = ScenarioOK
		s.okAnswer(&p, c)
	}
	if p.failure == nil && p.header == nil {
		p.header = s.unifiedHeaders("allowed", s.quotaReset(now), 0.12)
	}
	return p
}

// okAnswer sets the answer of an ok-like plan. When the client offers a
// structured-output tool, an answer that is a JSON object is given as a
// call of that tool (as a model following --json-schema would). After the
// tool accepted a call, a further request is answered with a short text that
// consumes no scripted answer; after it refused one (the input did not match
// the schema), the next answer is the model's retry.
func (s *Server) okAnswer(p *plan, c conversation) {
	if c.structuredTool != "" && c.toolResults > 0 && !c.lastToolError {
		p.text = "Structured output provided."
		return
	}
	p.text = s.answer(c)
	if c.structuredTool == "" {
		return
	}
	var obj map[string]any
	if json.Unmarshal([]byte(strings.TrimSpace(p.text)), &obj) == nil && obj != nil {
		p.tool = &toolCall{name: c.structuredTool, input: obj}
		p.text = ""
	}
}

// answer is the final text of a primary request answered with the ok
// answer: the next scripted answer ([WithAnswers]) if any, else c.okText().
// Only decide calls it, and decide serves primary requests only, so
// auxiliary requests never consume an answer.
func (s *Server) answer(c conversation) string {
	if text, ok := s.nextAnswer(); ok {
		return text
	}
	return c.okText()
}

// CreditBalanceText is the Messages API's refusal of an organization without
// credits (400 invalid_request_error), which [ScenarioCredits] sends.
const CreditBalanceText = "Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits."

// orgID is the organization [OrgRateLimitText] names.
const orgID = "5d0c4b8e-7a43-4f1e-9d6b-2f8a1c3e0b71"

// orgInputTokensPerMinute is the limit [ScenarioOrgRateLimit] says was hit.
const orgInputTokensPerMinute = 30000

// OrgRateLimitText is the Messages API's refusal of a request over the
// organization's input-token rate limit (429 rate_limit_error), as the API
// words it today, for model; [ScenarioOrgRateLimit] sends it.
func OrgRateLimitText(model string) string {
	return "This request would exceed your organization's rate limit of 30,000 input tokens per minute " +
		"(org: " + orgID + ", model: " + model + "). For details, refer to: https://docs.claude.com/en/api/rate-limits. " +
		"You can see the response headers for current usage. Please reduce the prompt length or the maximum tokens requested, " +
		"or try again later. You may also contact sales at https://claude.com/contact-sales to discuss your options for a rate limit increase."
}

// unifiedHeaders are the subscription rate-limit headers the Anthropic API
// sends to OAuth (Claude subscription) clients; Claude Code turns them into
// rate_limit_event lines and, when rejected, into "You've hit your ... limit".
// API-key clients ignore them.
func (s *Server) unifiedHeaders(status string, reset time.Time, utilization float64) map[string]string {
	window := s.cfg.quotaWindow
	h := map[string]string{
		"anthropic-ratelimit-unified-status":               status,
		"anthropic-ratelimit-unified-reset":                fmt.Sprint(reset.Unix()),
		"anthropic-ratelimit-unified-representative-claim": window,
	}
	if short, ok := windowHeader[window]; ok {
		p := "anthropic-ratelimit-unified-" + short + "-"
		h[p+"status"] = status
		h[p+"reset"] = fmt.Sprint(reset.Unix())
		h[p+"utilization"] = fmt.Sprint(utilization)
	}
	return h
}

// windowHeader maps a representative claim to its per-window header infix.
var windowHeader = map[string]string{"five_hour": "5h", "seven_day": "7d"}

// quotaReset is the configured reset instant (or delay), or the next
// midnight UTC.
func (s *Server) quotaReset(now time.Time) time.Time {
	if d := s.cfg.quotaResetIn; d > 0 {
		t := now.Add(d)
		if r := t.Truncate(time.Second); !r.Equal(t) {
			t = r.Add(time.Second)
		}
		return t
	}
	if !s.cfg.quotaReset.IsZero() {
		return s.cfg.quotaReset
	}
	return now.UTC().Truncate(24 * time.Hour).Add(24 * time.Hour)
}
