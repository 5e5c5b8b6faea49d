package harness

import (
	"context"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/conversation"
	"github.com/outpost-dev/outpost/usage"
)

// memStore is a Store holding manifests only.
type memStore map[string]conversation.Manifest

func (s memStore) Save(_ context.Context, m conversation.Manifest, _ io.Reader) (conversation.Manifest, error) {
	s[m.ID] = m
	return m, nil
}
func (s memStore) Load(ctx context.Context, id string) (conversation.Manifest, io.ReadCloser, error) {
	m, err := s.Stat(ctx, id)
	return m, io.NopCloser(nil), err
}
func (s memStore) Stat(_ context.Context, id string) (conversation.Manifest, error) {
	m, ok := s[id]
	if !ok {
		return m, conversation.ErrNotFound
	}
	return m, nil
}
func (s memStore) List(context.Context) ([]conversation.Manifest, error) { return nil, nil }
func (s memStore) Delete(_ context.Context, id string) error             { delete(s, id); return nil }

// TestCumulativeUsageBaseline: a CLI reporting thread-cumulative counters
// (Codex) gets per-turn usage as the difference from the stored total.
func TestCumulativeUsageBaseline(t *testing.T) {
	script := `emit {"type":"conversation","id":"thread-1"}
emit {"type":"usage","scope":"cumulative","input":2400,"output":40}
emit {"type":"finished","ok":true}`
	turn := fakeTurn(t, script)
	res, err := Run(context.Background(), turn)
	require.NoError(t, err)
	assert.Equal(t, int64(2400), res.Usage.Input, "a new conversation starts from zero")
	assert.True(t, res.Usage.Complete)

	store := memStore{"thread-1": {ID: "thread-1", UsageTotal: &usage.Usage{Input: 1200, Output: 20}}}
	turn = fakeTurn(t, script)
	turn.Input.Continue, turn.Store = "thread-1", store
	res, err = Run(context.Background(), turn)
	require.NoError(t, err)
	assert.Equal(t, int64(1200), res.Usage.Input, "resumed: the difference from the stored total")
	assert.Equal(t, int64(20), res.Usage.Output)
	assert.True(t, res.Usage.Complete)

	turn = fakeTurn(t, script)
	turn.Input.Continue = "unknown-thread"
	res, err = Run(context.Background(), turn)
	require.NoError(t, err)
	assert.False(t, res.Usage.Complete, "no stored total: the figures would double count")
}
