package copilot_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/adapters/copilot"
)

// session.error's errorType "quota" is Copilot's own word for an exhausted
// allowance: the structured field decides, whatever the message says.
func TestSessionErrorTypeQuota(t *testing.T) {
	a := copilot.New()
	line := `{"type":"session.error","data":{"errorType":"quota","message":"Monthly allowance for this plan is used up. It renews on the first of next month."}}`
	evs := a.NewDecoder().Decode([]byte(line))
	require.Len(t, evs, 1)
	ev := evs[0]
	require.Equal(t, adapters.KindFailure, ev.Kind)
	ev.Time = time.Date(2026, 6, 10, 15, 0, 0, 0, time.UTC)
	ok, _ := adapters.FailureQuota(a, ev)
	assert.True(t, ok, "errorType quota must classify as quota")
	_, out := adapters.FailureUnavailable(a, ev)
	assert.False(t, out)
}
