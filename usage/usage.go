// Package usage accounts for the tokens and money a turn consumed.
//
// CLIs report usage in different shapes: per model message (Claude repeats a
// message's usage once per content block), per turn, thread-cumulative (Codex),
// or only after exit (Copilot session files). A [Ledger] takes every report of a
// turn and produces one [Usage]: message reports are de-duplicated by message
// id and summed, a turn-level total reported by the CLI replaces that sum (it is
// authoritative and includes cost), and Complete is false whenever a counter
// is known to be missing.
//
// Cost is honest: [Usage.CostKnown] says whether CostUSD is a real figure,
// either the cost the CLI reported ([CostSourceCLI]) or an estimate from the
// versioned price table in prices.go ([CostSourceEstimate], see [Estimate]).
// An unknown cost is zero with CostKnown false, never a guess.
package usage

// Usage is the normalized token and cost account of one turn.
type Usage struct {
	// Input counts uncached input tokens.
	Input int64 `json:"input"`
	// Cached counts input tokens read from the prompt cache.
	Cached int64 `json:"cached"`
	// CacheCreated counts input tokens written to the prompt cache.
	CacheCreated int64 `json:"cache_created"`
	// CacheCreated1h is the part of CacheCreated written with a one-hour
	// lifetime, which Anthropic bills higher than the default five minutes;
	// zero when the CLI does not say (all writes then count as five-minute
	// writes).
	CacheCreated1h int64 `json:"cache_created_1h,omitempty"`
	// Output counts output tokens, reasoning included.
	Output int64 `json:"output"`
	// Reasoning counts the reasoning part of Output when the CLI reports it.
	Reasoning int64 `json:"reasoning,omitempty"`
	// CostUSD is the cost in US dollars when CostKnown is set, else zero.
	CostUSD float64 `json:"cost_usd"`
	// Complete is false when some counter is known to be missing, so the
	// figures are a lower bound.
	Complete bool `json:"complete"`
	// CostKnown says CostUSD is a real figure (reported by the CLI or priced
	// from the price table); false means the cost is unknown, not zero. Logs
	// written before the field existed read as unknown.
	CostKnown bool `json:"cost_known"`
	// CostSource says where a known cost comes from: [CostSourceCLI] or
	// [CostSourceEstimate]; empty when the cost is unknown.
	CostSource string `json:"cost_source,omitempty"`
}

// Where a known cost comes from.
const (
	// CostSourceCLI is a cost the CLI reported itself.
	CostSourceCLI = "cli"
	// CostSourceEstimate is a cost computed from the token counts and the
	// price table at the model's standard API list prices.
	CostSourceEstimate = "estimate"
)

// costSource combines two known costs' sources: an estimate in either makes
// the sum an estimate.
func costSource(a, b string) string {
	if a == b {
		return a
	}
	if a == CostSourceEstimate || b == CostSourceEstimate {
		return CostSourceEstimate
	}
	if a == "" {
		return b
	}
	return a
}

// Add returns u + v; Complete and CostKnown hold only if they hold for both.
// The zero Usage is not an identity for those flags: start a sum from the
// first term, not from Usage{}.
func (u Usage) Add(v Usage) Usage {
	s := Usage{
		Input:          u.Input + v.Input,
		Cached:         u.Cached + v.Cached,
		CacheCreated:   u.CacheCreated + v.CacheCreated,
		CacheCreated1h: u.CacheCreated1h + v.CacheCreated1h,
		Output:         u.Output + v.Output,
		Reasoning:      u.Reasoning + v.Reasoning,
		CostUSD:        u.CostUSD + v.CostUSD,
		Complete:       u.Complete && v.Complete,
		CostKnown:      u.CostKnown && v.CostKnown,
	}
	if s.CostKnown {
		s.CostSource = costSource(u.CostSource, v.CostSource)
	}
	return s
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
	d := Usage{
		Input: c(u.Input, v.Input), Cached: c(u.Cached, v.Cached),
		CacheCreated: c(u.CacheCreated, v.CacheCreated), CacheCreated1h: c(u.CacheCreated1h, v.CacheCreated1h),
		Output:    c(u.Output, v.Output),
		Reasoning: c(u.Reasoning, v.Reasoning), CostUSD: cost, Complete: u.Complete && v.Complete,
		CostKnown: u.CostKnown && v.CostKnown,
	}
	if d.CostKnown {
		d.CostSource = costSource(u.CostSource, v.CostSource)
	}
	return d
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
	// Adapters set it together with Usage.CostKnown (the ledger accepts
	// either); it stays for readers of recorded events.
	HasCost bool `json:"has_cost,omitempty"`
}

// costed reports whether r carries a reported cost (a non-zero cost is one
// even when the flags were left unset).
func (r Report) costed() bool { return r.HasCost || r.CostKnown || r.CostUSD != 0 }

// Ledger accumulates the usage reports of one turn. The zero value is ready.
// It is not safe for concurrent use.
type Ledger struct {
	order    []string
	messages map[string]Usage
	anon     Usage
	anonSeen bool
	// msgCost and msgNoCost say whether some message report carried a cost
	// and whether some carried none.
	msgCost, msgNoCost bool
	turn               *Report
	cum                *Report
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
		if r.costed() {
			l.msgCost = true
		} else {
			l.msgNoCost = true
		}
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
		CacheCreated: m(a.CacheCreated, b.CacheCreated), CacheCreated1h: m(a.CacheCreated1h, b.CacheCreated1h), Output: m(a.Output, b.Output),
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
// Complete speaks of token counters. CostKnown is set when the CLI reported
// the cost (CostSource "cli"); otherwise CostUSD is zero and the cost unknown
// (a caller may then [Estimate] it).
func (l *Ledger) Total() Usage {
	var u Usage
	var known bool
	switch {
	case l.turn != nil:
		u = l.turn.Usage
		u.Complete = true
		known = l.turn.costed()
		if !known && l.turn.CostUSD == 0 && l.msgCost && !l.msgNoCost {
			// Keep a cost derived from messages when the total carried none.
			u.CostUSD, known = l.MessageSum().CostUSD, true
		}
	case l.cum != nil:
		u = l.cum.Usage
		if l.Baseline != nil {
			u = u.Sub(*l.Baseline)
		}
		// Without a baseline a resumed conversation's total would be counted twice.
		u.Complete = l.Baseline != nil
		known = l.cum.costed() && l.Baseline != nil
	default:
		u = l.MessageSum()
		u.Complete = false
		known = l.msgCost && !l.msgNoCost
	}
	u.CostKnown, u.CostSource = known, ""
	if known {
		u.CostSource = CostSourceCLI
	} else {
		u.CostUSD = 0
	}
	return u
}
