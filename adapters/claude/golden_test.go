package claude_test

import (
	"bytes"
	"context"
	"encoding/json"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/adapters/adaptertest"
	"github.com/outpost-dev/outpost/adapters/claude"
	"github.com/outpost-dev/outpost/adapters/golden"
)

// TestGolden replays every fixture captured from the real claude 2.1.328
// through the harness and compares events and outcome with expected.json.
func TestGolden(t *testing.T) {
	adaptertest.Run(t, claude.New(), "testdata")
}

// TestOrgRateLimitAnyWording replays the captured organization rate limit
// with its words replaced by ones no pattern knows. The 429 rate_limit_error
// Claude reports next to them decides: still quota. Stripped of those fields,
// the same words are a plain process failure (what the words alone made of
// any unknown wording before the fields were read).
func TestOrgRateLimitAnyWording(t *testing.T) {
	cases, err := adaptertest.Load("testdata")
	require.NoError(t, err)
	var c golden.Case
	for _, k := range cases {
		if k.Name == "org_rate_limit" {
			c = k
		}
	}
	require.NotEmpty(t, c.Stdout, "fixture org_rate_limit")
	words := regexp.MustCompile(`This request would exceed your organization's rate limit of [^.]*\.`)
	require.True(t, words.Match(c.Stdout))
	c.Stdout = words.ReplaceAll(c.Stdout, []byte("Your organization used its token budget for this minute."))

	o := c.Replay(context.Background(), claude.New()).Outcome()
	assert.Equal(t, "quota", o.Class)
	assert.Contains(t, o.Error, "token budget for this minute")

	// The same lines without the structured fields.
	var out [][]byte
	for _, l := range bytes.Split(c.Stdout, []byte("\n")) {
		var m map[string]any
		if json.Unmarshal(l, &m) != nil {
			out = append(out, l)
			continue
		}
		delete(m, "api_error_type")
		delete(m, "api_error_status")
		if m["error"] == "rate_limit" {
			m["error"] = "unknown"
		}
		b, err := json.Marshal(m)
		require.NoError(t, err)
		out = append(out, b)
	}
	c.Stdout = bytes.Join(out, []byte("\n"))
	o = c.Replay(context.Background(), claude.New()).Outcome()
	assert.Equal(t, "process", o.Class)
	assert.Contains(t, o.Error, "token budget for this minute", "still the same failure")
}
