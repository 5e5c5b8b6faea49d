package gateway

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// EvidenceKind is what the wire says about why a turn failed.
type EvidenceKind string

// Evidence kinds, in the order of [Snapshot.Evidence]'s precedence.
const (
	// EvidenceBudget: the gateway refused a request for the grant's budget.
	EvidenceBudget EvidenceKind = "budget"
	// EvidenceQuota: the provider refused for an exhausted plan, quota or
	// credit (402; 429 with Anthropic's unified status "rejected", or an
	// OpenAI insufficient_quota / usage_limit_reached error).
	EvidenceQuota EvidenceKind = "quota"
	// EvidenceAuth: the provider rejected the credential (401, 403).
	EvidenceAuth EvidenceKind = "auth"
	// EvidenceOverloaded: 529, or 503 with an overload error.
	EvidenceOverloaded EvidenceKind = "overloaded"
	// EvidenceUnavailable: 502, 503, 504, or the upstream was unreachable.
	EvidenceUnavailable EvidenceKind = "unavailable"
	// EvidenceServerError: another 5xx.
	EvidenceServerError EvidenceKind = "server_error"
	// EvidenceRateLimit: 429 without quota signs (retryable).
	EvidenceRateLimit EvidenceKind = "rate_limit"
	// EvidenceRequest: another 4xx (a request the provider refused, or one
	// the gateway does not forward).
	EvidenceRequest EvidenceKind = "request"
)

// Evidence is the classification the wire supports for a failed turn.
type Evidence struct {
	Kind EvidenceKind `json:"kind"`
	// Status is the HTTP status of the deciding exchange; Exchange its Seq.
	Status   int `json:"status"`
	Exchange int `json:"exchange"`
	// Reason is a short name for an outage ("overloaded", "http 503",
	// "upstream unreachable"), for outposterr's Unavailable detail.
	Reason string `json:"reason,omitempty"`
	// ResetAt is when access returns, when the response said so.
	ResetAt time.Time `json:"reset_at,omitzero"`
	// Message is the deciding response's error message (bounded,
	// credential-free).
	Message string `json:"message,omitempty"`
}

// Evidence returns what the wire says about a failed turn, and false when
// it says nothing: no request failed, or the last request succeeded (a
// turn whose model calls all ended well failed for another reason).
//
// Precedence: a budget refusal anywhere in the turn decides (the gateway
// stopped the turn on purpose); otherwise the last exchange decides, since
// earlier failures were retried past by the CLI. See the package
// documentation for how a harness combines this with the CLI's own words.
func (s Snapshot) Evidence() (Evidence, bool) {
	for _, e := range s.Exchanges {
		if e.Refusal == RefusedBudget {
			return Evidence{Kind: EvidenceBudget, Status: e.Status, Exchange: e.Seq, Message: errMessage(e)}, true
		}
	}
	for i := len(s.Exchanges) - 1; i >= 0; i-- {
		e := s.Exchanges[i]
		if e.Refusal == ClientGone {
			continue // the lease hung up; says nothing about the provider
		}
		if !e.Failed() {
			return Evidence{}, false
		}
		return classify(e), true
	}
	return Evidence{}, false
}

// classify reads one failed exchange.
func classify(e Exchange) Evidence {
	ev := Evidence{Status: e.Status, Exchange: e.Seq, Message: errMessage(e)}
	w := e.Error
	if w == nil {
		w = &WireError{}
	}
	ev.ResetAt = w.ResetAt
	code := strings.ToLower(w.Type + " " + w.Code)
	switch {
	case e.Refusal == Unreachable:
		ev.Kind, ev.Reason = EvidenceUnavailable, "upstream unreachable"
	case e.Answered == ByGateway:
		ev.Kind = EvidenceRequest
	case e.Status == http.StatusPaymentRequired:
		ev.Kind = EvidenceQuota
	case e.Status == http.StatusTooManyRequests &&
		(strings.EqualFold(w.RateLimitStatus, "rejected") || strings.Contains(code, "insufficient_quota") ||
			strings.Contains(code, "usage_limit_reached")):
		ev.Kind = EvidenceQuota
	case e.Status == http.StatusTooManyRequests:
		ev.Kind = EvidenceRateLimit
	case e.Status == http.StatusUnauthorized, e.Status == http.StatusForbidden:
		ev.Kind = EvidenceAuth
	case e.Status == 529, e.Status == http.StatusServiceUnavailable && strings.Contains(code, "overloaded"):
		ev.Kind, ev.Reason = EvidenceOverloaded, "overloaded"
	case e.Status == http.StatusBadGateway, e.Status == http.StatusServiceUnavailable, e.Status == http.StatusGatewayTimeout:
		ev.Kind, ev.Reason = EvidenceUnavailable, "http "+strconv.Itoa(e.Status)
	case e.Status >= 500:
		ev.Kind, ev.Reason = EvidenceServerError, "http "+strconv.Itoa(e.Status)
	default:
		ev.Kind = EvidenceRequest
	}
	return ev
}

func errMessage(e Exchange) string {
	if e.Error == nil {
		return ""
	}
	return e.Error.Message
}
