package harness

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/credentials"
	"github.com/outpost-dev/outpost/internal/fakecli"
)

// planCounter is the fake CLI with a credential planner that counts its
// calls.
type planCounter struct {
	*fakecli.Adapter
	calls atomic.Int32
}

func (p *planCounter) Credentials(credentials.Auth, map[string]string) (credentials.Plan, error) {
	p.calls.Add(1)
	return credentials.Plan{}, nil
}

var _ adapters.Authenticator = (*planCounter)(nil)

// TestCredentialPlanOnce: a turn's credential plan is made once however
// many parties ask (the caller's Validate, a gateway router's
// CredentialPlan, Run and its attempts), and made again only for other
// credentials.
func TestCredentialPlanOnce(t *testing.T) {
	turn := fakeTurn(t, `emit {"type":"result","text":"ok"}
emit {"type":"finished","ok":true}`)
	pc := &planCounter{Adapter: turn.Adapter.(*fakecli.Adapter)}
	turn.Adapter = pc
	turn.Credentials = &Credentials{Auth: credentials.Auth{Form: credentials.None}}
	require.NoError(t, turn.Validate())
	_, err := turn.CredentialPlan()
	require.NoError(t, err)
	res, err := Run(context.Background(), turn)
	require.NoError(t, err)
	require.True(t, res.OK(), "%v", res.Err)
	assert.Equal(t, int32(1), pc.calls.Load(), "planned once for the turn")

	turn.Credentials = &Credentials{Auth: credentials.Auth{Form: credentials.None}}
	_, err = turn.CredentialPlan()
	require.NoError(t, err)
	assert.Equal(t, int32(2), pc.calls.Load(), "other credentials are planned anew")
}
