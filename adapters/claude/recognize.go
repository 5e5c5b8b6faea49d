package claude

import (
	"regexp"
	"strings"
	"time"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/adapters/provider"
	"github.com/outpost-dev/outpost/adapters/reset"
)

// recognizer reads Claude Code's failure texts: its own wordings, then the
// Anthropic API's bodies it relays (package provider), then its generic
// authentication words. See the package doc for the families matched and
// the exclusions.
var recognizer = adapters.NewRecognizer(adapters.Recognition{
	// The CLI's own "retrying" line; it is never the verdict.
	Chatter:  regexp.MustCompile(`retrying in \d+(?:\.\d+)? ?(?:seconds?|s|ms)\b`),
	Wordings: []adapters.Wordings{wordings, provider.Anthropic, lastWordings},
	// Every sandbox runs the CLI with TZ=UTC: zone-less times ("resets
	// 5am") are UTC, whatever the zone of the clock that stamped the text.
	Reset:      func(text string, at time.Time) (time.Time, bool) { return reset.Parse(text, at.UTC()) },
	Structured: structured,
})

// structured classifies a failure by Claude's own error word (the "error"
// of its synthetic message: billing_error, rate_limit,
// authentication_failed, overloaded, server_error), then by the API
// error's type and status (package provider). A quota verdict gives way to
// the words when they name the server throttle ("not your usage limit"),
// which 2.1.328 reports as a 429 rate_limit too, or a model at capacity
// ("Opus is experiencing high load, …", also error rate_limit).
func structured(f adapters.FailureDetail) adapters.Verdict {
	switch f.Code {
	case "billing_error", "rate_limit":
		return adapters.Verdict{Class: adapters.ClassQuota}
	case "authentication_failed", "oauth_org_not_allowed":
		return adapters.Verdict{Class: adapters.ClassAuth, Reason: "authentication failed"}
	case "cloud_credential_error":
		return adapters.Verdict{Class: adapters.ClassAuth, Reason: "cloud credentials unavailable"}
	case "overloaded":
		return adapters.Verdict{Class: adapters.ClassUnavailable, Reason: "overloaded"}
	case "server_error":
		if v := provider.ByStatus(f.Status); v.Class == adapters.ClassUnavailable {
			return v
		}
		return adapters.Verdict{Class: adapters.ClassUnavailable, Reason: "server error"}
	}
	return provider.Classify(f.Status, f.ProviderType, f.ProviderCode)
}

var wordings = adapters.Wordings{
	// Texts that look like limits but are not the account's quota.
	NotQuota: []*regexp.Regexp{
		regexp.MustCompile(`not your usage limit`),            // server throttle: an outage
		regexp.MustCompile(`experiencing high load`),          // a model at capacity: an outage
		regexp.MustCompile(`^\W*approaching\b`),               // a warning
		regexp.MustCompile(`prompt (?:is )?too long`),         // context limit
		regexp.MustCompile(`context (?:window|length|limit)`), // context limit
	},
	Quota: []*regexp.Regexp{
		// "You've hit your session limit · resets …", "You've hit your limit",
		// weekly, Opus, Sonnet, usage-credit members.
		regexp.MustCompile(`\byou(?:'ve| have) hit your\b[^·\n]{0,60}?\blimits?\b`),
		// "You have reached your specified API usage limits" (spend cap),
		// "You've reached your usage limit".
		regexp.MustCompile(`\byou(?:'ve| have) reached your\b[^·\n]{0,60}?\blimits?\b`),
		// "Weekly limit reached ∙ resets 5am", "5-hour limit reached",
		// "Claude AI usage limit reached|…", "Claude usage limit reached."
		regexp.MustCompile(`\b(?:weekly|daily|monthly|session|\d+-hour|five-hour|opus|sonnet|haiku|usage|plan|spend|spending)(?: [a-z]+)? limits? (?:reached|exceeded|hit)\b`),
		// "Your limit will reset at 9am (America/Chicago)."
		regexp.MustCompile(`\byour (?:usage )?limit will reset\b`),
		// Out of extra usage credits.
		regexp.MustCompile(`\bout of (?:extra )?usage\b`),
		// The API's credit balance, spend cap and organization rate limit
		// are provider.Anthropic's.
	},
	Unavailable: []adapters.Reason{
		{RE: regexp.MustCompile(`not your usage limit|temporarily limiting requests`), Name: "server throttle"},
		{RE: regexp.MustCompile(`\b529\b|overloaded|experiencing high load`), Name: "overloaded"},
		{RE: regexp.MustCompile(`(?:api error|status|http)[:( ]*(5\d\d)\b`), Name: "http $1"},
		{RE: regexp.MustCompile(`\b(5\d\d) (?:internal server error|bad gateway|service unavailable|gateway time-?out)`), Name: "http $1"},
		{RE: regexp.MustCompile(`internal server error`), Name: "http 500"},
		{RE: regexp.MustCompile(`bad gateway`), Name: "http 502"},
		{RE: regexp.MustCompile(`service unavailable`), Name: "http 503"},
		{RE: regexp.MustCompile(`gateway time-?out`), Name: "http 504"},
		{RE: regexp.MustCompile(`connection (?:error|refused|reset|closed|failed)|econnrefused|econnreset|enotfound|eai_again|ehostunreach|enetunreach|socket hang up|fetch failed|network error|unable to connect`), Name: "connection error"},
		{RE: regexp.MustCompile(`request timed out|etimedout|timed out waiting|timeout error`), Name: "timeout"},
	},
	Auth: []adapters.Reason{
		{RE: regexp.MustCompile(`\bnot logged in\b|please run /login`), Name: "not logged in"},
		{RE: regexp.MustCompile(`oauth token (?:has )?expired|token has expired`), Name: "oauth token expired"},
		{RE: regexp.MustCompile(`invalid oauth token|oauth token was not found`), Name: "invalid oauth token"},
		{RE: regexp.MustCompile(`invalid bearer token`), Name: "invalid bearer token"},
	},
}

// lastWordings name what the more specific words did not.
var lastWordings = adapters.Wordings{
	Auth: []adapters.Reason{
		{RE: regexp.MustCompile(`authentication_failed|failed to authenticate|\b401\b.{0,20}unauthori[sz]ed|(?:api error|status|http)[:( ]*401\b`), Name: "authentication failed"},
	},
}

// SessionMissing implements [adapters.SessionRecognizer]: the conversation
// asked for with --resume does not exist in the CLI's store.
func (a *Adapter) SessionMissing(text string) bool {
	return strings.Contains(strings.ToLower(text), "no conversation found with session id")
}
