package codex

import (
	"regexp"
	"time"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/adapters/provider"
	"github.com/outpost-dev/outpost/adapters/reset"
)

// recognizer reads Codex's failure texts: its own wordings, then the OpenAI
// API's bodies it relays (package provider), then its generic status words.
// See the package doc for the families matched.
var recognizer = adapters.NewRecognizer(adapters.Recognition{
	// Codex's own retry notice; it is never the verdict.
	Chatter:  regexp.MustCompile(`^\s*reconnecting\.\.\.`),
	Wordings: []adapters.Wordings{wordings, provider.OpenAI, lastWordings},
	// The adapter runs Codex with TZ=UTC: zone-less times are UTC.
	Reset:      func(text string, at time.Time) (time.Time, bool) { return reset.Parse(text, at.UTC()) },
	Structured: structured,
})

// structured classifies an app-server failure by its codexErrorInfo variant
// (verified on 0.169.0: usageLimitExceeded for a plan usage limit and for
// insufficient_quota, serverOverloaded, internalServerError, and
// httpConnectionFailed or responseTooManyFailedAttempts with the HTTP status
// of the last call, read as package provider reads a status). An exec
// failure (code turn.failed) carries only words: they decide.
func structured(f adapters.FailureDetail) adapters.Verdict {
	switch f.Code {
	case "usageLimitExceeded":
		return adapters.Verdict{Class: adapters.ClassQuota}
	case "serverOverloaded":
		return adapters.Verdict{Class: adapters.ClassUnavailable, Reason: "overloaded"}
	case "internalServerError":
		return adapters.Verdict{Class: adapters.ClassUnavailable, Reason: "http 500"}
	case "unauthorized":
		return adapters.Verdict{Class: adapters.ClassAuth, Reason: "authentication failed"}
	case "httpConnectionFailed", "responseStreamConnectionFailed", "responseStreamDisconnected", "responseTooManyFailedAttempts":
		return provider.ByStatus(f.Status)
	}
	return adapters.Verdict{}
}

var wordings = adapters.Wordings{
	NotQuota: []*regexp.Regexp{
		regexp.MustCompile(`ran out of room in the model's context window`),
		regexp.MustCompile(`context (?:window|length) (?:exceeded|is full)`),
	},
	Quota: []*regexp.Regexp{
		// "You've hit your usage limit. … try again at …" (usage_limit_reached).
		regexp.MustCompile(`\byou(?:'ve| have) hit your (?:[a-z-]+ )?usage limit`),
		regexp.MustCompile(`\busage limit (?:reached|exceeded|has been reached)\b|usage_limit_reached`),
		// Codex's words for insufficient_quota: "Quota exceeded. Check your
		// plan and billing details." (the body itself is provider.OpenAI's).
		regexp.MustCompile(`\bquota exceeded\b`),
		regexp.MustCompile(`\bout of credits\b|\bspend(?:ing)? cap\b|usage_not_included`),
		// Retries exhausted on 429: quota by decision (see the package doc).
		regexp.MustCompile(`exceeded retry limit, last status: 429\b`),
	},
	Unavailable: []adapters.Reason{
		{RE: regexp.MustCompile(`too many concurrent requests|concurrency_limit`), Name: "server throttle"},
		{RE: regexp.MustCompile(`at capacity|high demand|\boverloaded\b`), Name: "overloaded"},
		{RE: regexp.MustCompile(`(?:last status|unexpected status|status)[: ]+(5\d\d)\b`), Name: "http $1"},
		{RE: regexp.MustCompile(`\b(5\d\d) (?:internal server error|bad gateway|service unavailable|gateway time-?out)`), Name: "http $1"},
		{RE: regexp.MustCompile(`stream disconnected before completion`), Name: "stream disconnected"},
		{RE: regexp.MustCompile(`connection failed|error sending request|connection (?:refused|reset|closed)|waiting for network|dns error|failed to lookup address`), Name: "connection error"},
		{RE: regexp.MustCompile(`idle timeout|timed out|timeout waiting`), Name: "timeout"},
	},
	Auth: []adapters.Reason{
		{RE: regexp.MustCompile(`refresh token (?:was )?(?:already used|has already been used)|refresh_token_reused`), Name: "refresh token reused"},
		{RE: regexp.MustCompile(`refresh token has expired|refresh_token_expired`), Name: "refresh token expired"},
		{RE: regexp.MustCompile(`refresh token was revoked|refresh_token_invalidated`), Name: "refresh token revoked"},
		{RE: regexp.MustCompile(`chatgpt login is required|not logged in|please log ?in|log out and sign in again`), Name: "login required"},
		{RE: regexp.MustCompile(`missing environment variable: ` + "`" + `?[a-z0-9_]*(?:key|token)`), Name: "missing api key"},
	},
}

// lastWordings name what the more specific words did not.
var lastWordings = adapters.Wordings{
	Auth: []adapters.Reason{
		{RE: regexp.MustCompile(`\b401 unauthorized|status[: ]+401\b|\b403 forbidden|status[: ]+403\b`), Name: "authentication failed"},
	},
}

var sessionMissing = regexp.MustCompile(`no rollout found for thread id|thread not loaded|state db missing rollout path|no saved session found`)

// SessionMissing implements [adapters.SessionRecognizer]: the thread asked
// for with resume or fork does not exist in Codex's store (0.169.0 prints
// "Error: thread/resume: thread/resume failed: no rollout found for thread
// id <id> (code -32600)" on stderr, nothing on stdout, exit 1).
func (a *Adapter) SessionMissing(text string) bool {
	return sessionMissing.MatchString(adapters.Normalize(text))
}
