package usage

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestLedgerDedupesMessages(t *testing.T) {
	var l Ledger
	assert.True(t, l.Empty())
	// Claude repeats a message's usage once per content block.
	l.Add(Report{Scope: ScopeMessage, MessageID: "m1", Usage: Usage{Input: 10, Output: 2}})
	l.Add(Report{Scope: ScopeMessage, MessageID: "m1", Usage: Usage{Input: 10, Output: 7}})
	l.Add(Report{Scope: ScopeMessage, MessageID: "m2", Usage: Usage{Input: 5, Cached: 100, CacheCreated: 3, Output: 1}})
	got := l.Total()
	assert.Equal(t, Usage{Input: 15, Cached: 100, CacheCreated: 3, Output: 8}, got)
	assert.False(t, got.Complete)
}

func TestLedgerTurnTotalWins(t *testing.T) {
	var l Ledger
	l.Add(Report{Scope: ScopeMessage, MessageID: "m1", Usage: Usage{Input: 10, Output: 2}})
	l.Add(Report{Scope: ScopeTurn, Usage: Usage{Input: 12, Output: 3, CostUSD: 0.25}, HasCost: true})
	got := l.Total()
	assert.Equal(t, int64(12), got.Input)
	assert.InDelta(t, 0.25, got.CostUSD, 1e-9)
	assert.True(t, got.Complete)
}

func TestLedgerCumulative(t *testing.T) {
	var l Ledger
	l.Add(Report{Scope: ScopeCumulative, Usage: Usage{Input: 2400, Output: 40}})
	assert.False(t, l.Total().Complete, "no baseline: a resumed thread would be double counted")
	l.Baseline = &Usage{Input: 1200, Output: 20}
	got := l.Total()
	assert.Equal(t, int64(1200), got.Input)
	assert.Equal(t, int64(20), got.Output)
	assert.True(t, got.Complete)
}

func TestSubClamps(t *testing.T) {
	assert.Equal(t, Usage{}, Usage{Input: 1}.Sub(Usage{Input: 5, CostUSD: 1}))
	assert.Equal(t, int64(15), Usage{Input: 10, Output: 5}.Tokens())
}
