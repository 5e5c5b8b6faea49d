// Package provider recognizes the errors of the model APIs coding-agent CLIs
// call — Anthropic's Messages API and OpenAI's Responses and Chat Completions
// APIs — wherever a CLI passes them on: in the provider's own CLI (Claude
// Code relays Anthropic's, Codex OpenAI's) and in the bring-your-own-provider
// modes of the others (Copilot CLI's anthropic and openai provider types).
// Each provider has one recognizer, shared by every adapter that can meet
// its bodies, so a body reads the same whichever CLI relays it: Anthropic's
// "Your credit balance is too low" is quota through Copilot as through Claude
// Code, OpenAI's insufficient_quota is quota through Copilot as through Codex.
//
// [Wordings] are a provider's error texts; an adapter lists them in its
// adapters.Recognition after its own (the CLI's own words name the reason
// first). The package is pure.
package provider

import (
	"regexp"

	"github.com/outpost-dev/outpost/adapters"
)

// Anthropic are the error texts of Anthropic's Messages API
// ({"type":"error","error":{"type","message"}}) and the wordings of its
// messages.
//
// Quota: the credit balance ("Your credit balance is too low to access the
// Anthropic API."), the spend cap ("You have reached your specified API
// usage limits. You will regain access on <date> at <time> UTC."), and the
// organization rate limit (429 rate_limit_error, "This request would exceed
// your organization's rate limit of N input tokens per minute (org: …,
// model: …)", older "… the rate limit for your organization (…) of N input
// tokens per minute", or "… your account's rate limit"). The last is quota
// by decision: it is the account's own limit, a CLI fails only after its own
// retries, and the caller must wait rather than retry at once.
// Unavailable: api_error (500) and overloaded_error bodies. Auth: "invalid
// x-api-key", permission_error, authentication_error.
var Anthropic = adapters.Wordings{
	Quota: []*regexp.Regexp{
		regexp.MustCompile(`\bcredit balance (?:is )?too low\b`),
		regexp.MustCompile(`\byou have reached your specified api usage limits\b|\bwill regain access on\b`),
		regexp.MustCompile(`would exceed (?:your (?:account's|organization's) rate limit|the rate limit for your organization)`),
		regexp.MustCompile(`"type"\s*:\s*"(?:rate_limit|billing)_error"`),
	},
	Unavailable: []adapters.Reason{
		{RE: regexp.MustCompile(`"type"\s*:\s*"overloaded_error"`), Name: "overloaded"},
		{RE: regexp.MustCompile(`"type"\s*:\s*"api_error"`), Name: "http 500"},
	},
	Auth: []adapters.Reason{
		{RE: regexp.MustCompile(`invalid (?:x-)?api[ -]?key`), Name: "invalid api key"},
		{RE: regexp.MustCompile(`"type"\s*:\s*"permission_error"`), Name: "permission denied"},
		{RE: regexp.MustCompile(`\bauthentication_error\b`), Name: "authentication failed"},
	},
}

// OpenAI are the error texts of OpenAI's Responses and Chat Completions APIs
// ({"error":{"message","type","param","code"}}).
//
// Quota: insufficient_quota ("You exceeded your current quota, please check
// your plan and billing details."). Unavailable: server_is_overloaded. Auth:
// "Incorrect API key provided", invalid_api_key.
var OpenAI = adapters.Wordings{
	Quota: []*regexp.Regexp{
		regexp.MustCompile(`insufficient_quota|exceeded your current quota`),
	},
	Unavailable: []adapters.Reason{
		{RE: regexp.MustCompile(`server_is_overloaded`), Name: "overloaded"},
	},
	Auth: []adapters.Reason{
		{RE: regexp.MustCompile(`incorrect api key|invalid api key|invalid_api_key`), Name: "invalid api key"},
	},
}
