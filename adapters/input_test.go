package adapters_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/outposterr"
)

func TestRequestTimeoutMillisRoundsUp(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0: "0", time.Microsecond: "1", 1500 * time.Millisecond: "1500",
		1500*time.Millisecond + time.Nanosecond: "1501", 2 * time.Minute: "120000",
	} {
		assert.Equal(t, want, adapters.Input{RequestTimeout: d}.RequestTimeoutMillis(), "%s", d)
	}
}

func TestCheckLimits(t *testing.T) {
	neg, zero := -1, 0
	assert.NoError(t, adapters.Input{}.CheckLimits("x"))
	assert.NoError(t, adapters.Input{MaxRetries: &zero, RequestTimeout: time.Second}.CheckLimits("x"))
	err := adapters.Input{MaxRetries: &neg}.CheckLimits("x")
	assert.True(t, outposterr.Is(err, outposterr.Configuration), "%v", err)
	assert.EqualError(t, err, "x: negative max retries -1")
	assert.EqualError(t, adapters.Input{RequestTimeout: -time.Second}.CheckLimits("x"), "x: negative request timeout -1s")
}
