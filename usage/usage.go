// Package usage accounts for the tokens and money a turn consumed.
//
// CLIs report usage in different shapes: per model message (Claude repeats a
// message's usage once per content block), per turn, thread-cumulative (Codex),
// or only after exit (Copilot session files). A [Ledger] takes every report of a
// turn and produces one [Usage]: message reports are de-duplicated by message
// id and summed, a turn-level total reported by the CLI replaces that sum (it is
// authoritative and includes cost), and Complete is false whenever a counter
// is known to be missing.
package usage

// Usage is the normalized token and cost account of one turn.
type Usage struct {
	// Input counts uncached input tokens.
	Input int64 `json:"input"`
	// Cached counts input tokens read from the prompt cache.
	Cached int64 `json:"cached"`
	// CacheCreated counts input tokens written to the prompt cache.
	CacheCreated int64 `json:"cache_created"`
	// Output counts output tokens, reasoning included.
	Output int64 `json:"output"`
	// Reasoning counts the reasoning part of Output when the CLI reports it.
	Reasoning int64 `json:"reasoning,omitempty"`
	// CostUSD is the cost the CLI reported, or zero when it reports none.
	CostUSD float64 `json:"cost_usd"`
	// Complete is false when some counter is known to be missing, so the
	// figures are a lower bound.
	Complete bool `json:"complete"`
}

// Add returns u + v; Complete holds only if both are complete.
func (u Usage) Add(v Usage) Usage {
	return Usage{
		Input:        u.Input + v.Input,
		Cached:       u.Cached + v.Cached,
		CacheCreated: u.CacheCreated + v.CacheCreated,
		Output:       u.Output + v.Output,
		Reasoning:    u.Reasoning + v.Reasoning,
		CostUSD:      u.CostUSD + v.CostUSD,
		Complete:     u.Complete && v.Complete,
	}
}

// Sub returns u - v (for cumulative counters); negative fields clamp to zero.
func (u Usage) Sub(v Usage) Usage {
	c := func(a, b int64) int64 {
		if a < b {
			return 0
		}
		return a - b
	}
	cost := u.CostUSD - v.CostUSD
	if cost < 0 {
		cost = 0
	}
	return Usage{
		Input: c(u.Input, v.Input), Cached: c(u.Cached, v.Cached),
		CacheCreated: c(u.CacheCreated, v.CacheCreated), Output: c(u.Output, v.Output),
		Reasoning: c(u.Reasoning, v.Reasoning), CostUSD: cost, Complete: u.Complete && v.Complete,
	}
}

// Tokens returns the total token count.
func (u Usage) Tokens() int64 { return u.Input + u.Cached + u.CacheCreated + u.Output }

// Scope says what a usage report covers.
type Scope string

const (
	// ScopeMessage is one model message; reports with the same message id
	// repeat the same figures and are counted once.
	ScopeMessage Scope = "message"
	// ScopeTurn is the CLI's own total for the whole turn; it replaces the
	// message sum.
	ScopeTurn Scope = "turn"
	// ScopeCumulative is a running total for the whole conversation (thread);
	// the turn's usage is the difference from the previous turn's total.
	ScopeCumulative Scope = "cumulative"
)

// Report is one usage report from a CLI.
type Report struct {
	Scope     Scope  `json:"scope"`
	MessageID string `json:"message_id,omitempty"`
	Usage
	// HasCost says whether CostUSD was reported (a zero cost can be real).
	HasCost bool `json:"has_cost,omitempty"`
}

// Ledger accumulates the usage reports of one turn. The zero value is ready.
// It is not safe for concurrent use.
type Ledger struct {
	order    []string
	messages map[string]Usage
	anon     Usage
	anonSeen bool
	turn     *Report
	cum      *Report
	// Baseline is the previous cumulative total of the conversation, used to
	// turn a cumulative report into this turn's usage.
	Baseline *Usage
}

// Add records one report.
func (l *Ledger) Add(r Report) {
	switch r.Scope {
	case ScopeTurn:
		rc := r
		l.turn = &rc
	case ScopeCumulative:
		rc := r
		l.cum = &rc
	default:
		if r.MessageID == "" {
			l.anon = l.anon.Add(r.Usage)
			l.anonSeen = true
			return
		}
		if l.messages == nil {
			l.messages = map[string]Usage{}
		}
		prev, seen := l.messages[r.MessageID]
		if !seen {
			l.order = append(l.order, r.MessageID)
		}
		// A message's usage grows while it streams; keep the largest figures.
		l.messages[r.MessageID] = maxUsage(prev, r.Usage)
	}
}

func maxUsage(a, b Usage) Usage {
	m := func(x, y int64) int64 {
		if x > y {
			return x
		}
		return y
	}
	return Usage{Input: m(a.Input, b.Input), Cached: m(a.Cached, b.Cached),
		CacheCreated: m(a.CacheCreated, b.CacheCreated), Output: m(a.Output, b.Output),
		Reasoning: m(a.Reasoning, b.Reasoning), CostUSD: max(a.CostUSD, b.CostUSD)}
}

// Cumulative returns the last cumulative (conversation-wide) report, if any.
func (l *Ledger) Cumulative() (Usage, bool) {
	if l.cum == nil {
		return Usage{}, false
	}
	return l.cum.Usage, true
}

// MessageSum returns the de-duplicated sum of message-scoped reports.
func (l *Ledger) MessageSum() Usage {
	var s Usage
	for _, id := range l.order {
		s = s.Add(l.messages[id])
	}
	if l.anonSeen {
		s = s.Add(l.anon)
	}
	return s
}

// Empty reports whether no report was recorded.
func (l *Ledger) Empty() bool {
	return l.turn == nil && l.cum == nil && len(l.order) == 0 && !l.anonSeen
}

// Total returns the turn's usage: the CLI's turn total when reported, else the
// cumulative difference from Baseline (incomplete without a baseline), else the
// message sum, which is marked incomplete because messages may be missing.
// Complete speaks of token counters; a CLI that reports no cost leaves CostUSD zero.
func (l *Ledger) Total() Usage {
	switch {
	case l.turn != nil:
		u := l.turn.Usage
		u.Complete = true
		if !l.turn.HasCost && l.turn.CostUSD == 0 {
			// Keep a cost derived from messages when the total carried none.
			u.CostUSD = l.MessageSum().CostUSD
		}
		return u
	case l.cum != nil:
		u := l.cum.Usage
		if l.Baseline != nil {
			u = u.Sub(*l.Baseline)
		}
		// Without a baseline a resumed conversation's total would be counted twice.
		u.Complete = l.Baseline != nil
		return u
	default:
		u := l.MessageSum()
		u.Complete = false
		return u
	}
}
