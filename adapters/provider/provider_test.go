package provider_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/adapters/claude"
	"github.com/outpost-dev/outpost/adapters/codex"
	"github.com/outpost-dev/outpost/adapters/copilot"
	"github.com/outpost-dev/outpost/adapters/provider"
)

var at = time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)

// via reads texts with the provider's wordings alone.
func via(w adapters.Wordings) *adapters.Recognizer {
	return adapters.NewRecognizer(adapters.Recognition{Wordings: []adapters.Wordings{w}})
}

// Each body reads the same through the provider's own CLI and through the
// bring-your-own-provider modes that relay it.
func TestBodiesReadAlikeInEveryCLI(t *testing.T) {
	anthropicCLIs := map[string]adapters.Adapter{"claude": claude.New(), "copilot": copilot.New()}
	openaiCLIs := map[string]adapters.Adapter{"codex": codex.New(), "copilot": copilot.New()}

	quota := []struct {
		w     adapters.Wordings
		clis  map[string]adapters.Adapter
		texts []string
	}{
		{provider.Anthropic, anthropicCLIs, []string{
			"Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits.",
			"400 Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits.",
			"API Error: Request rejected (429) · This request would exceed your organization's rate limit of 30,000 input tokens per minute (org: 00000000-0000-4000-8000-000000000000, model: claude-sonnet-4-6). Please reduce the prompt length or the maximum tokens requested, or try again later.",
			"Last error: This request would exceed the rate limit for your organization (00000000-0000-4000-8000-000000000000) of 20,000 input tokens per minute.",
			"This request would exceed your account's rate limit. Please try again later.",
			`429 {"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit"}}`,
			"You have reached your specified API usage limits. You will regain access on 2026-12-03 at 00:00 UTC.",
		}},
		{provider.OpenAI, openaiCLIs, []string{
			"You exceeded your current quota, please check your plan and billing details. For more information on this error, read the docs: https://platform.openai.com/docs/guides/error-codes/api-errors.",
			`429 {"error":{"message":"…","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`,
		}},
	}
	for _, q := range quota {
		for _, text := range q.texts {
			ok, _ := via(q.w).Quota(text, at)
			assert.True(t, ok, "provider: %s", text)
			for name, a := range q.clis {
				ok, _ := a.Quota(text, at)
				assert.True(t, ok, "%s: %s", name, text)
			}
		}
	}

	auth := []struct {
		clis       map[string]adapters.Adapter
		text, want string
	}{
		{anthropicCLIs, `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`, "invalid api key"},
		{anthropicCLIs, `{"type":"error","error":{"type":"permission_error","message":"nope"}}`, "permission denied"},
		{openaiCLIs, "Incorrect API key provided: sk-test-****lder.", "invalid api key"},
	}
	for _, c := range auth {
		for name, a := range c.clis {
			got, ok := a.Auth(c.text)
			assert.True(t, ok, "%s: %s", name, c.text)
			assert.Equal(t, c.want, got, "%s: %s", name, c.text)
		}
	}

	for name, a := range anthropicCLIs {
		got, _ := a.Unavailable(`{"type":"error","error":{"type":"api_error","message":"x"}}`)
		assert.Equal(t, "http 500", got, name)
	}
}

func TestNotEveryLimitIsQuota(t *testing.T) {
	for _, text := range []string{
		"prompt is too long: 210000 tokens > 200000 maximum",
		`{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: must be positive"}}`,
		"Rate limit reached for requests", // OpenAI's per-minute limit alone: the CLIs decide
	} {
		for _, w := range []adapters.Wordings{provider.Anthropic, provider.OpenAI} {
			ok, _ := via(w).Quota(text, at)
			assert.False(t, ok, text)
		}
	}
}
