package copilot

import (
	"regexp"
	"strings"
	"time"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/adapters/reset"
)

// normalizer folds the typographic variants (’ and ', … and "...", · and ∙).
var normalizer = strings.NewReplacer("’", "'", "‘", "'", "…", "...", "∙", "·")

// maxScan bounds the text a recognizer looks at.
const maxScan = 64 << 10

func clip(s string) string {
	if len(s) > maxScan {
		return s[:maxScan]
	}
	return s
}

func normalize(s string) string { return strings.ToLower(normalizer.Replace(clip(s))) }

var statusRE = regexp.MustCompile(`(?i)^\s*([1-5]\d\d)\b|last error:\s*([1-5]\d\d)\b|\(http ([1-5]\d\d)\)|status(?: code)?[: ]+([1-5]\d\d)\b`)

var (
	// chatter is Copilot's own retry notice; it is never the verdict.
	chatter = regexp.MustCompile(`^\s*(?:response was interrupted due to a server error|request failed due to a transient api error)\. retrying`)

	// notQuota: the premium-allowance downgrade lets the turn continue.
	notQuota = regexp.MustCompile(`automatically switched you to|exceeded your premium request allowance`)

	quotaFamilies = []*regexp.Regexp{
		// "Sorry, you've hit a rate limit that restricts the number of
		// Copilot model requests … Please try again in 2 hours."
		regexp.MustCompile(`you(?:'ve| have) hit a rate limit`),
		// "Sorry, you have exceeded your Copilot token usage."
		regexp.MustCompile(`exceeded your copilot token usage`),
		// 402 {"error":{"message":"You have no quota","code":"quota_exceeded"}}
		regexp.MustCompile(`\byou have no quota\b|quota_exceeded|\bquota exceeded\b|insufficient_quota|exceeded your current quota`),
		// Retries exhausted on 429 (rate_limited): quota by decision.
		regexp.MustCompile(`"code"\s*:\s*"rate_limited"|retried \d+ times.*last error:\s*429\b`),
	}
)

// Quota reports whether text is a quota or rate-limit failure and, when the
// text gives a relative duration ("try again in 14 hours 23 minutes"), when
// it resets, counted from at. See the package doc for the families.
func (a *Adapter) Quota(text string, at time.Time) (bool, time.Time) { return Quota(text, at) }

// Quota is [Adapter.Quota] as a function.
func Quota(text string, at time.Time) (bool, time.Time) {
	if text == "" {
		return false, time.Time{}
	}
	n := normalize(text)
	if chatter.MatchString(n) || notQuota.MatchString(n) {
		return false, time.Time{}
	}
	for _, re := range quotaFamilies {
		if re.MatchString(n) {
			// Copilot words resets as relative durations only (PROTOCOLS §6).
			t, _ := reset.Relative(clip(text), at)
			return true, t
		}
	}
	return false, time.Time{}
}

var unavailable = []adapters.Reason{
	{RE: regexp.MustCompile(`\boverloaded\b|at capacity|high demand`), Name: "overloaded"},
	{RE: regexp.MustCompile(`last error:\s*(5\d\d)\b`), Name: "http $1"},
	{RE: regexp.MustCompile(`^\s*(?:model call failed:\s*"?)?(5\d\d)\s`), Name: "http $1"},
	{RE: regexp.MustCompile(`\b(5\d\d) (?:5\d\d )?(?:internal server error|bad gateway|service unavailable|gateway time-?out)`), Name: "http $1"},
	{RE: regexp.MustCompile(`execution failed:\s*(499)\b`), Name: "http $1"},
	{RE: regexp.MustCompile(`could not connect|econnrefused|connection (?:refused|reset|error)|fetch failed|socket hang up|enotfound|eai_again|network error`), Name: "connection error"},
	{RE: regexp.MustCompile(`timed out|timeout|etimedout`), Name: "timeout"},
	{RE: regexp.MustCompile(`failed to get response from the ai model; retried \d+ times`), Name: "retries exhausted"},
	{RE: regexp.MustCompile(`server error`), Name: "server error"},
}

// Unavailable reports whether text is an outage of the model service and
// names the reason. Retry chatter is not a verdict.
func (a *Adapter) Unavailable(text string) (string, bool) { return Unavailable(text) }

// Unavailable is [Adapter.Unavailable] as a function.
func Unavailable(text string) (string, bool) {
	if text == "" {
		return "", false
	}
	n := normalize(text)
	if chatter.MatchString(n) {
		return "", false
	}
	if ok, _ := Quota(text, time.Time{}); ok {
		return "", false
	}
	if _, ok := Auth(text); ok {
		return "", false
	}
	return adapters.MatchReason(unavailable, n)
}

var auth = []adapters.Reason{
	{RE: regexp.MustCompile(`no authentication information found`), Name: "not logged in"},
	{RE: regexp.MustCompile(`does not have copilot requests permission`), Name: "token lacks Copilot Requests permission"},
	{RE: regexp.MustCompile(`server-to-server tokens are not supported`), Name: "unsupported token (Actions)"},
	{RE: regexp.MustCompile(`offline mode requires a local model provider`), Name: "no model provider"},
	{RE: regexp.MustCompile(`authentication failed|invalid api key|incorrect api key|invalid_api_key|bad credentials`), Name: "authentication failed"},
	{RE: regexp.MustCompile(`^\s*401\b|\(http 401\)|\b401 unauthorized|\b401 401\b|status[: ]+401\b`), Name: "authentication failed"},
	{RE: regexp.MustCompile(`^\s*403\b|\(http 403\)|\b403 forbidden`), Name: "forbidden"},
}

// Auth reports whether text is an authentication failure and names it.
func (a *Adapter) Auth(text string) (string, bool) { return Auth(text) }

// Auth is [Adapter.Auth] as a function.
func Auth(text string) (string, bool) {
	if text == "" {
		return "", false
	}
	n := normalize(text)
	if chatter.MatchString(n) {
		return "", false
	}
	return adapters.MatchReason(auth, n)
}

var sessionMissing = regexp.MustCompile(`no session, task, or name matched|resource not found: session .* not found`)

// SessionMissing implements [adapters.SessionRecognizer]: --resume named a
// session that does not exist (1.0.102 prints "Error: No session, task, or
// name matched '<id>'." on stderr, nothing on stdout, exit 1), or ACP's
// session/load did ("Resource not found: Session <id> not found").
func (a *Adapter) SessionMissing(text string) bool {
	return sessionMissing.MatchString(normalize(text))
}
