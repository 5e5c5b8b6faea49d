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
	}
	assert.False(t, Is(quota, Timeout))
}

func TestHelpersShareOneShape(t *testing.T) {
	out := fmt.Errorf("turn: %w", New(Process, "x").With(Details{Unavailable: "overloaded", Retryable: true}))
	assert.True(t, IsUnavailable(out))
	assert.Equal(t, "overloaded", UnavailableReason(out))
	assert.True(t, IsRetryable(out))
	assert.False(t, IsAuth(out))
	assert.Empty(t, AuthReason(out))

	auth := errors.Join(errors.New("x"), New(Process, "y").With(Details{Auth: "http 401"}))
	assert.True(t, IsAuth(auth))
	assert.Equal(t, "http 401", AuthReason(auth))
	assert.False(t, IsUnavailable(auth))
	assert.False(t, IsRetryable(auth))
	_, ok := ResetAt(auth)
	assert.False(t, ok)

	budget := fmt.Errorf("job: %w", New(Process, "stopped").With(Details{Budget: "cost"}))
	assert.True(t, IsBudget(budget))
	assert.Equal(t, "cost", BudgetReason(budget))
	assert.Equal(t, "cost", DetailsOf(budget).Budget)
	assert.False(t, IsRetryable(budget))
	assert.False(t, IsBudget(auth))

	limit := fmt.Errorf("job: %w", New(Process, "fork refused").With(Details{Limit: "pids"}))
	assert.True(t, IsLimit(limit))
	assert.Equal(t, "pids", LimitReason(limit))
	assert.Equal(t, "pids", DetailsOf(limit).Limit)
	assert.False(t, IsRetryable(limit))
	assert.False(t, IsLimit(budget))
}

func TestForeignErrorsAreInternal(t *testing.T) {
	assert.Equal(t, Class(""), ClassOf(nil))
	assert.Equal(t, Internal, ClassOf(errors.New("plain")), "a bug in Outpost is never the agent's process failure")
	assert.Equal(t, Aborted, ClassOf(context.Canceled))
	assert.Equal(t, Timeout, ClassOf(fmt.Errorf("op: %w", context.DeadlineExceeded)))

	p := Panic("index out of range")
	assert.Equal(t, Internal, ClassOf(p))
	assert.Contains(t, p.Error(), "index out of range")
	cause := errors.New("nil map")
	pe := Panic(cause)
	assert.ErrorIs(t, pe, cause)
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
	for _, c := range Classes {
		got, ok := ParseClass(string(c))
		assert.True(t, ok)
		assert.Equal(t, c, got)
	}
}

func TestCyclicChainIsBounded(t *testing.T) {
	e := &Error{Class: Process, Message: "loop"}
	e.Cause = e
	assert.Equal(t, Process, ClassOf(e))
	assert.False(t, IsQuota(e))
}
