package harness_test

import (
	"slices"
	"testing"

	"github.com/outpost-dev/outpost/harness"
)

func TestOutcomeNotes(t *testing.T) {
	o := harness.Outcome{Class: "quota", Unavailable: "overloaded", Auth: "expired", Limit: "memory", ResetAt: "2026-01-02T03:04:05Z"}
	want := []string{"unavailable: overloaded", "auth: expired", "limit: memory", "resets 2026-01-02T03:04:05Z"}
	if got := o.Notes(); !slices.Equal(got, want) {
		t.Fatalf("Notes() = %q, want %q", got, want)
	}
	o = harness.Outcome{Class: "quota", ResetAt: "2026-01-02T03:04:05Z"}
	if got := o.Notes(); !slices.Equal(got, []string{"resets 2026-01-02T03:04:05Z"}) {
		t.Fatalf("Notes() with only a reset = %q", got)
	}
}
