package outposterr

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestClassWalksChains(t *testing.T) {
	reset := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	proc := New(Process, "claude failed").With(Details{Agent: "claude", Exited: true, ExitCode: 1})
	quota := &Error{Class: Quota, Message: "limit", Details: Details{ResetAt: reset}, Cause: proc}
	wrapped := fmt.Errorf("batch job 3: %w", quota)
	joined := errors.Join(errors.New("other"), wrapped)

	for _, err := range []error{quota, wrapped, joined} {
		assert.Equal(t, Quota, ClassOf(err))
		assert.True(t, IsQuota(err))
		assert.True(t, Is(err, Process), "the process cause stays visible")
		got, ok := ResetAt(err)
		require.True(t, ok)
		assert.Equal(t, reset, got)
		assert.Equal(t, "claude", DetailsOf(err).Agent)
		assert.Equal(t, ExitQuota, ExitCode(err))
		assert.ErrorIs(t, err, New(Quota, ""))
	}
	assert.NotErrorIs(t, quota, New(Timeout, ""))
}

func TestExitCodes(t *testing.T) {
	tests := []struct {
		err  error
		code int
	}{
		{nil, ExitOK},
		{New(Configuration, "x"), ExitConfiguration},
		{New(Process, "x"), ExitProcess},
		{New(Process, "x").With(Details{Unavailable: "overloaded"}), ExitUnavailable},
		{New(Process, "x").With(Details{Auth: "http 401"}), ExitAuth},
		{New(Quota, "x"), ExitQuota},
		{New(Timeout, "x"), ExitTimeout},
		{New(Aborted, "x"), ExitAborted},
		{New(Sandbox, "x"), ExitSandbox},
		{New(Bootstrap, "x"), ExitBootstrap},
		{New(Session, "x"), ExitSession},
		{New(Protocol, "x"), ExitProtocol},
		{context.Canceled, ExitAborted},
		{fmt.Errorf("op: %w", context.DeadlineExceeded), ExitTimeout},
		{errors.New("plain"), ExitProcess},
	}
	seen := map[int]bool{}
	for _, tc := range tests {
		assert.Equal(t, tc.code, ExitCode(tc.err), "%v", tc.err)
		seen[tc.code] = true
	}
	assert.Len(t, seen, 12, "every exit code is exercised")
}

func TestWrapAndMessages(t *testing.T) {
	assert.NoError(t, Wrap(Sandbox, nil, "x"))
	err := Wrap(Sandbox, errors.New("dial unix: no such file"), "ping docker")
	assert.Equal(t, "ping docker: dial unix: no such file", err.Error())
	c, ok := ParseClass(" Quota ")
	assert.True(t, ok)
	assert.Equal(t, Quota, c)
	_, ok = ParseClass("nope")
	assert.False(t, ok)
}

func TestCyclicChainIsBounded(t *testing.T) {
	e := &Error{Class: Process, Message: "loop"}
	e.Cause = e
	assert.Equal(t, Process, ClassOf(e))
	assert.False(t, IsQuota(e))
}
