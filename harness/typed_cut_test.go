package harness

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTypedCutAnswerIsNotValidated: an answer cut at Limits.TextBytes is not
// the answer the CLI gave; a prefix that happens to be valid JSON (here the
// number 123 of 12345) must not become the typed value.
func TestTypedCutAnswerIsNotValidated(t *testing.T) {
	turn, log := answerTurn(t, `12345`, `7`)
	turn.Schema = mustSchema(t, `{"type":"integer"}`)
	turn.Limits.TextBytes = 3
	res, err := Run(context.Background(), turn)
	require.NoError(t, err)
	assert.Equal(t, "7", string(res.Value), "the cut answer is not taken")
	assert.True(t, res.Repaired)
	p := prompts(t, log)
	require.Len(t, p, 2)
	assert.Contains(t, p[1], "cut at 3 bytes")
}
