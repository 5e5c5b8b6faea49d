package install

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/credentials"
	"github.com/outpost-dev/outpost/sandbox"
)

// A secret that contains another value being redacted is replaced whole,
// whatever the order the values come in: replacing the shorter one first
// would leave the rest of the secret in the message.
func TestRedactLongestFirst(t *testing.T) {
	const secret = "sk-live-true-4f1c9a0e7b2d"
	got := Redact("login failed for key "+secret, "true", secret)
	assert.Equal(t, "login failed for key [REDACTED]", got)
	assert.NotContains(t, got, "4f1c9a0e7b2d")
}

// isolated hides the host lease's Unisolated answer, so Materialize runs
// logins in it as it would in a container.
type isolated struct{ sandbox.Sandbox }

// A login command that prints its secret fails with an error that holds
// no part of it, even when another variable's value occurs inside it (the
// plan's variables come from a map: any order).
func TestLoginErrorRedactsWholeSecret(t *testing.T) {
	const secret = "sk-live-true-4f1c9a0e7b2d"
	plan := credentials.Plan{
		Env:    map[string]string{"API_KEY": secret, "FEATURE_FLAG": "true"},
		Logins: []credentials.Login{{Args: []string{"sh", "-c", `echo "rejected key $API_KEY" >&2; exit 1`}}},
	}
	for range 16 {
		_, err := Materialize(context.Background(), isolated{hostLease(t)}, plan, credentials.ConfigPlan{}, Options{Agent: "fake"})
		require.Error(t, err)
		assert.Contains(t, err.Error(), "rejected key")
		assert.NotContains(t, err.Error(), "4f1c9a0e7b2d")
	}
}
