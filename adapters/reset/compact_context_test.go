package reset

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A quota text without a reset may still carry digits followed by a unit
// letter inside an identifier: an organization id with a segment "120d" is
// no promise that the limit lifts in 120 days.
func TestParseIgnoresDurationsInsideIDs(t *testing.T) {
	at := time.Date(2026, 6, 10, 15, 0, 0, 0, time.UTC)
	for _, text := range []string{
		"API Error: Request rejected (429) · This request would exceed your organization's rate limit of 30,000 input tokens per minute (org: 7c2e9a41-120d-4b6f-8e3a-1f0c5d7b9a20, model: claude-sonnet-4-6). Please try again later.",
		"Quota exceeded. Check your plan and billing details. (request 3f9b-045d-77aa)",
	} {
		got, ok := Parse(text, at)
		assert.False(t, ok, "%s: read a reset %v", text, got)
	}
	// Compact durations in their own words still parse.
	for text, want := range map[string]time.Duration{
		"Individual quota reached. Resets in 2h39m52s.": 2*time.Hour + 39*time.Minute + 52*time.Second,
		"Your quota will reset after 5s.":               5 * time.Second,
		"167h54m10s":                                    167*time.Hour + 54*time.Minute + 10*time.Second,
	} {
		got, ok := Parse(text, at)
		require.True(t, ok, text)
		assert.Equal(t, at.Add(want), got, text)
	}
}
