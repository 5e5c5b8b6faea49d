package sandbox

import (
	"context"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCleanupOnSignalDefaults: every signal that cancels an outpost command
// releases the leases, for every kind (they all use this handler).
func TestCleanupOnSignalDefaults(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT} {
		released := make(chan struct{}, 1)
		done := make(chan error, 1)
		stop := CleanupOnSignal(func(ctx context.Context) error {
			_, ok := ctx.Deadline()
			assert.True(t, ok, "the release is bounded")
			released <- struct{}{}
			return nil
		}, time.Minute, func(err error) { done <- err })
		require.NoError(t, syscall.Kill(os.Getpid(), sig))
		require.NoError(t, <-done, sig.String())
		<-released
		stop()
	}
}

// TestCleanupOnSignalStop: stop unregisters the handler without a release.
func TestCleanupOnSignalStop(t *testing.T) {
	called := false
	stop := CleanupOnSignal(func(context.Context) error { called = true; return nil }, time.Minute, nil, syscall.SIGUSR2)
	stop()
	stop() // idempotent
	assert.False(t, called)
}

// TestCleanupOnSignalUnbounded: a zero timeout leaves the bound to the
// provider's releases.
func TestCleanupOnSignalUnbounded(t *testing.T) {
	done := make(chan bool, 1)
	stop := CleanupOnSignal(func(ctx context.Context) error {
		_, bounded := ctx.Deadline()
		done <- bounded
		return nil
	}, 0, nil, syscall.SIGUSR1)
	defer stop()
	require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGUSR1))
	assert.False(t, <-done, "no deadline of its own")
}
