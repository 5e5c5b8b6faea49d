package copilot

import (
	"regexp"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/adapters/provider"
	"github.com/outpost-dev/outpost/adapters/reset"
)

// recognizer reads Copilot's failure texts: its own wordings, then the
// bodies of the providers its BYOK modes relay unchanged (Anthropic for
// provider type anthropic, OpenAI for openai and azure; package provider).
// See the package doc for the families. Unavailable says nothing of a text
// that reads as quota or auth.
var recognizer = adapters.NewRecognizer(adapters.Recognition{
	// Copilot's own retry notice; it is never the verdict.
	Chatter:  regexp.MustCompile(`^\s*(?:response was interrupted due to a server error|request failed due to a transient api error)\. retrying`),
	Wordings: []adapters.Wordings{wordings, provider.Anthropic, provider.OpenAI},
	// Copilot words resets as relative durations only (PROTOCOLS §6).
	Reset:      reset.Relative,
	Exclusive:  true,
	Structured: structured,
})

// structured classifies a failure by Copilot's errorType (quota; rate_limit:
// the Copilot service's limit or retries exhausted on 429, quota by
// decision; authentication), then by the provider's error type and code and the
// status (package provider; 402 and quota_exceeded are the Copilot
// service's "You have no quota").
func structured(f adapters.FailureDetail) adapters.Verdict {
	switch {
	case f.Code == "rate_limit", f.Code == "quota", f.Status == 402, f.ProviderCode == "quota_exceeded":
		return adapters.Verdict{Class: adapters.ClassQuota}
	case f.Code == "authentication":
		return adapters.Verdict{Class: adapters.ClassAuth, Reason: "authentication failed"}
	}
	return provider.Classify(f.Status, f.ProviderType, f.ProviderCode)
}

var wordings = adapters.Wordings{
	// The premium-allowance downgrade lets the turn continue.
	NotQuota: []*regexp.Regexp{regexp.MustCompile(`automatically switched you to|exceeded your premium request allowance`)},
	Quota: []*regexp.Regexp{
		// "Sorry, you've hit a rate limit that restricts the number of
		// Copilot model requests … Please try again in 2 hours."
		regexp.MustCompile(`you(?:'ve| have) hit a rate limit`),
		// "Sorry, you have exceeded your Copilot token usage."
		regexp.MustCompile(`exceeded your copilot token usage`),
		// 402 {"error":{"message":"You have no quota","code":"quota_exceeded"}}
		regexp.MustCompile(`\byou have no quota\b|quota_exceeded|\bquota exceeded\b`),
		// Retries exhausted on 429 (rate_limited): quota by decision.
		regexp.MustCompile(`"code"\s*:\s*"rate_limited"|retried \d+ times.*last error:\s*429\b`),
	},
	Unavailable: []adapters.Reason{
		{RE: regexp.MustCompile(`\boverloaded\b|at capacity|high demand`), Name: "overloaded"},
		{RE: regexp.MustCompile(`last error:\s*(5\d\d)\b`), Name: "http $1"},
		{RE: regexp.MustCompile(`^\s*(?:model call failed:\s*"?)?(5\d\d)\s`), Name: "http $1"},
		{RE: regexp.MustCompile(`\b(5\d\d) (?:5\d\d )?(?:internal server error|bad gateway|service unavailable|gateway time-?out)`), Name: "http $1"},
		{RE: regexp.MustCompile(`execution failed:\s*(499)\b`), Name: "http $1"},
		{RE: regexp.MustCompile(`could not connect|econnrefused|connection (?:refused|reset|error)|fetch failed|socket hang up|enotfound|eai_again|network error`), Name: "connection error"},
		{RE: regexp.MustCompile(`timed out|timeout|etimedout`), Name: "timeout"},
		{RE: regexp.MustCompile(`failed to get response from the ai model; retried \d+ times`), Name: "retries exhausted"},
		{RE: regexp.MustCompile(`server error`), Name: "server error"},
	},
	Auth: []adapters.Reason{
		{RE: regexp.MustCompile(`no authentication information found`), Name: "not logged in"},
		{RE: regexp.MustCompile(`does not have copilot requests permission`), Name: "token lacks Copilot Requests permission"},
		{RE: regexp.MustCompile(`server-to-server tokens are not supported`), Name: "unsupported token (Actions)"},
		{RE: regexp.MustCompile(`offline mode requires a local model provider`), Name: "no model provider"},
		{RE: regexp.MustCompile(`authentication failed|bad credentials`), Name: "authentication failed"},
		{RE: regexp.MustCompile(`^\s*401\b|\(http 401\)|\b401 unauthorized|\b401 401\b|status[: ]+401\b`), Name: "authentication failed"},
		{RE: regexp.MustCompile(`^\s*403\b|\(http 403\)|\b403 forbidden`), Name: "forbidden"},
	},
}

var sessionMissing = regexp.MustCompile(`no session, task, or name matched|resource not found: session .* not found`)

// SessionMissing implements [adapters.SessionRecognizer]: --resume named a
// session that does not exist (1.0.102 prints "Error: No session, task, or
// name matched '<id>'." on stderr, nothing on stdout, exit 1), or ACP's
// session/load did ("Resource not found: Session <id> not found").
func (a *Adapter) SessionMissing(text string) bool {
	return sessionMissing.MatchString(adapters.Normalize(text))
}
