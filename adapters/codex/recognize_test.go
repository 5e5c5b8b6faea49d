package codex_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/outpost-dev/outpost/adapters/codex"
)

func TestQuota(t *testing.T) {
	at := time.Date(2026, 12, 2, 9, 25, 0, 0, time.UTC)
	cases := []struct {
		text  string
		reset time.Time // zero: matched, reset unknown
	}{
		// Captured from codex 0.169.0 (fixtures quota, quota_insufficient, rate_limit).
		{"You’ve hit your usage limit. Upgrade to Pro (https://chatgpt.com/explore/pro), visit https://chatgpt.com/settings/usage to purchase more credits or try again at 12:00 PM.",
			time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)},
		{"You’ve hit your usage limit. Upgrade to Pro (https://chatgpt.com/explore/pro), visit https://chatgpt.com/settings/usage to purchase more credits or try again at Dec 3rd, 2026 12:00 AM.",
			time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)},
		{"Quota exceeded. Check your plan and billing details.", time.Time{}},
		{"exceeded retry limit, last status: 429 Too Many Requests, request id: req_011C00000000000000000000", time.Time{}},
		// PROTOCOLS §2.3 wordings.
		{"You've hit your usage limit. To get more access now, send a request to your admin or try again at 12:16 PM.",
			time.Date(2026, 12, 2, 12, 16, 0, 0, time.UTC)},
		{"You've hit your usage limit. Upgrade to Pro (https://openai.com/chatgpt/pricing) or try again in 2 days 17 hours 14 minutes.",
			at.Add(2*24*time.Hour + 17*time.Hour + 14*time.Minute)},
		{"ERROR: Quota exceeded. Check your plan and billing details.", time.Time{}},
	}
	for _, c := range cases {
		ok, reset := codex.New().Quota(c.text, at)
		assert.True(t, ok, c.text)
		assert.True(t, c.reset.Equal(reset), "%s: want %v, got %v", c.text, c.reset, reset)
	}
	// A zone-less clock time is UTC whatever the zone of at (Codex runs with TZ=UTC).
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err == nil {
		ok, reset := codex.New().Quota("You've hit your usage limit. Try again at 12:00 PM.", at.In(berlin))
		assert.True(t, ok)
		assert.True(t, time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC).Equal(reset), "got %v", reset)
	}
	for _, text := range []string{
		"Reconnecting... 1/1 (exceeded retry limit, last status: 429 Too Many Requests)",
		"stream disconnected before completion: Rate limit is exceeded. Try again in 17 seconds.; retrying 5/5 in 3.32s…",
		"Codex ran out of room in the model's context window. Start a new thread or clear earlier history before retrying.",
		"unexpected status 503 Service Unavailable: Service Unavailable",
		"",
	} {
		ok, _ := codex.New().Quota(text, at)
		assert.False(t, ok, text)
	}
}

func TestUnavailableAndAuth(t *testing.T) {
	for text, want := range map[string]string{
		"unexpected status 503 Service Unavailable: Service Unavailable, url: http://127.0.0.1:8080/v1/responses": "http 503",
		"exceeded retry limit, last status: 500 Internal Server Error":                                            "http 500",
		"Selected model is at capacity. Please try a different model.":                                            "overloaded",
		"We’re currently experiencing high demand, which may cause temporary errors.":                             "overloaded",
		`unexpected status 503: {"error":"Too many concurrent requests","code":"throttled"}`:                      "server throttle",
		"stream disconnected before completion: An error occurred while processing your request.":                 "stream disconnected",
		"Connection failed: error sending request":                                                                "connection error",
	} {
		got, ok := codex.New().Unavailable(text)
		assert.True(t, ok, text)
		assert.Equal(t, want, got, text)
	}
	_, ok := codex.New().Unavailable("Reconnecting... waiting for network (Connection failed: error sending request)")
	assert.False(t, ok, "retry chatter is no verdict")

	for text, want := range map[string]string{
		"unexpected status 401 Unauthorized: Incorrect API key provided: sk-test-****lder., url: http://127.0.0.1:8080/v1/responses": "invalid api key",
		"unexpected status 401 Unauthorized: nope":                                                                                "authentication failed",
		"Missing environment variable: `OUTPOST_CODEX_API_KEY`.":                                                                  "missing api key",
		"Your access token could not be refreshed because your refresh token was already used. Please log out and sign in again.": "refresh token reused",
		"Your access token could not be refreshed because your refresh token has expired. Please log out and sign in again.":      "refresh token expired",
		"ChatGPT login is required, but an API key is currently being used. Logging out.":                                         "login required",
	} {
		got, ok := codex.New().Auth(text)
		assert.True(t, ok, text)
		assert.Equal(t, want, got, text)
	}
	_, ok = codex.New().Auth("Quota exceeded. Check your plan and billing details.")
	assert.False(t, ok)
}

func TestSessionMissing(t *testing.T) {
	a := codex.New()
	assert.True(t, a.SessionMissing("Error: thread/resume: thread/resume failed: no rollout found for thread id 01a23600-0000-7000-8000-000000000000 (code -32600)"))
	assert.True(t, a.SessionMissing("Error: thread/read: thread/read failed: thread not loaded: x (code -32600)"))
	assert.False(t, a.SessionMissing("unexpected status 404 Not Found"))
}
