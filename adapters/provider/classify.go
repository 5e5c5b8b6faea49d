package provider

import (
	"fmt"

	"github.com/outpost-dev/outpost/adapters"
)

// Classify classifies a model API error by the fields of its body and its
// HTTP status, as a CLI reports them (adapters.FailureDetail's Status,
// ProviderType and ProviderCode). The two APIs' vocabularies do not clash,
// so one function reads both:
//
//	quota        Anthropic rate_limit_error, billing_error; OpenAI
//	             insufficient_quota, rate_limit_exceeded (type or code)
//	unavailable  Anthropic overloaded_error ("overloaded"), api_error and
//	             OpenAI server_error ("http <status>", 500 without one),
//	             timeout_error ("timeout"); OpenAI server_is_overloaded and
//	             slow_down ("overloaded")
//	auth         Anthropic authentication_error ("authentication failed"),
//	             permission_error ("permission denied"); OpenAI
//	             invalid_api_key ("invalid api key")
//
// Without a type or code the status decides: 429 quota, 401 "authentication
// failed", 403 "forbidden", 529 "overloaded", other 5xx "http <status>".
// Anything else — invalid_request_error above all, which carries the credit
// balance and spend cap as well as malformed requests — decides nothing: the
// words must. A 429 is quota by decision (see [Anthropic]): a CLI fails on it
// only after its own retries, and the caller must wait.
func Classify(status int, typ, code string) adapters.Verdict {
	either := func(vs ...string) bool {
		for _, v := range vs {
			if typ == v || code == v {
				return true
			}
		}
		return false
	}
	switch {
	case either("rate_limit_error", "billing_error", "insufficient_quota", "rate_limit_exceeded"):
		return adapters.Verdict{Class: adapters.ClassQuota}
	case either("overloaded_error", "server_is_overloaded", "slow_down"):
		return unavailable("overloaded")
	case either("api_error", "server_error"):
		return unavailable(httpReason(status, 500))
	case either("timeout_error"):
		return unavailable("timeout")
	case either("authentication_error"):
		return auth("authentication failed")
	case either("permission_error"):
		return auth("permission denied")
	case either("invalid_api_key"):
		return auth("invalid api key")
	case typ == "" && code == "":
		return ByStatus(status)
	}
	return adapters.Verdict{}
}

// ByStatus classifies a failed model call by its HTTP status alone (see
// [Classify]); statuses below 400 and other 4xx decide nothing.
func ByStatus(status int) adapters.Verdict {
	switch {
	case status == 429:
		return adapters.Verdict{Class: adapters.ClassQuota}
	case status == 401:
		return auth("authentication failed")
	case status == 403:
		return auth("forbidden")
	case status == 529:
		return unavailable("overloaded")
	case status >= 500 && status <= 599:
		return unavailable(httpReason(status, 0))
	}
	return adapters.Verdict{}
}

func unavailable(reason string) adapters.Verdict {
	return adapters.Verdict{Class: adapters.ClassUnavailable, Reason: reason}
}

func auth(reason string) adapters.Verdict {
	return adapters.Verdict{Class: adapters.ClassAuth, Reason: reason}
}

// httpReason names an HTTP status, or def when there is none.
func httpReason(status, def int) string {
	if status == 0 {
		status = def
	}
	return fmt.Sprintf("http %d", status)
}
