package claude_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/adapters/claude"
)

// Every sandbox runs the CLI with TZ=UTC, so a reset clock printed without
// a zone is a UTC wall-clock time. The harness stamps events with its own
// clock, whose zone is the host's: the reset must not move with it.
func TestZonelessResetIsSandboxUTC(t *testing.T) {
	a := claude.New()
	ny, err := time.LoadLocation("America/New_York")
	require.NoError(t, err)
	// 2026-06-10 15:00 UTC, stamped by a harness in New York (11:00 EDT).
	seen := time.Date(2026, 6, 10, 15, 0, 0, 0, time.UTC).In(ny)
	for text, want := range map[string]time.Time{
		"Weekly limit reached ∙ resets 5am":             time.Date(2026, 6, 11, 5, 0, 0, 0, time.UTC),
		"You've hit your session limit · resets 3:45pm": time.Date(2026, 6, 10, 15, 45, 0, 0, time.UTC),
	} {
		ok, reset := a.Quota(text, seen)
		require.True(t, ok, text)
		assert.True(t, want.Equal(reset), "%s: want %v, got %v", text, want, reset.UTC())
	}
	// A stated zone is unaffected.
	ok, reset := a.Quota("You've hit your session limit · resets 12:50am (America/Los_Angeles)", seen)
	require.True(t, ok)
	la, err := time.LoadLocation("America/Los_Angeles")
	require.NoError(t, err)
	assert.True(t, time.Date(2026, 6, 11, 0, 50, 0, 0, la).Equal(reset), "got %v", reset)
}
