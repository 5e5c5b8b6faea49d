package claude_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/adapters/claude"
)

func loc(t *testing.T, name string) *time.Location {
	t.Helper()
	l, err := time.LoadLocation(name)
	require.NoError(t, err)
	return l
}

// at is when the texts below were "seen": 2026-06-10 15:00 UTC.
var at = time.Date(2026, 6, 10, 15, 0, 0, 0, time.UTC)

func TestQuota(t *testing.T) {
	a := claude.New()
	cases := []struct {
		name  string
		text  string
		reset time.Time // zero: matched, reset unknown
	}{
		// PROTOCOLS §1.3, verbatim.
		{"session limit", "You've hit your session limit · resets 12:50am (America/Los_Angeles)",
			time.Date(2026, 6, 11, 0, 50, 0, 0, loc(t, "America/Los_Angeles"))},
		{"session limit -p", "You've hit your session limit · resets 3:50pm (Asia/Tokyo)",
			time.Date(2026, 6, 11, 15, 50, 0, 0, loc(t, "Asia/Tokyo"))},
		{"older wording", "You've hit your limit · resets 3:30am (Asia/Calcutta)",
			time.Date(2026, 6, 11, 3, 30, 0, 0, loc(t, "Asia/Calcutta"))},
		{"in result, dotted", "You've hit your limit · resets at 4 a.m. (Asia/Tokyo)",
			time.Date(2026, 6, 11, 4, 0, 0, 0, loc(t, "Asia/Tokyo"))},
		{"in result, elided zone", "You've hit your limit · resets at 4 a.m. (Asia/<…>)", time.Time{}},
		{"weekly", "Weekly limit reached ∙ resets 5am", time.Date(2026, 6, 11, 5, 0, 0, 0, time.UTC)},
		{"5-hour older", "5-hour limit reached ∙ resets 3am", time.Date(2026, 6, 11, 3, 0, 0, 0, time.UTC)},
		{"raw -p epoch", "Claude AI usage limit reached|1762952400", time.Unix(1762952400, 0)},
		{"TUI older", "Claude usage limit reached. Your limit will reset at 9am (America/Chicago).",
			time.Date(2026, 6, 11, 9, 0, 0, 0, loc(t, "America/Chicago"))},
		{"weekly member", "You've hit your weekly limit · resets Mon 9am", time.Date(2026, 6, 15, 9, 0, 0, 0, time.UTC)},
		{"opus member (3pm seen at 3pm: now)", "You’ve hit your Opus limit ∙ resets 3pm", time.Date(2026, 6, 10, 15, 0, 0, 0, time.UTC)},
		{"sonnet member", "You've hit your Sonnet limit · resets 4:15pm", time.Date(2026, 6, 10, 16, 15, 0, 0, time.UTC)},
		{"usage credits member", "You've hit your usage credit limit · resets 9am", time.Date(2026, 6, 11, 9, 0, 0, 0, time.UTC)},
		{"API-key org rate limit (quota by decision)",
			`429 {"type":"error","error":{"type":"rate_limit_error","message":"This request would exceed your account's rate limit. Please try again later."}}`,
			time.Time{}},
		{"spend cap", "You have reached your specified API usage limits. You will regain access on 2026-04-01 at 00:00 UTC.",
			time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)},
		{"credits", "Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits.", time.Time{}},
		{"credits TUI", "Credit balance too low · Add funds: https://console.anthropic.com/settings/billing", time.Time{}},
		{"upper case", "YOU'VE HIT YOUR SESSION LIMIT · RESETS 5AM", time.Date(2026, 6, 11, 5, 0, 0, 0, time.UTC)},
		// Captured from 2.1.328 against outposttest.
		{"captured 5-hour", "You've hit your 5-hour limit · resets 11am (UTC)", time.Date(2026, 6, 11, 11, 0, 0, 0, time.UTC)},
		{"captured weekly", "You've hit your weekly limit · resets Dec 5, 11am (UTC)", time.Date(2026, 12, 5, 11, 0, 0, 0, time.UTC)},
		{"captured opus", "You've hit your Opus limit · resets Dec 8, 2pm (UTC)", time.Date(2026, 12, 8, 14, 0, 0, 0, time.UTC)},
		{"captured org rate limit", "API Error: Request rejected (429) · This request would exceed your account's rate limit. Please try again later.", time.Time{}},
		{"captured spend cap", "API Error: 400 You have reached your specified API usage limits. You will regain access on 2026-12-02 at 11:00 UTC.",
			time.Date(2026, 12, 2, 11, 0, 0, 0, time.UTC)},
		{"captured credits", "Credit balance is too low", time.Time{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ok, reset := a.Quota(c.text, at)
			require.True(t, ok, c.text)
			if c.reset.IsZero() {
				assert.True(t, reset.IsZero(), "got reset %v", reset)
			} else {
				assert.True(t, c.reset.Equal(reset), "want %v, got %v", c.reset, reset)
			}
		})
	}
}

func TestQuotaNegatives(t *testing.T) {
	for _, text := range []string{
		"API Error: Server is temporarily limiting requests (not your usage limit) · Rate limited",
		"Approaching usage limit · resets at 2am",
		"Prompt is too long",
		"API Error: 400 prompt is too long: 210000 tokens > 200000 maximum",
		"Context limit reached · /compact or /clear to continue",
		"API Error: 529 Overloaded. This is a server-side issue, usually temporary — try again in a moment. If it persists, check https://status.claude.com.",
		`API Error (429 {"type":"error","error":{"type":"rate_limit_error","message":"This request would exceed your account's rate limit."}}) · Retrying in 4 seconds… (attempt 4/10)`,
		"API Error (Connection error.)",
		"Failed to authenticate. API Error: 401 Invalid bearer token",
		"Not logged in · Please run /login",
		"No conversation found with session ID: abc",
		"I hit the limit of what I can do here; the tests reset at 5am.",
		"Reached max turns limit",
		"",
	} {
		ok, reset := claude.New().Quota(text, at)
		assert.False(t, ok, text)
		assert.True(t, reset.IsZero())
	}
}

func TestUnavailable(t *testing.T) {
	cases := []struct{ text, reason string }{
		{"API Error: 529 Overloaded. This is a server-side issue, usually temporary — try again in a moment. If it persists, check https://status.claude.com.", "overloaded"},
		{`API Error: 529 {"type":"error","error":{"type":"overloaded_error","message":"Overloaded. https://docs.claude.com/en/api/errors"},"request_id":"req_011CXYZ"}`, "overloaded"},
		{"API Error (Connection error.)", "connection error"},
		{"API Error (Request timed out.)", "timeout"},
		{"API Error: Server is temporarily limiting requests (not your usage limit) · Rate limited", "server throttle"},
		{"API Error: 500 Internal server error", "http 500"},
		{`API Error: 502 <html>Bad Gateway</html>`, "http 502"},
		{"Service Unavailable", "http 503"},
		{`{"type":"error","error":{"type":"api_error","message":"Internal server error"}}`, "http 500"},
		{"connect ECONNREFUSED 127.0.0.1:443", "connection error"},
		{"getaddrinfo ENOTFOUND api.anthropic.com", "connection error"},
		{"socket hang up", "connection error"},
		// Captured from 2.1.328 against outposttest.
		{"API Error: 529 Overloaded. This is a server-side issue, usually temporary — try again in a moment. If it persists, check your inference gateway (127.0.0.1:34937).", "overloaded"},
		{"API Error: 503 Service Unavailable. This is a server-side issue, usually temporary — try again in a moment. If it persists, check your inference gateway (127.0.0.1:36889).", "http 503"},
		{"API Error: Connection refused — a firewall or proxy may be blocking it (ECONNREFUSED)", "connection error"},
		{"Request timed out. If the API is slow to answer, or a proxy or gateway holds responses, set API_TIMEOUT_MS above 2000.", "timeout"},
	}
	a := claude.New()
	for _, c := range cases {
		r, ok := a.Unavailable(c.text)
		assert.True(t, ok, c.text)
		assert.Equal(t, c.reason, r, c.text)
	}
	for _, text := range []string{
		`API Error (529 {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}) · Retrying in 4 seconds… (attempt 4/10)`,
		"API Error (Request timed out.) · Retrying in 1 seconds… (attempt 1/10)",
		"Claude AI usage limit reached|1762952400",
		"You've hit your session limit · resets 12:50am (America/Los_Angeles)",
		"Failed to authenticate. API Error: 401 Invalid bearer token",
		"API Error: 400 You have reached your specified API usage limits.",
		"Prompt is too long",
		"",
	} {
		r, ok := a.Unavailable(text)
		assert.False(t, ok, "%s -> %s", text, r)
	}
}

func TestAuth(t *testing.T) {
	cases := []struct{ text, reason string }{
		{`API Error: 401 {"type":"error","error":{"type":"authentication_error","message":"Invalid bearer token"}}`, "invalid bearer token"},
		{`Failed to authenticate. API Error: 401 {"type":"error","error":{"type":"authentication_error","message":"OAuth token has expired. Please obtain a new token or refresh your existing token."},"request_id":"req_1"} · Please run /login`, "not logged in"},
		{`Failed to authenticate. API Error: 401 {"type":"error","error":{"type":"authentication_error","message":"OAuth token has expired. Please obtain a new token or refresh your existing token."}}`, "oauth token expired"},
		{"Invalid OAuth token. The provided token was not found or is malformed.", "invalid oauth token"},
		{"Not logged in · Please run /login", "not logged in"},
		{"Invalid API key · Please run /login", "not logged in"},
		{"Invalid API key", "invalid api key"},
		{`{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`, "invalid api key"},
		{`API Error: 401 {"type":"error","error":{"type":"authentication_error","message":"nope"}}`, "authentication failed"},
		{`API Error: 403 {"type":"error","error":{"type":"permission_error","message":"OAuth authentication is currently not supported."}}`, "permission denied"},
		// Captured from 2.1.328 against outposttest.
		{"Failed to authenticate. API Error: 401 Invalid bearer token", "invalid bearer token"},
	}
	a := claude.New()
	for _, c := range cases {
		r, ok := a.Auth(c.text)
		assert.True(t, ok, c.text)
		assert.Equal(t, c.reason, r, c.text)
	}
	for _, text := range []string{
		"You've hit your session limit · resets 12:50am (America/Los_Angeles)",
		"API Error: 529 Overloaded",
		"API Error (Connection error.)",
		"Credit balance is too low",
		"The tokenizer has 4010 entries", // digits containing 401
		"",
	} {
		r, ok := a.Auth(text)
		assert.False(t, ok, "%s -> %s", text, r)
	}
}

func TestRecognizersHugeText(t *testing.T) {
	huge := strings.Repeat("x", 1<<20) + " Credit balance too low"
	ok, _ := claude.New().Quota(huge, at)
	assert.False(t, ok, "only the first 64 KiB are scanned")
	ok, _ = claude.New().Quota("Credit balance too low "+huge, at)
	assert.True(t, ok)
}

// apiFailure is a failure event as the decoder makes it of a synthetic
// message: Claude's error word, api_error_status and api_error_type.
func apiFailure(text, word string, status int, typ string) adapters.Event {
	return adapters.Event{Kind: adapters.KindFailure, Text: text, Time: at,
		Failure: &adapters.FailureDetail{Code: word, Status: status, ProviderType: typ}}
}

func TestStructuredFieldsFirst(t *testing.T) {
	a := claude.New()
	// An organization rate limit in words no pattern knows is still quota:
	// the 429 rate_limit_error decides.
	for _, ev := range []adapters.Event{
		apiFailure("API Error: Request rejected (429) · Your organization is over its per-minute budget.", "rate_limit", 429, "rate_limit_error"),
		apiFailure("API Error: Request rejected (429) · Your organization is over its per-minute budget.", "api_error", 429, "rate_limit_error"),
		apiFailure("Something about billing", "billing_error", 400, "invalid_request_error"),
	} {
		ok, reset := adapters.FailureQuota(a, ev)
		assert.True(t, ok, ev.Text)
		assert.True(t, reset.IsZero())
		_, ok = adapters.FailureUnavailable(a, ev)
		assert.False(t, ok, ev.Text)
	}
	// The reset still comes from the words.
	ok, reset := adapters.FailureQuota(a, apiFailure("You've hit your 5-hour limit · resets 11am (UTC)", "rate_limit", 429, ""))
	assert.True(t, ok)
	assert.Equal(t, time.Date(2026, 6, 10, 11, 0, 0, 0, time.UTC).Add(24*time.Hour), reset)

	// The server throttle is a 429 rate_limit too; its words say it is none.
	throttle := apiFailure("API Error: Server is temporarily limiting requests (not your usage limit) · Rate limited", "rate_limit", 429, "rate_limit_error")
	ok, _ = adapters.FailureQuota(a, throttle)
	assert.False(t, ok)
	name, ok := adapters.FailureUnavailable(a, throttle)
	assert.True(t, ok)
	assert.Equal(t, "server throttle", name)

	// So is a model at capacity (2.1.328 words it with error rate_limit).
	highLoad := apiFailure("Opus is experiencing high load, please use /model to switch to Sonnet", "rate_limit", 0, "")
	ok, _ = adapters.FailureQuota(a, highLoad)
	assert.False(t, ok)
	name, _ = adapters.FailureUnavailable(a, highLoad)
	assert.Equal(t, "overloaded", name)

	// Outages and authentication failures: fields decide, words name.
	for _, c := range []struct {
		ev          adapters.Event
		unavailable string
		auth        string
	}{
		{apiFailure("API Error: 529 Overloaded.", "overloaded", 529, "overloaded_error"), "overloaded", ""},
		{apiFailure("API Error: something new", "server_error", 503, "api_error"), "http 503", ""},
		{apiFailure("API Error: Connection refused (ECONNREFUSED)", "server_error", 0, ""), "connection error", ""},
		{apiFailure("Failed to authenticate. API Error: 401 Invalid bearer token", "authentication_failed", 401, "authentication_error"), "", "invalid bearer token"},
		{apiFailure("API Error: 401 nothing known", "unknown", 401, "authentication_error"), "", "authentication failed"},
		{apiFailure("API Error: 403 nothing known", "unknown", 403, "permission_error"), "", "permission denied"},
	} {
		ok, _ := adapters.FailureQuota(a, c.ev)
		assert.False(t, ok, c.ev.Text)
		name, _ := adapters.FailureUnavailable(a, c.ev)
		assert.Equal(t, c.unavailable, name, c.ev.Text)
		name, _ = adapters.FailureAuth(a, c.ev)
		assert.Equal(t, c.auth, name, c.ev.Text)
	}

	// invalid_request_error decides nothing: the words do (spend cap: quota;
	// a malformed request: nothing).
	ok, _ = adapters.FailureQuota(a, apiFailure("API Error: 400 You have reached your specified API usage limits.", "unknown", 400, "invalid_request_error"))
	assert.True(t, ok)
	ok, _ = adapters.FailureQuota(a, apiFailure("API Error: 400 prompt is too long", "invalid_request", 400, "invalid_request_error"))
	assert.False(t, ok)
}

func TestTurnsExhausted(t *testing.T) {
	a := claude.New()
	// The result line of a turn stopped by --max-turns (Claude Code 2.1.328).
	evs := a.NewDecoder().Decode([]byte(`{"type":"result","subtype":"error_max_turns","is_error":true,"num_turns":2,` +
		`"terminal_reason":"max_turns","errors":["Reached maximum number of turns (1)"],"session_id":"s"}`))
	var fin *adapters.FinishedDetail
	for _, ev := range evs {
		if ev.Kind == adapters.KindFinished {
			fin = ev.Finished
		}
	}
	require.NotNil(t, fin, "%+v", evs)
	assert.True(t, a.TurnsExhausted(*fin), "max-turns result recognized")
	assert.False(t, a.TurnsExhausted(adapters.FinishedDetail{OK: false, Reason: "error_during_execution"}))
	assert.False(t, a.TurnsExhausted(adapters.FinishedDetail{OK: true, Reason: "max_turns"}))
}
