package gateway

import (
	"net/http"
	"time"

	"github.com/outpost-dev/outpost/usage"
)

// Answered says who answered a request.
type Answered string

// Who answered.
const (
	// ByUpstream: the upstream's own response, passed through.
	ByUpstream Answered = "upstream"
	// ByGateway: the gateway refused or failed the request itself (budget,
	// route, upstream unreachable); Exchange.Refusal says why.
	ByGateway Answered = "gateway"
)

// Refusal is why the gateway answered a request itself.
type Refusal string

// Refusals.
const (
	// RefusedBudget: the grant's budget was spent before the request
	// started (status [BudgetStatus], body with [BudgetMarker]).
	RefusedBudget Refusal = "budget"
	// RefusedRoute: the method and path are not on the allowlist (404).
	RefusedRoute Refusal = "route"
	// RefusedUpgrade: a protocol upgrade (WebSocket) was asked for (426);
	// Codex then falls back to HTTP streaming.
	RefusedUpgrade Refusal = "upgrade"
	// RefusedTooLarge: the request body exceeded Options.MaxRequestBytes (413).
	RefusedTooLarge Refusal = "too_large"
	// Unreachable: the upstream could not be reached or failed before
	// sending response headers (502).
	Unreachable Refusal = "unreachable"
	// ClientGone: the lease went away (or the grant was revoked) before the
	// upstream answered; no status was sent.
	ClientGone Refusal = "client_gone"
)

// Exchange is one request of a grant and what came back, measured on the
// wire.
type Exchange struct {
	// Seq numbers the grant's requests from 0, in arrival order.
	Seq int `json:"seq"`
	// Started is when the request arrived; Duration lasts until the last
	// response byte (or the failure).
	Started  time.Time     `json:"started"`
	Duration time.Duration `json:"duration"`
	Method   string        `json:"method"`
	Path     string        `json:"path"`
	API      API           `json:"api,omitempty"`
	// Status is the HTTP status the lease received; 0 when none was sent.
	Status   int      `json:"status"`
	Answered Answered `json:"answered"`
	Refusal  Refusal  `json:"refusal,omitempty"`
	// Stream is true for a server-sent event stream.
	Stream bool `json:"stream,omitempty"`
	// Model is the model named by the response.
	Model string `json:"model,omitempty"`
	// Usage is the response's token usage; HasUsage says it was found.
	// Usage.Complete is false when the response was cut before its final
	// usage (the figures are then a lower bound).
	Usage    usage.Usage `json:"usage"`
	HasUsage bool        `json:"has_usage,omitempty"`
	// CostUSD prices Usage with the grant's PriceFunc; Priced says it could.
	CostUSD float64 `json:"cost_usd,omitempty"`
	Priced  bool    `json:"priced,omitempty"`
	// Estimate is what the budget was charged for a successful model call
	// whose usage did not come whole (cut before its closing usage, or sent
	// without any): a bound from the bytes that passed, its CostUSD priced
	// when CostKnown (see the package doc). Nil when Usage was charged.
	Estimate *usage.Usage `json:"estimate,omitempty"`
	// Error describes a failed response (status >= 400).
	Error *WireError `json:"error,omitempty"`
	// modelCall marks an endpoint whose success must carry usage.
	modelCall bool
	done      bool
}

// WireError is what a failed response said, decoded from its body and
// headers. Texts are bounded, and any occurrence of the grant's real
// credential is removed.
type WireError struct {
	// Type and Code are the API's error type and code
	// ("rate_limit_error", "insufficient_quota", "usage_limit_reached"...).
	Type    string `json:"type,omitempty"`
	Code    string `json:"code,omitempty"`
	Message string `json:"message,omitempty"`
	// RetryAfter is the retry-after header.
	RetryAfter time.Duration `json:"retry_after,omitempty"`
	// RateLimitStatus is Anthropic's anthropic-ratelimit-unified-status
	// header ("rejected" for an exhausted subscription window).
	RateLimitStatus string `json:"rate_limit_status,omitempty"`
	// ResetAt is when access returns, when the response said so
	// (anthropic-ratelimit-unified-reset, resets_at).
	ResetAt time.Time `json:"reset_at,omitzero"`
}

// Snapshot is what the gateway measured for one grant (one turn).
type Snapshot struct {
	Label string `json:"label,omitempty"`
	// Requests counts the requests the lease made with the placeholder,
	// refused ones included.
	Requests int `json:"requests"`
	// Statuses lists the status of every request, in arrival order (0: no
	// status was sent).
	Statuses []int `json:"statuses"`
	// Models lists the models responses named, in order of first use.
	Models []string `json:"models,omitempty"`
	// Usage sums the usage of every response. CostUSD is set only when
	// every response with usage was priced (see [Snapshot.Priced]).
	// Complete is false when a model call's successful response carried no
	// usage or was cut short before its final usage.
	Usage usage.Usage `json:"usage"`
	// BudgetExceeded is true when a request was refused for the budget.
	BudgetExceeded bool `json:"budget_exceeded,omitempty"`
	// Dropped counts the requests past the gateway's
	// Options.MaxRequestsPerGrant: refused, counted in Requests, not
	// recorded in Exchanges or Statuses.
	Dropped int `json:"dropped,omitempty"`
	// Exchanges holds every request in detail.
	Exchanges []Exchange `json:"exchanges"`
}

func newSnapshot(label string, ex []Exchange) Snapshot {
	s := Snapshot{Label: label, Requests: len(ex), Exchanges: ex, Statuses: make([]int, len(ex))}
	s.Usage.Complete = true
	priced, anyUsage, seen := true, false, map[string]bool{}
	for i, e := range ex {
		s.Statuses[i] = e.Status
		if e.Model != "" && !seen[e.Model] {
			seen[e.Model] = true
			s.Models = append(s.Models, e.Model)
		}
		if e.Refusal == RefusedBudget {
			s.BudgetExceeded = true
		}
		if e.HasUsage {
			anyUsage = true
			u := e.Usage
			u.CostUSD = e.CostUSD
			s.Usage = s.Usage.Add(u)
			if !e.Priced {
				priced = false
			}
		} else if e.modelCall && e.Answered == ByUpstream && e.Status >= 200 && e.Status < 300 {
			s.Usage.Complete = false
		}
	}
	if !priced || !anyUsage {
		s.Usage.CostUSD = 0
	}
	return s
}

// Since returns the part of s after prev, an earlier snapshot of the same
// grant: the requests of one turn of a warm session that keeps its grant.
func (s Snapshot) Since(prev Snapshot) Snapshot {
	n := min(max(prev.Requests-prev.Dropped, 0), len(s.Exchanges))
	out := newSnapshot(s.Label, s.Exchanges[n:])
	out.Dropped = max(s.Dropped-prev.Dropped, 0)
	out.Requests += out.Dropped
	return out
}

// Priced reports whether Usage.CostUSD covers every response with usage.
func (s Snapshot) Priced() bool {
	for _, e := range s.Exchanges {
		if e.HasUsage && !e.Priced {
			return false
		}
	}
	return true
}

// Failed reports whether the exchange's response was a failure.
func (e Exchange) Failed() bool {
	return e.Status == 0 || e.Status >= http.StatusBadRequest
}
