package leasekit

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestReleaseState: a failed release is retried and leaves the lease
// releasing but not released; after one succeeds, Release does nothing.
func TestReleaseState(t *testing.T) {
	var s ReleaseState
	assert.False(t, s.Releasing())
	calls := 0
	fail := func() error { calls++; return errors.New("engine down") }
	ok := func() error { calls++; return nil }
	assert.EqualError(t, s.Release(fail), "engine down")
	assert.True(t, s.Releasing(), "a process killed now was killed by the release")
	assert.False(t, s.Released())
	assert.NoError(t, s.Release(ok), "a failed release can be retried")
	assert.True(t, s.Released())
	assert.NoError(t, s.Release(fail), "released: nothing runs")
	assert.Equal(t, 2, calls)
}
