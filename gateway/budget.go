package gateway

import (
	"fmt"
	"math"
	"sync"

	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/usage"
)

// BudgetMarker starts the message of every budget refusal. Adapters and the
// harness recognize a budget stop by it (and, better, by
// Snapshot.BudgetExceeded or [Budget.Done]).
const BudgetMarker = "outpost budget exceeded"

// BudgetStatus is the HTTP status of a budget refusal. 400 is the status
// every supported CLI reports once, without retrying and with the body's
// message in its failure text (checked with Claude Code 2.1.328, Codex
// 0.169.0 and Copilot CLI 1.0.102, retries left at their defaults). 403
// would not do: Claude Code and Copilot report it as an authentication
// failure, and Codex retries it (six requests over ten seconds); 429 is
// retried as a rate limit by all three.
const BudgetStatus = 400

// Caps are the limits of a [Budget]: dollars, tokens, or both (zero: that
// limit is off; at least one must be set).
type Caps struct {
	// USD caps the cost in US dollars (needs a price for every response).
	USD float64 `json:"usd,omitempty"`
	// Tokens caps the tokens of every class (input, cached input, cache
	// writes, output; usage.Usage.Tokens). It needs no price.
	Tokens int64 `json:"tokens,omitempty"`
}

func (c Caps) valid() error {
	if c.USD < 0 || math.IsNaN(c.USD) || math.IsInf(c.USD, 0) {
		return outposterr.New(outposterr.Configuration, "gateway budget: the cost cap must be a positive number of dollars, got %v", c.USD)
	}
	if c.Tokens < 0 {
		return outposterr.New(outposterr.Configuration, "gateway budget: the token cap must be positive, got %d", c.Tokens)
	}
	if c.USD == 0 && c.Tokens == 0 {
		return outposterr.New(outposterr.Configuration, "gateway budget: set a cost cap, a token cap or both")
	}
	return nil
}

// Budget is a cap that one or more grants draw on: a per-turn cap is a
// Budget given to one grant, a per-batch cap one shared by every grant of
// the batch, and a turn of a capped batch draws on a [Budget.Sub] of the
// batch's, so both caps hold.
//
// The cap is checked when a request starts: once the spend recorded so far
// reaches a cap, every later request is refused with [BudgetStatus] and a
// body whose message starts with [BudgetMarker]. Spend is recorded when a
// response ends, so requests already running when the cap is crossed finish
// (the overshoot is bounded by the requests in flight). A response whose
// model has no price fails a cost cap closed: it can no longer be
// enforced, so later requests are refused too. A token cap needs no price.
// A Budget is safe for concurrent use.
type Budget struct {
	caps   Caps
	parent *Budget

	mu       sync.Mutex
	spent    float64
	tokens   int64
	unpriced string // a model without a price, once seen
}

// NewBudget returns a budget of capUSD dollars (positive).
func NewBudget(capUSD float64) (*Budget, error) {
	if !(capUSD > 0) {
		return nil, outposterr.New(outposterr.Configuration, "gateway budget: cap must be a positive number of dollars, got %v", capUSD)
	}
	return NewCapped(Caps{USD: capUSD})
}

// NewCapped returns a budget with the given caps.
func NewCapped(c Caps) (*Budget, error) {
	if err := c.valid(); err != nil {
		return nil, err
	}
	return &Budget{caps: c}, nil
}

// Sub returns a budget with caps c that also draws on b: every charge
// counts against both, and it refuses requests once either is spent. A nil
// b gives a budget of its own (NewCapped). Zero caps with a non-nil b give
// a budget limited by b alone.
func (b *Budget) Sub(c Caps) (*Budget, error) {
	if b == nil {
		return NewCapped(c)
	}
	if c != (Caps{}) {
		if err := c.valid(); err != nil {
			return nil, err
		}
	}
	return &Budget{caps: c, parent: b}, nil
}

// Cap returns the cost cap in dollars (0: none).
func (b *Budget) Cap() float64 { return b.caps.USD }

// Caps returns the budget's own caps.
func (b *Budget) Caps() Caps { return b.caps }

// Spent returns the dollars recorded so far.
func (b *Budget) Spent() float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.spent
}

// SpentTokens returns the tokens recorded so far.
func (b *Budget) SpentTokens() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.tokens
}

// Remaining returns what is left of the caps of b and its parents (the
// tighter of each): the caps a remote gateway enforces for a grant that
// draws on b. A limit that no budget in the chain sets stays zero.
func (b *Budget) Remaining() Caps {
	var r Caps
	for x := b; x != nil; x = x.parent {
		x.mu.Lock()
		if x.caps.USD > 0 {
			if left := math.Max(x.caps.USD-x.spent, 0); r.USD == 0 || left < r.USD {
				r.USD = left
			}
		}
		if x.caps.Tokens > 0 {
			if left := max(x.caps.Tokens-x.tokens, 0); r.Tokens == 0 || left < r.Tokens {
				r.Tokens = left
			}
		}
		x.mu.Unlock()
	}
	return r
}

// Exceeded reports whether a request starting now would be refused, and
// the message of the refusal.
func (b *Budget) Exceeded() (bool, string) {
	_, msg := b.Over()
	return msg != "", msg
}

// Over returns which cap of b or a parent refuses requests now ("cost" or
// "tokens"; "" when none does) and the message of the refusal.
func (b *Budget) Over() (reason, msg string) {
	for x := b; x != nil; x = x.parent {
		if reason, msg := x.over(); reason != "" {
			return reason, msg
		}
	}
	return "", ""
}

func (b *Budget) over() (reason, msg string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.caps.USD > 0 && b.unpriced != "":
		return "cost", fmt.Sprintf("%s: no price is known for model %q, so the cost cap of $%.4f cannot be enforced",
			BudgetMarker, b.unpriced, b.caps.USD)
	case b.caps.USD > 0 && b.spent >= b.caps.USD:
		return "cost", fmt.Sprintf("%s: the cost cap of $%.4f is spent ($%.4f used); raise the cap to continue",
			BudgetMarker, b.caps.USD, b.spent)
	case b.caps.Tokens > 0 && b.tokens >= b.caps.Tokens:
		return "tokens", fmt.Sprintf("%s: the token cap of %d is spent (%d used); raise the cap to continue",
			BudgetMarker, b.caps.Tokens, b.tokens)
	}
	return "", ""
}

// Charge records the usage of one response of model: tokens always, its
// cost when priced (else a cost cap fails closed). The gateway charges
// every measured response itself; a caller charges what a remote gateway
// measured for a grant drawing on a Sub of b.
func (b *Budget) Charge(usd float64, priced bool, model string, u usage.Usage) {
	b.charge(usd, priced, model, u.Tokens())
}

func (b *Budget) charge(usd float64, priced bool, model string, tokens int64) {
	b.mu.Lock()
	if !priced {
		if b.unpriced == "" {
			b.unpriced = model
			if model == "" {
				b.unpriced = "(unnamed)"
			}
		}
	} else {
		b.spent += usd
	}
	b.tokens += tokens
	b.mu.Unlock()
	if b.parent != nil {
		b.parent.charge(usd, priced, model, tokens)
	}
}

// CostCapped reports whether b or a parent caps the cost (and so needs a
// price for every response).
func (b *Budget) CostCapped() bool {
	for x := b; x != nil; x = x.parent {
		if x.caps.USD > 0 {
			return true
		}
	}
	return false
}

// remoteCaps are the caps a remote gateway enforces for a grant drawing
// on b: what is left, with a spent limit as its smallest positive value
// (the first response crosses it; a zero would mean no limit).
func (b *Budget) remoteCaps() Caps {
	r := b.Remaining()
	if r.USD == 0 && b.CostCapped() {
		r.USD = math.SmallestNonzeroFloat64
	}
	if r.Tokens == 0 {
		for x := b; x != nil; x = x.parent {
			if x.caps.Tokens > 0 {
				r.Tokens = 1
				break
			}
		}
	}
	return r
}

// ListPrice prices usage of model at the list prices of package usage's
// table; ok is false for a model it does not know.
func ListPrice(model string, u usage.Usage) (float64, bool) {
	p := usage.Priced(model, u)
	return p.CostUSD, p.CostKnown
}
