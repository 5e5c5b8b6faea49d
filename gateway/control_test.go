package gateway_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/gateway"
	"github.com/outpost-dev/outpost/outposttest"
)

// teeWriter keeps what crosses one direction of the control channel.
type teeWriter struct {
	w   io.Writer
	buf logBuffer
}

func (r *teeWriter) Write(b []byte) (int, error) {
	_, _ = r.buf.Write(b)
	return r.w.Write(b)
}

// remoteGateway serves a gateway's control protocol over pipes, as a
// sidecar does over its standard input and output, and returns the client
// end, the gateway's log and what the gateway wrote back.
func remoteGateway(t *testing.T, upstream string) (*gateway.Remote, *logBuffer, *teeWriter, chan error) {
	t.Helper()
	gw, _, logs := newGateway(t, upstream)
	reqR, reqW := io.Pipe()
	repR, repW := io.Pipe()
	out := &teeWriter{w: repW}
	served := make(chan error, 1)
	go func() {
		served <- gw.ServeControl(context.Background(), reqR, out)
		repW.Close()
	}()
	t.Cleanup(func() { reqW.Close(); assert.NoError(t, <-served) })
	return gateway.NewRemote(repR, reqW), logs, out, served
}

// TestRemoteGrant drives a gateway through its control channel: the remote
// announces its URL, a grant opened there forwards the lease's request with
// the real key, the snapshot carries the server's own usage, a revoked
// placeholder is refused, and the real key never comes back over the
// channel or into the gateway's log.
func TestRemoteGrant(t *testing.T) {
	srv := newUpstream(t, outposttest.WithScenario(outposttest.ScenarioOK))
	rem, logs, back, _ := remoteGateway(t, srv.URL())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	urls, err := rem.Ready(ctx)
	require.NoError(t, err)
	require.Len(t, urls, 1)
	assert.True(t, strings.HasPrefix(urls[0], "http://127.0.0.1:"), urls[0])

	g, err := rem.Grant(ctx, gateway.GrantSpec{Label: "pod-1", Upstream: srv.URL(),
		Credential: gateway.Credential{Scheme: gateway.SchemeAPIKey, Secret: marker}})
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(g.Placeholder(), gateway.PlaceholderPrefix))
	assert.Equal(t, g.Placeholder(), g.Endpoint(urls[0]).APIKey)

	resp, body := send(t, urls[0], apis[0], g.Placeholder(), "say MARK-remote", true)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	reqs := srv.Requests()
	require.Len(t, reqs, 1)
	assert.Equal(t, outposttest.KeyFingerprint(marker), reqs[0].KeyFingerprint, "the real key reached the upstream")

	s := g.Snapshot()
	assert.Equal(t, 1, s.Requests)
	want := serverUsage(reqs)
	want.Complete = true
	assert.Equal(t, want, s.Usage, "remote usage equals the server's own counts")

	g.Revoke()
	g.Revoke() // idempotent
	assert.Equal(t, 1, g.Snapshot().Requests, "the final snapshot is kept")
	resp, _ = send(t, urls[0], apis[0], g.Placeholder(), "again", false)
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, "a revoked placeholder is refused")

	assert.NotContains(t, back.buf.String(), marker, "the key does not come back over the channel")
	assert.NotContains(t, logs.String(), marker)
}

// TestRemoteErrors: a grant the gateway refuses is a clear error without
// the secret; a budget cannot cross; once the gateway ends, calls fail at
// once as sandbox errors and snapshots are empty, not hung.
func TestRemoteErrors(t *testing.T) {
	srv := newUpstream(t)
	rem, _, _, _ := remoteGateway(t, srv.URL())
	ctx := context.Background()
	_, err := rem.Ready(ctx)
	require.NoError(t, err)

	_, err = rem.Grant(ctx, gateway.GrantSpec{Label: "x", Upstream: "https://elsewhere.example",
		Credential: gateway.Credential{Scheme: gateway.SchemeBearer, Secret: marker}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "not on the allowlist")
	assert.NotContains(t, err.Error(), marker)

	g, err := rem.Grant(ctx, gateway.GrantSpec{Label: "y", Upstream: srv.URL(),
		Credential: gateway.Credential{Scheme: gateway.SchemeBearer, Secret: marker}})
	require.NoError(t, err)

	// The gateway's end of the channel goes away (the sidecar died).
	reqR, reqW := io.Pipe()
	repR, repW := io.Pipe()
	dead := gateway.NewRemote(repR, reqW)
	go func() { _, _ = io.Copy(io.Discard, reqR) }()
	repW.Close()
	_, err = dead.Ready(ctx)
	require.Error(t, err)
	_, err = dead.Grant(ctx, gateway.GrantSpec{Upstream: srv.URL(),
		Credential: gateway.Credential{Scheme: gateway.SchemeBearer, Secret: marker}})
	require.Error(t, err)
	assert.NotContains(t, err.Error(), marker)

	g.Revoke()
	assert.Equal(t, "y", g.Snapshot().Label)
}

// TestServeControlRevokesOnEnd: when the channel ends, ServeControl returns
// and every grant opened through it is revoked.
func TestServeControlRevokesOnEnd(t *testing.T) {
	srv := newUpstream(t)
	gw, base, _ := newGateway(t, srv.URL())
	reqR, reqW := io.Pipe()
	repR, repW := io.Pipe()
	served := make(chan error, 1)
	go func() { served <- gw.ServeControl(context.Background(), reqR, repW); repW.Close() }()
	rem := gateway.NewRemote(repR, reqW)
	g, err := rem.Grant(context.Background(), gateway.GrantSpec{Upstream: srv.URL(),
		Credential: gateway.Credential{Scheme: gateway.SchemeBearer, Secret: marker}})
	require.NoError(t, err)
	resp, _ := send(t, base, apis[1], g.Placeholder(), "hi", false)
	require.Equal(t, http.StatusOK, resp.StatusCode)

	reqW.Close()
	select {
	case err := <-served:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("ServeControl did not return when its input ended")
	}
	resp, _ = send(t, base, apis[1], g.Placeholder(), "hi", false)
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, "grants end with the channel")
}

// TestRemoteBudget: a budget travels over the control channel as what is
// left of it; the remote gateway refuses once it is spent, tells the grant
// at once (Refused), and Revoke charges what it measured to the budget the
// grant draws on, so the next grant on the same budget starts spent.
func TestRemoteBudget(t *testing.T) {
	srv := newUpstream(t, outposttest.WithScenario(outposttest.ScenarioOK))
	rem, _, _, _ := remoteGateway(t, srv.URL())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	urls, err := rem.Ready(ctx)
	require.NoError(t, err)
	base := urls[0]

	batch, err := gateway.NewCapped(gateway.Caps{Tokens: 1})
	require.NoError(t, err)
	turn, err := batch.Sub(gateway.Caps{})
	require.NoError(t, err)
	g, err := rem.Grant(ctx, gateway.GrantSpec{Label: "capped", Upstream: srv.URL(), Budget: turn,
		Credential: gateway.Credential{Scheme: gateway.SchemeBearer, Secret: marker}})
	require.NoError(t, err)
	select {
	case <-g.Refused():
		t.Fatal("refused before any request")
	default:
	}
	resp, _ := send(t, base, apis[0], g.Placeholder(), "MARK-1", false)
	require.Equal(t, http.StatusOK, resp.StatusCode, "the crossing request runs")
	resp, body := send(t, base, apis[0], g.Placeholder(), "MARK-2", false)
	assert.Equal(t, gateway.BudgetStatus, resp.StatusCode)
	assert.Contains(t, string(body), "token cap")
	select {
	case <-g.Refused():
	case <-ctx.Done():
		t.Fatal("the remote gateway did not report its refusal")
	}
	g.Revoke()
	assert.Positive(t, batch.SpentTokens(), "the remote measurement is charged to the shared budget")
	assert.Equal(t, batch.SpentTokens(), turn.SpentTokens())
	over, _ := batch.Exceeded()
	assert.True(t, over)
	assert.Len(t, srv.Requests(), 1)

	// A second turn on the spent batch budget gets the smallest cap: its
	// first response crosses it, its second request is refused.
	turn2, err := batch.Sub(gateway.Caps{})
	require.NoError(t, err)
	g2, err := rem.Grant(ctx, gateway.GrantSpec{Label: "late", Upstream: srv.URL(), Budget: turn2,
		Credential: gateway.Credential{Scheme: gateway.SchemeBearer, Secret: marker}})
	require.NoError(t, err)
	defer g2.Revoke()
	send(t, base, apis[0], g2.Placeholder(), "MARK-3", false)
	resp, _ = send(t, base, apis[0], g2.Placeholder(), "MARK-4", false)
	assert.Equal(t, gateway.BudgetStatus, resp.StatusCode)
}

// TestServeControlRefusesAnEndlessRequest: a request line past the bound
// ends the channel with an error as soon as it passes it, without waiting
// for a newline that may never come.
func TestServeControlRefusesAnEndlessRequest(t *testing.T) {
	srv := newUpstream(t)
	gw, _, _ := newGateway(t, srv.URL())
	reqR, reqW := io.Pipe()
	served := make(chan error, 1)
	go func() { served <- gw.ServeControl(context.Background(), reqR, io.Discard) }()
	go func() {
		chunk := []byte(strings.Repeat("x", 1<<20))
		for {
			if _, err := reqW.Write(chunk); err != nil {
				return
			}
		}
	}()
	err := <-served
	reqR.CloseWithError(io.ErrClosedPipe)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "a request over")
}
