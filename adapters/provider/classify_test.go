package provider_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/adapters/provider"
)

func TestClassify(t *testing.T) {
	q := adapters.Verdict{Class: adapters.ClassQuota}
	u := func(r string) adapters.Verdict { return adapters.Verdict{Class: adapters.ClassUnavailable, Reason: r} }
	a := func(r string) adapters.Verdict { return adapters.Verdict{Class: adapters.ClassAuth, Reason: r} }
	for _, c := range []struct {
		status    int
		typ, code string
		want      adapters.Verdict
	}{
		// Anthropic Messages API.
		{429, "rate_limit_error", "", q},
		{400, "billing_error", "", q},
		{529, "overloaded_error", "", u("overloaded")},
		{503, "api_error", "", u("http 503")},
		{0, "api_error", "", u("http 500")},
		{504, "timeout_error", "", u("timeout")},
		{401, "authentication_error", "", a("authentication failed")},
		{403, "permission_error", "", a("permission denied")},
		{400, "invalid_request_error", "", adapters.Verdict{}}, // credit balance or a bad request: words decide
		{413, "request_too_large", "", adapters.Verdict{}},
		// OpenAI Responses and Chat Completions.
		{429, "insufficient_quota", "insufficient_quota", q},
		{429, "requests", "insufficient_quota", q},
		{429, "rate_limit_exceeded", "rate_limit_exceeded", q},
		{429, "tokens", "rate_limit_exceeded", q},
		{503, "server_error", "server_is_overloaded", u("overloaded")},
		{500, "server_error", "", u("http 500")},
		{401, "invalid_request_error", "invalid_api_key", a("invalid api key")},
		{400, "invalid_request_error", "context_length_exceeded", adapters.Verdict{}},
		// The status alone.
		{429, "", "", q},
		{401, "", "", a("authentication failed")},
		{403, "", "", a("forbidden")},
		{529, "", "", u("overloaded")},
		{502, "", "", u("http 502")},
		{400, "", "", adapters.Verdict{}},
		{404, "", "", adapters.Verdict{}},
		{0, "", "", adapters.Verdict{}},
	} {
		assert.Equal(t, c.want, provider.Classify(c.status, c.typ, c.code), "%d %q %q", c.status, c.typ, c.code)
	}
}
