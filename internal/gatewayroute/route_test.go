package gatewayroute

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/adapters/claude"
	"github.com/outpost-dev/outpost/credentials"
	"github.com/outpost-dev/outpost/gateway"
	"github.com/outpost-dev/outpost/harness"
	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/sandbox"
)

// bridge routes ht and applies the path, as the runner does.
func bridge(r *Router, ht *harness.Turn, route sandbox.Route) error {
	p, err := r.Route(*ht, route, nil)
	if err != nil {
		return err
	}
	p.Apply(ht)
	return nil
}

func keyTurn() harness.Turn {
	return harness.Turn{Adapter: claude.New(), Input: adapters.Input{Prompt: "p"},
		Credentials: &harness.Credentials{Auth: credentials.Auth{Form: credentials.Usage},
			Vars: map[string]string{"ANTHROPIC_API_KEY": "sk-ant-test"}}}
}

func router(mode Mode) *Router {
	return &Router{Mode: mode, Upstreams: func() []string { return []string{claude.DefaultBaseURL} },
		Kind: "testkind", Logger: slog.New(slog.DiscardHandler)}
}

// TestBridgeByRoute: the engine's route decides how a key-bearing turn
// reaches the gateway: a socket forwarded to the lease's loopback (no
// network unless asked), loopback TCP, or nowhere — then the key goes
// inside, or the turn is refused when the gateway was required.
func TestBridgeByRoute(t *testing.T) {
	r := router(Auto)
	defer r.Close()

	// The decision is a value: the turn is changed only by applying it.
	ht := keyTurn()
	p, err := r.Route(ht, sandbox.Route{Via: sandbox.ViaForward}, nil)
	require.NoError(t, err)
	require.NotNil(t, p.Bridge)
	assert.Len(t, p.Forwards, 1)
	assert.Equal(t, "none", p.Network)
	assert.Nil(t, ht.Gateway)
	assert.Empty(t, ht.Spec.Forwards)
	before := ht
	Path{}.Apply(&ht)
	assert.Equal(t, before.Spec, ht.Spec, "the zero path changes nothing")
	assert.Nil(t, ht.Gateway)

	require.NoError(t, bridge(r, &ht, sandbox.Route{Via: sandbox.ViaForward}))
	require.NotNil(t, ht.Gateway)
	assert.Equal(t, gateway.LeaseURL(gateway.DefaultLeasePort), ht.Gateway.URL)
	require.Len(t, ht.Spec.Forwards, 1)
	assert.Equal(t, "none", ht.Spec.Network)

	ht = keyTurn()
	require.NoError(t, bridge(r, &ht, sandbox.Route{Via: sandbox.ViaLoopback}))
	require.NotNil(t, ht.Gateway)
	assert.True(t, strings.HasPrefix(ht.Gateway.URL, "http://127.0.0.1:"), ht.Gateway.URL)
	assert.Empty(t, ht.Spec.Forwards)

	ht = keyTurn()
	require.NoError(t, bridge(r, &ht, sandbox.Route{Via: sandbox.ViaNone}))
	assert.Nil(t, ht.Gateway, "the key goes inside")

	err = bridge(router(Gateway), &ht, sandbox.Route{Via: sandbox.ViaNone})
	require.Error(t, err)
	assert.Equal(t, outposterr.Configuration, outposterr.ClassOf(err))
	assert.Contains(t, err.Error(), "testkind")

	ht = keyTurn()
	require.NoError(t, bridge(router(Inside), &ht, sandbox.Route{Via: sandbox.ViaForward}))
	assert.Nil(t, ht.Gateway)

	// A turn without a key to keep outside is left alone, unless it is a
	// capped offline turn.
	ht = harness.Turn{Adapter: claude.New(), Input: adapters.Input{Prompt: "p", Endpoint: &adapters.Endpoint{BaseURL: "http://127.0.0.1:1", OAuthToken: "t"}}}
	require.NoError(t, bridge(r, &ht, sandbox.Route{Via: sandbox.ViaLoopback}))
	assert.Nil(t, ht.Gateway)
	off := router(Auto)
	off.Offline = true
	defer off.Close()
	ht.Limits.MaxTokens = 10
	require.NoError(t, bridge(off, &ht, sandbox.Route{Via: sandbox.ViaLoopback}))
	require.NotNil(t, ht.Gateway)
	assert.True(t, ht.Gateway.Endpoint)

	r.Close()
	r.Close() // idempotent
}

// idSandbox is a lease that only has an ID.
type idSandbox struct {
	sandbox.Sandbox
	id string
}

func (s idSandbox) ID() string { return s.id }

// fakeSidecars hands out fixed sidecar streams.
type fakeSidecars struct{ streams sandbox.SidecarStreams }

func (fakeSidecars) WithSidecar([]string) sandbox.Provider { return nil }

func (f fakeSidecars) SidecarStreams(sandbox.Sandbox) (sandbox.SidecarStreams, bool) {
	return f.streams, true
}

// TestSidecarStartFails: a gateway sidecar whose program could not be
// started (the lease was returned while it was still being started) fails
// the turn as a sandbox error that says why, and the same for a later
// attempt on that lease, without waiting for an announcement.
func TestSidecarStartFails(t *testing.T) {
	started := 0
	s := &sidecarGateway{sidecars: fakeSidecars{sandbox.SidecarStreams{
		Stdin: nopWriteCloser{}, Stdout: strings.NewReader(""), Stderr: func() string { return "" },
		Started: func(context.Context) error {
			started++
			return outposterr.New(outposterr.Sandbox, "copy the sidecar program into pod p: MARK-no-room")
		}}}}
	for range 2 {
		_, _, err := s.remote(context.Background(), idSandbox{id: "p"})
		require.Error(t, err)
		assert.Equal(t, outposterr.Sandbox, outposterr.ClassOf(err))
		assert.Contains(t, err.Error(), "the gateway sidecar of pod p did not start")
		assert.Contains(t, err.Error(), "MARK-no-room")
	}
	assert.Equal(t, 1, started, "a lease's sidecar is started once")
}

type nopWriteCloser struct{}

func (nopWriteCloser) Write(p []byte) (int, error) { return len(p), nil }
func (nopWriteCloser) Close() error                { return nil }
