package harness

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/outpost-dev/outpost/gateway"
	"github.com/outpost-dev/outpost/usage"
)

type snapGrant struct{ snap gateway.Snapshot }

func (g snapGrant) Placeholder() string        { return "placeholder" }
func (g snapGrant) Revoke()                    {}
func (g snapGrant) Snapshot() gateway.Snapshot { return g.snap }
func (g snapGrant) Refused() <-chan struct{}   { return nil }

// TestFailedTurnTheWireSawSpendNothingCostsAKnownZero: a failed turn whose
// CLI reported no usage and whose every request the gateway measured
// carried no token cost a known zero; one the wire did not fully measure,
// or that succeeded, keeps its unknown cost.
func TestFailedTurnTheWireSawSpendNothingCostsAKnownZero(t *testing.T) {
	refused := gateway.Snapshot{Requests: 1, Statuses: []int{429}, Usage: usage.Usage{Complete: true}}
	res := &Result{Err: errors.New("quota")}
	(&bridged{grant: snapGrant{refused}}).finish(res)
	assert.True(t, res.Usage.CostKnown, "%+v", res.Usage)
	assert.True(t, res.Usage.Complete)
	assert.Zero(t, res.Usage.CostUSD)
	assert.Equal(t, "gateway", res.UsageSource)

	cut := gateway.Snapshot{Requests: 1, Statuses: []int{200}, Usage: usage.Usage{Complete: false}}
	res = &Result{Err: errors.New("cut")}
	(&bridged{grant: snapGrant{cut}}).finish(res)
	assert.False(t, res.Usage.CostKnown, "a response cut short may have cost tokens")

	res = &Result{}
	(&bridged{grant: snapGrant{refused}}).finish(res)
	assert.False(t, res.Usage.CostKnown, "only a failed turn")
}
