package codex

import (
	"regexp"
	"strings"
	"time"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/adapters/reset"
)

// normalizer folds the typographic variants Codex prints (’ and ', … and
// "...") so one lower-cased pattern matches every wording of a family.
var normalizer = strings.NewReplacer("’", "'", "‘", "'", "…", "...")

// maxScan bounds the text a recognizer looks at.
const maxScan = 64 << 10

func clip(s string) string {
	if len(s) > maxScan {
		return s[:maxScan]
	}
	return s
}

func normalize(s string) string { return strings.ToLower(normalizer.Replace(clip(s))) }

var (
	// chatter is Codex's own retry notice; it is never the verdict.
	chatter = regexp.MustCompile(`^\s*reconnecting\.\.\.`)

	notQuota = []*regexp.Regexp{
		regexp.MustCompile(`ran out of room in the model's context window`),
		regexp.MustCompile(`context (?:window|length) (?:exceeded|is full)`),
	}

	quotaFamilies = []*regexp.Regexp{
		// "You've hit your usage limit. … try again at …" (usage_limit_reached).
		regexp.MustCompile(`\byou(?:'ve| have) hit your (?:[a-z-]+ )?usage limit`),
		regexp.MustCompile(`\busage limit (?:reached|exceeded|has been reached)\b|usage_limit_reached`),
		// insufficient_quota: "Quota exceeded. Check your plan and billing details."
		regexp.MustCompile(`\bquota exceeded\b|insufficient_quota|exceeded your current quota`),
		regexp.MustCompile(`\bout of credits\b|\bspend(?:ing)? cap\b|usage_not_included`),
		// Retries exhausted on 429: quota by decision (see the package doc).
		regexp.MustCompile(`exceeded retry limit, last status: 429\b`),
	}
)

// Quota reports whether text is a quota or usage-limit failure and, when the
// text says so, when it resets (resolved against at, the instant the text
// was seen; a clock time without a zone is read as UTC, the zone the adapter
// gives Codex). See the package doc for the families matched.
func (a *Adapter) Quota(text string, at time.Time) (bool, time.Time) { return Quota(text, at) }

// Quota is [Adapter.Quota] as a function.
func Quota(text string, at time.Time) (bool, time.Time) {
	if text == "" {
		return false, time.Time{}
	}
	n := normalize(text)
	if chatter.MatchString(n) {
		return false, time.Time{}
	}
	for _, re := range notQuota {
		if re.MatchString(n) {
			return false, time.Time{}
		}
	}
	for _, re := range quotaFamilies {
		if re.MatchString(n) {
			// The adapter runs Codex with TZ=UTC: zone-less times are UTC.
			t, _ := reset.Parse(clip(text), at.UTC())
			return true, t
		}
	}
	return false, time.Time{}
}

var unavailable = []adapters.Reason{
	{RE: regexp.MustCompile(`too many concurrent requests|concurrency_limit`), Name: "server throttle"},
	{RE: regexp.MustCompile(`at capacity|high demand|server_is_overloaded|\boverloaded\b`), Name: "overloaded"},
	{RE: regexp.MustCompile(`(?:last status|unexpected status|status)[: ]+(5\d\d)\b`), Name: "http $1"},
	{RE: regexp.MustCompile(`\b(5\d\d) (?:internal server error|bad gateway|service unavailable|gateway time-?out)`), Name: "http $1"},
	{RE: regexp.MustCompile(`stream disconnected before completion`), Name: "stream disconnected"},
	{RE: regexp.MustCompile(`connection failed|error sending request|connection (?:refused|reset|closed)|waiting for network|dns error|failed to lookup address`), Name: "connection error"},
	{RE: regexp.MustCompile(`idle timeout|timed out|timeout waiting`), Name: "timeout"},
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
	return adapters.MatchReason(unavailable, n)
}

var auth = []adapters.Reason{
	{RE: regexp.MustCompile(`refresh token (?:was )?(?:already used|has already been used)|refresh_token_reused`), Name: "refresh token reused"},
	{RE: regexp.MustCompile(`refresh token has expired|refresh_token_expired`), Name: "refresh token expired"},
	{RE: regexp.MustCompile(`refresh token was revoked|refresh_token_invalidated`), Name: "refresh token revoked"},
	{RE: regexp.MustCompile(`chatgpt login is required|not logged in|please log ?in|log out and sign in again`), Name: "login required"},
	{RE: regexp.MustCompile(`missing environment variable: ` + "`" + `?[a-z0-9_]*(?:key|token)`), Name: "missing api key"},
	{RE: regexp.MustCompile(`incorrect api key|invalid api key|invalid_api_key`), Name: "invalid api key"},
	{RE: regexp.MustCompile(`\b401 unauthorized|status[: ]+401\b|\b403 forbidden|status[: ]+403\b`), Name: "authentication failed"},
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

var sessionMissing = regexp.MustCompile(`no rollout found for thread id|thread not loaded|state db missing rollout path|no saved session found`)

// SessionMissing implements [adapters.SessionRecognizer]: the thread asked
// for with resume or fork does not exist in Codex's store (0.169.0 prints
// "Error: thread/resume: thread/resume failed: no rollout found for thread
// id <id> (code -32600)" on stderr, nothing on stdout, exit 1).
func (a *Adapter) SessionMissing(text string) bool {
	return sessionMissing.MatchString(strings.ToLower(clip(text)))
}
