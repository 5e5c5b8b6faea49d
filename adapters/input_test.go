package adapters_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/outpost-dev/outpost/adapters"
)

func TestRequestTimeoutMillisRoundsUp(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0: "0", time.Microsecond: "1", 1500 * time.Millisecond: "1500",
		1500*time.Millisecond + time.Nanosecond: "1501", 2 * time.Minute: "120000",
	} {
		assert.Equal(t, want, adapters.Input{RequestTimeout: d}.RequestTimeoutMillis(), "%s", d)
	}
}
