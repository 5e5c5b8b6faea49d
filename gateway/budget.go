package gateway

import (
	"fmt"
	"math"
	"sync"

	"github.com/outpost-dev/outpost/outposterr"
)

// BudgetMarker starts the message of every budget refusal. Adapters and the
// harness recognize a budget stop by it (and, better, by
// Snapshot.BudgetExceeded).
const BudgetMarker = "outpost budget exceeded"

// BudgetStatus is the HTTP status of a budget refusal. 400 is the status
// every supported CLI reports once, without retrying and with the body's
// message in its failure text (checked with Claude Code 2.1.328, Codex
// 0.169.0 and Copilot CLI 1.0.102, retries left at their defaults). 403
// would not do: Claude Code and Copilot report it as an authentication
// failure, and Codex retries it (six requests over ten seconds); 429 is
// retried as a rate limit by all three.
const BudgetStatus = 400

// Budget is a cost cap in US dollars that one or more grants draw on: a
// per-turn cap is a Budget given to one grant, a per-batch cap one shared
// by every grant of the batch.
//
// The cap is checked when a request starts: once the spend recorded so far
// reaches the cap, every later request is refused with [BudgetStatus] and a
// body whose message starts with [BudgetMarker]. Spend is recorded when a
// response ends, so requests already running when the cap is crossed finish
// (the overshoot is bounded by the requests in flight; a CLI makes one at a
// time). A response whose model has no price fails the budget closed: the
// cap can no longer be enforced, so later requests are refused too.
// A Budget is safe for concurrent use.
type Budget struct {
	capUSD float64

	mu       sync.Mutex
	spent    float64
	unpriced string // a model without a price, once seen
}

// NewBudget returns a budget of capUSD dollars (positive).
func NewBudget(capUSD float64) (*Budget, error) {
	if !(capUSD > 0) || math.IsInf(capUSD, 1) {
		return nil, outposterr.New(outposterr.Configuration, "gateway budget: cap must be a positive number of dollars, got %v", capUSD)
	}
	return &Budget{capUSD: capUSD}, nil
}

// Cap returns the cap in dollars.
func (b *Budget) Cap() float64 { return b.capUSD }

// Spent returns the dollars recorded so far.
func (b *Budget) Spent() float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.spent
}

// Exceeded reports whether a request starting now would be refused, and
// the message of the refusal.
func (b *Budget) Exceeded() (bool, string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.unpriced != "":
		return true, fmt.Sprintf("%s: no price is known for model %q, so the cost cap of $%.4f cannot be enforced",
			BudgetMarker, b.unpriced, b.capUSD)
	case b.spent >= b.capUSD:
		return true, fmt.Sprintf("%s: the cost cap of $%.4f is spent ($%.4f used); raise the cap to continue",
			BudgetMarker, b.capUSD, b.spent)
	}
	return false, ""
}

// charge records the cost of one response.
func (b *Budget) charge(usd float64, priced bool, model string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !priced {
		if b.unpriced == "" {
			b.unpriced = model
			if model == "" {
				b.unpriced = "(unnamed)"
			}
		}
		return
	}
	b.spent += usd
}
