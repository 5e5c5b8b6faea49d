package usage

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLedgerDedupesMessages(t *testing.T) {
	var l Ledger
	assert.True(t, l.Empty())
	// Claude repeats a message's usage once per content block.
	l.Add(Report{Scope: ScopeMessage, MessageID: "m1", Usage: Usage{Input: 10, Output: 2}})
	l.Add(Report{Scope: ScopeMessage, MessageID: "m1", Usage: Usage{Input: 10, Output: 7}})
	l.Add(Report{Scope: ScopeMessage, MessageID: "m2", Usage: Usage{Input: 5, Cached: 100, CacheCreated: 3, CacheCreated1h: 2, Output: 1}})
	l.Add(Report{Scope: ScopeMessage, MessageID: "m2", Usage: Usage{Input: 5, Cached: 100, CacheCreated: 3, CacheCreated1h: 2, Output: 1}})
	got := l.Total()
	// The one-hour part of the cache writes is kept: it is billed higher.
	assert.Equal(t, Usage{Input: 15, Cached: 100, CacheCreated: 3, CacheCreated1h: 2, Output: 8}, got)
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

func TestLedgerCostKnown(t *testing.T) {
	var l Ledger
	l.Add(Report{Scope: ScopeTurn, Usage: Usage{Input: 12, Output: 3, CostUSD: 0}, HasCost: true})
	got := l.Total()
	assert.True(t, got.CostKnown, "a reported zero cost is a known cost")
	assert.Equal(t, CostSourceCLI, got.CostSource)

	var codex Ledger // thread-cumulative, no cost reported
	codex.Baseline = &Usage{}
	codex.Add(Report{Scope: ScopeCumulative, Usage: Usage{Input: 100, Output: 5}})
	got = codex.Total()
	assert.True(t, got.Complete)
	assert.False(t, got.CostKnown)
	assert.Empty(t, got.CostSource)
	assert.Zero(t, got.CostUSD)

	var msgs Ledger // messages without cost: unknown, even with a partial sum
	msgs.Add(Report{Scope: ScopeMessage, MessageID: "a", Usage: Usage{Input: 1}})
	msgs.Add(Report{Scope: ScopeMessage, MessageID: "b", Usage: Usage{Input: 1, CostUSD: 0.5}, HasCost: true})
	assert.False(t, msgs.Total().CostKnown)
	assert.Zero(t, msgs.Total().CostUSD)

	var priced Ledger // every message priced: known
	priced.Add(Report{Scope: ScopeMessage, MessageID: "a", Usage: Usage{Input: 1, CostUSD: 0.25, CostKnown: true}})
	priced.Add(Report{Scope: ScopeMessage, MessageID: "b", Usage: Usage{Input: 1, CostUSD: 0.5}, HasCost: true})
	got = priced.Total()
	assert.True(t, got.CostKnown)
	assert.InDelta(t, 0.75, got.CostUSD, 1e-9)
}

func TestAddCostKnown(t *testing.T) {
	cli := Usage{CostUSD: 1, CostKnown: true, CostSource: CostSourceCLI, Complete: true}
	est := Usage{CostUSD: 2, CostKnown: true, CostSource: CostSourceEstimate, Complete: true}
	unknown := Usage{Complete: true}
	s := cli.Add(cli)
	assert.True(t, s.CostKnown)
	assert.Equal(t, CostSourceCLI, s.CostSource)
	s = cli.Add(est)
	assert.Equal(t, CostSourceEstimate, s.CostSource, "part estimated is an estimate")
	assert.InDelta(t, 3.0, s.CostUSD, 1e-9)
	s = cli.Add(unknown)
	assert.False(t, s.CostKnown)
	assert.Empty(t, s.CostSource)
	assert.True(t, s.Complete)
	assert.False(t, Usage{}.Add(cli).CostKnown, "the zero Usage is unknown: start sums from the first term")
}

func TestEstimate(t *testing.T) {
	u := Usage{Input: 1_000_000, Cached: 2_000_000, Output: 100_000}
	cost, ok := Estimate("gpt-6.1-sol", u)
	require.True(t, ok)
	assert.InDelta(t, 2.00+0.20+1.00, cost, 1e-9)

	for _, name := range []string{"GPT-6.1-SOL", "openai/gpt-6.1-sol", "gpt-6.1-sol-2026-09-29"} {
		p, ok := Lookup(name)
		assert.True(t, ok, name)
		assert.Equal(t, "gpt-6.1-sol", p.Model, name)
	}
	p, ok := Lookup("claude-sonnet-5.5")
	require.True(t, ok)
	assert.Equal(t, "claude-sonnet-5-5", p.Model, "Copilot's dotted name, the longest key wins over claude-sonnet-5")
	_, ok = Lookup("gpt-6.1-sol-mini")
	assert.False(t, ok, "a different model is not a snapshot")
	_, ok = Lookup("outpost-unknown-model")
	assert.False(t, ok)

	// Anthropic's cache writes: 5-minute 1.25x, 1-hour 2x the base input.
	cost, ok = Estimate("claude-sonnet-5-5", Usage{CacheCreated: 3_000_000, CacheCreated1h: 1_000_000})
	require.True(t, ok, "Claude Code always writes the prompt cache: its turns are priced")
	assert.InDelta(t, 2*2.50+4.00, cost, 1e-9)
	cost, ok = Estimate("claude-sonnet-5-5", Usage{Input: 1_000_000, Cached: 1_000_000, CacheCreated: 1_000_000, Output: 1_000_000})
	require.True(t, ok)
	assert.InDelta(t, 2.00+0.10+2.50+10.00, cost, 1e-9, "writes of no stated lifetime are 5-minute writes")
	_, ok = Estimate("gpt-6.1-sol", Usage{CacheCreated: 10, CacheCreated1h: 10})
	assert.False(t, ok, "a one-hour write where the vendor states no such price: unknown, not guessed")
	cost, ok = Estimate("claude-opus-5-5", Usage{CacheCreated: 5, CacheCreated1h: 9})
	require.True(t, ok, "a 1-hour share over the total is clamped to it")
	assert.InDelta(t, 5*8.00e-6, cost, 1e-12)

	priced := Priced("gpt-6.1-sol", Usage{Output: 1_000_000, Complete: true})
	assert.True(t, priced.CostKnown)
	assert.Equal(t, CostSourceEstimate, priced.CostSource)
	assert.InDelta(t, 10.0, priced.CostUSD, 1e-9)
	reported := Usage{Output: 1_000_000, CostUSD: 3, CostKnown: true, CostSource: CostSourceCLI}
	assert.Equal(t, reported, Priced("gpt-6.1-sol", reported), "a reported cost is never replaced")
	assert.False(t, Priced("nope", Usage{Output: 5}).CostKnown)
}

func TestPriceTable(t *testing.T) {
	seen := map[string]bool{}
	for _, p := range Prices() {
		assert.False(t, seen[p.Model], "duplicate %s", p.Model)
		seen[p.Model] = true
		assert.True(t, strings.HasPrefix(p.Source, "https://"), "%s: source", p.Model)
		_, err := time.Parse(time.DateOnly, p.AsOf)
		assert.NoError(t, err, "%s: as-of date", p.Model)
		assert.LessOrEqual(t, p.AsOf, PricesVersion, "%s: checked after the table version", p.Model)
		assert.Positive(t, p.Input, p.Model)
		assert.Positive(t, p.Output, p.Model)
		assert.Less(t, p.Cached, p.Input, p.Model)
		if assert.NotNil(t, p.CacheWrite, "%s: cache-write price", p.Model) && strings.HasPrefix(p.Model, "claude-") {
			assert.InDelta(t, 1.25*p.Input, *p.CacheWrite, 1e-9, "%s: 5-minute writes are 1.25x input", p.Model)
			if assert.NotNil(t, p.CacheWrite1h, "%s: 1-hour cache-write price", p.Model) {
				assert.InDelta(t, 2*p.Input, *p.CacheWrite1h, 1e-9, "%s: 1-hour writes are 2x input", p.Model)
			}
		}
	}
}
