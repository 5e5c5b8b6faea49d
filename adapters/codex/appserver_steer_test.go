package codex_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/adapters/codex"
)

// steeredSession is an app-server session whose turn runs and was steered
// once (request id 4).
func steeredSession(t *testing.T) *codex.AppSession {
	t.Helper()
	_, s, err := codex.New().AppServerRequest(adapters.Input{Prompt: "hi", Workdir: "/w", Home: "/h"})
	require.NoError(t, err)
	s.Decode([]byte(`{"id":2,"result":{"thread":{"id":"T1"}}}`))
	s.Decode([]byte(`{"id":3,"result":{"turn":{"id":"U1","status":"inProgress"}}}`))
	_, err = s.EncodeInput("more")
	require.NoError(t, err)
	return s
}

// A turn/steer the server refuses after the turn completed (the message
// raced the turn's end) must not turn the completed turn into a failure.
func TestAppServerLateSteerErrorKeepsVerdict(t *testing.T) {
	s := steeredSession(t)
	s.Decode([]byte(`{"method":"item/completed","params":{"item":{"type":"agentMessage","id":"m","text":"answer"}}}`))
	evs := s.Decode([]byte(`{"method":"turn/completed","params":{"threadId":"T1","turn":{"id":"U1","status":"completed"}}}`))
	require.Contains(t, kinds(evs), adapters.KindFinished)
	require.True(t, s.Done())

	evs = s.Decode([]byte(`{"id":4,"error":{"code":-32600,"message":"no active turn to steer"}}`))
	assert.NotContains(t, kinds(evs), adapters.KindFailure, "a refused steer is not the turn's failure")
	assert.NotContains(t, kinds(evs), adapters.KindFinished, "the turn already finished")
}

// A turn/steer the server refuses while the turn runs does not end the
// turn: the turn goes on and its own turn/completed decides.
func TestAppServerSteerErrorMidTurn(t *testing.T) {
	s := steeredSession(t)
	evs := s.Decode([]byte(`{"id":4,"error":{"code":-32600,"message":"expected turn U0 but U1 is active"}}`))
	assert.NotContains(t, kinds(evs), adapters.KindFailure)
	assert.NotContains(t, kinds(evs), adapters.KindFinished)
	assert.False(t, s.Done(), "the turn still runs")
	require.NotEmpty(t, evs)
	assert.Equal(t, adapters.KindWarning, evs[0].Kind, "the refusal is reported")
	assert.Contains(t, evs[0].Text, "expected turn U0")

	evs = s.Decode([]byte(`{"method":"turn/completed","params":{"threadId":"T1","turn":{"id":"U1","status":"completed"}}}`))
	require.Contains(t, kinds(evs), adapters.KindFinished)
	assert.True(t, evs[len(evs)-1].Finished.OK)

	// An error answer to the session's own opening requests still fails it.
	_, s2, err := codex.New().AppServerRequest(adapters.Input{Prompt: "hi", Workdir: "/w", Home: "/h"})
	require.NoError(t, err)
	evs = s2.Decode([]byte(`{"id":2,"error":{"code":-32600,"message":"no rollout found for thread id X"}}`))
	assert.Equal(t, []adapters.Kind{adapters.KindFailure, adapters.KindFinished}, kinds(evs))
	assert.True(t, s2.Done())
}

// However many tools a long live turn runs, each gets its tool event
// before its result.
func TestAppServerManyToolsAnnounced(t *testing.T) {
	s := steeredSession(t)
	for i := range 5000 {
		id := fmt.Sprintf("call_%d", i)
		evs := s.Decode([]byte(`{"method":"item/completed","params":{"item":{"type":"commandExecution","id":"` + id +
			`","command":"true","aggregatedOutput":"","exitCode":0,"status":"completed"}}}`))
		require.Equal(t, []adapters.Kind{adapters.KindTool, adapters.KindToolResult}, kinds(evs), "tool %d", i)
	}
}
