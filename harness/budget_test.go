package harness

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/outposterr"
)

func TestCostCapStopsTheTurn(t *testing.T) {
	turn := fakeTurn(t, `emit {"type":"conversation","id":"c1"}
emit {"type":"text","text":"working"}
emit {"type":"usage","id":"m1","input":10,"output":5,"cost":0.02}
emit {"type":"usage","id":"m2","input":10,"output":5,"cost":0.04}
sleep 20s
emit {"type":"finished","ok":true}`)
	turn.Limits.MaxCostUSD = 0.05
	res, err := Run(context.Background(), turn)
	require.Error(t, err)
	assert.Equal(t, outposterr.Process, outposterr.ClassOf(err))
	assert.Equal(t, "cost", outposterr.BudgetReason(err))
	assert.False(t, outposterr.IsRetryable(err))
	assert.Contains(t, err.Error(), "$0.0500")
	assert.Less(t, res.Duration.Seconds(), 15.0, "stopped, not waited out")
	assert.Equal(t, "cost", res.Outcome().Budget)
}

func TestCostCapUsesListPrices(t *testing.T) {
	// No reported cost: the tokens are priced at the model's list price.
	turn := fakeTurn(t, `emit {"type":"conversation","id":"c1","model":"claude-opus-5-5"}
emit {"type":"usage","id":"m1","input":1000000,"output":0}
sleep 20s
emit {"type":"finished","ok":true}`)
	turn.Limits.MaxCostUSD = 1
	_, err := Run(context.Background(), turn)
	require.Error(t, err)
	assert.Equal(t, "cost", outposterr.BudgetReason(err))
	assert.Contains(t, err.Error(), "spent")
}

func TestCostCapFailsClosedWithoutAPrice(t *testing.T) {
	turn := fakeTurn(t, `emit {"type":"conversation","id":"c1","model":"no-such-model"}
emit {"type":"usage","id":"m1","input":10,"output":5}
sleep 20s
emit {"type":"finished","ok":true}`)
	turn.Limits.MaxCostUSD = 100
	_, err := Run(context.Background(), turn)
	require.Error(t, err)
	assert.Equal(t, "cost", outposterr.BudgetReason(err))
	assert.Contains(t, err.Error(), "cannot be enforced")
}

func TestCostUnderCapAndFinalReport(t *testing.T) {
	turn := fakeTurn(t, `emit {"type":"usage","id":"m1","input":10,"output":5,"cost":0.01}
emit {"type":"result","text":"done"}
emit {"type":"finished","ok":true}`)
	turn.Limits.MaxCostUSD = 0.05
	_, err := Run(context.Background(), turn)
	require.NoError(t, err)

	// A final report over the cap, after the work was done: the turn
	// stands with a warning.
	turn = fakeTurn(t, `emit {"type":"result","text":"done"}
emit {"type":"finished","ok":true}
emit {"type":"usage","scope":"turn","input":10,"output":5,"cost":0.5}`)
	turn.Limits.MaxCostUSD = 0.05
	res, err := Run(context.Background(), turn)
	require.NoError(t, err)
	assert.Contains(t, res.Warnings[len(res.Warnings)-1], "cost cap")
}

func TestTurnCapCountsAssistantTurns(t *testing.T) {
	script := `emit {"type":"text","text":"turn one"}
emit {"type":"tool","text":"Bash"}
emit {"type":"tool-result","text":"ok"}
emit {"type":"text","text":"turn two"}
emit {"type":"tool","text":"Bash"}
emit {"type":"tool-result","text":"ok"}
emit {"type":"text","text":"turn three"}
sleep 20s
emit {"type":"finished","ok":true}`
	turn := fakeTurn(t, script)
	turn.Limits.MaxTurns = 2
	var texts []string
	turn.OnEvent = func(ev adapters.Event) {
		if ev.Kind == adapters.KindText {
			texts = append(texts, ev.Text)
		}
	}
	res, err := Run(context.Background(), turn)
	require.Error(t, err)
	assert.Equal(t, "turns", outposterr.BudgetReason(err))
	assert.Equal(t, outposterr.Process, outposterr.ClassOf(err))
	assert.Less(t, res.Duration.Seconds(), 15.0)

	turn = fakeTurn(t, script)
	turn.Limits.MaxTurns = 3
	turn.Limits.Deadline = 3e9
	_, err = Run(context.Background(), turn)
	assert.Equal(t, outposterr.Timeout, outposterr.ClassOf(err), "three turns are allowed")
}

func TestNegativeCapsRefused(t *testing.T) {
	turn := fakeTurn(t, `emit {"type":"finished","ok":true}`)
	turn.Limits.MaxCostUSD = -1
	assert.True(t, outposterr.Is(turn.Validate(), outposterr.Configuration))
	turn.Limits.MaxCostUSD, turn.Limits.MaxTurns = 0, -1
	assert.True(t, outposterr.Is(turn.Validate(), outposterr.Configuration))
}

// TestLimitsWith: a turn's limits override a runner's field by field; zero
// fields keep the runner's.
func TestLimitsWith(t *testing.T) {
	base := Limits{Deadline: time.Hour, IdleTimeout: time.Minute, MaxCostUSD: 5, MaxTokens: 1000, MaxTurns: 3, TextBytes: 10}
	got := base.With(Limits{Deadline: time.Minute, MaxTokens: 10, KeptEvents: 7})
	assert.Equal(t, Limits{Deadline: time.Minute, IdleTimeout: time.Minute, MaxCostUSD: 5, MaxTokens: 10, MaxTurns: 3,
		TextBytes: 10, KeptEvents: 7}, got)
	assert.Equal(t, base, base.With(Limits{}))
}
