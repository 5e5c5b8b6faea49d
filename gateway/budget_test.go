package gateway_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/gateway"
	"github.com/outpost-dev/outpost/outposttest"
	"github.com/outpost-dev/outpost/usage"
)

// perToken prices every token at one micro-dollar.
func perToken(_ string, u usage.Usage) (float64, bool) { return float64(u.Tokens()) * 1e-6, true }

// TestBudgetStopsAtTheCrossingRequest: with a cap below one answer's cost,
// the first request runs (and crosses the cap), every later one is refused
// with the budget status and marker in the API's own error shape, before
// reaching the upstream.
func TestBudgetStopsAtTheCrossingRequest(t *testing.T) {
	for _, a := range apis {
		t.Run(a.name, func(t *testing.T) {
			srv := newUpstream(t, outposttest.WithScenario(outposttest.ScenarioTool))
			gw, base, _ := newGateway(t, srv.URL())
			b, err := gateway.NewBudget(1e-6) // one token's worth
			require.NoError(t, err)
			g, err := gw.Grant(gateway.GrantSpec{Label: "capped", Upstream: srv.URL(), Price: perToken, Budget: b,
				Credential: gateway.Credential{Scheme: gateway.SchemeBearer, Secret: marker}})
			require.NoError(t, err)
			defer g.Revoke()

			resp, _ := send(t, base, a, g.Placeholder(), "write MARK-b", true)
			require.Equal(t, http.StatusOK, resp.StatusCode)
			over, msg := b.Exceeded()
			require.True(t, over)
			assert.True(t, strings.HasPrefix(msg, gateway.BudgetMarker))

			resp, body := send(t, base, a, g.Placeholder(), "write MARK-b", true)
			assert.Equal(t, gateway.BudgetStatus, resp.StatusCode)
			assert.Contains(t, string(body), gateway.BudgetMarker)
			var shape map[string]any
			require.NoError(t, json.Unmarshal(body, &shape), "a JSON error body")
			assert.Contains(t, shape, "error")
			assert.Len(t, srv.Requests(), 1, "the refused request never reached the upstream")

			s := g.Snapshot()
			assert.Equal(t, []int{http.StatusOK, gateway.BudgetStatus}, s.Statuses)
			assert.True(t, s.BudgetExceeded)
			assert.Equal(t, gateway.RefusedBudget, s.Exchanges[1].Refusal)
			assert.InDelta(t, float64(s.Usage.Tokens())*1e-6, s.Usage.CostUSD, 1e-12)
			assert.InDelta(t, s.Usage.CostUSD, b.Spent(), 1e-12)
			ev, ok := s.Evidence()
			require.True(t, ok)
			assert.Equal(t, gateway.EvidenceBudget, ev.Kind)
			assert.Contains(t, ev.Message, gateway.BudgetMarker)
		})
	}
}

// TestBudgetShared: one budget across grants is a per-batch cap; a grant
// without the budget is unaffected.
func TestBudgetShared(t *testing.T) {
	srv := newUpstream(t)
	gw, base, _ := newGateway(t, srv.URL())
	b, err := gateway.NewBudget(1e-6)
	require.NoError(t, err)
	mk := func(budget *gateway.Budget) *gateway.Grant {
		g, err := gw.Grant(gateway.GrantSpec{Upstream: srv.URL(), Price: perToken, Budget: budget,
			Credential: gateway.Credential{Scheme: gateway.SchemeAPIKey, Secret: marker}})
		require.NoError(t, err)
		t.Cleanup(g.Revoke)
		return g
	}
	g1, g2, free := mk(b), mk(b), mk(nil)
	resp, _ := send(t, base, apis[0], g1.Placeholder(), "MARK-1", false)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	resp, _ = send(t, base, apis[0], g2.Placeholder(), "MARK-2", false)
	assert.Equal(t, gateway.BudgetStatus, resp.StatusCode, "the batch budget is spent")
	resp, _ = send(t, base, apis[0], free.Placeholder(), "MARK-3", false)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Positive(t, free.Snapshot().Usage.CostUSD)
}

// TestBudgetUnpricedFailsClosed: a model without a price makes the cap
// unenforceable, so later requests are refused and say why.
func TestBudgetUnpricedFailsClosed(t *testing.T) {
	srv := newUpstream(t)
	gw, base, _ := newGateway(t, srv.URL())
	b, err := gateway.NewBudget(100)
	require.NoError(t, err)
	g, err := gw.Grant(gateway.GrantSpec{Upstream: srv.URL(), Budget: b,
		Price:      func(string, usage.Usage) (float64, bool) { return 0, false },
		Credential: gateway.Credential{Scheme: gateway.SchemeAPIKey, Secret: marker}})
	require.NoError(t, err)
	defer g.Revoke()
	resp, _ := send(t, base, apis[0], g.Placeholder(), "MARK-1", false)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	resp, body := send(t, base, apis[0], g.Placeholder(), "MARK-2", false)
	assert.Equal(t, gateway.BudgetStatus, resp.StatusCode)
	assert.Contains(t, string(body), "no price is known for model")
	s := g.Snapshot()
	assert.False(t, s.Priced())
	assert.Zero(t, s.Usage.CostUSD, "no partial cost is reported")
}

func TestBudgetValidation(t *testing.T) {
	for _, c := range []float64{0, -1} {
		_, err := gateway.NewBudget(c)
		require.Error(t, err)
	}
	srv := newUpstream(t)
	gw, _, _ := newGateway(t, srv.URL())
	b, err := gateway.NewBudget(1)
	require.NoError(t, err)
	assert.InDelta(t, 1.0, b.Cap(), 0)
	_, err = gw.Grant(gateway.GrantSpec{Upstream: srv.URL(), Budget: b,
		Credential: gateway.Credential{Scheme: gateway.SchemeAPIKey, Secret: marker}})
	require.Error(t, err, "a budget needs a price function")
}

// TestSnapshotSince: a warm session's grant yields one turn's part.
func TestSnapshotSince(t *testing.T) {
	srv := newUpstream(t)
	gw, base, _ := newGateway(t, srv.URL())
	g := grant(t, gw, srv.URL(), gateway.SchemeAPIKey)
	send(t, base, apis[0], g.Placeholder(), "MARK-1 [[outpost:scenario=overloaded]]", true)
	first := g.Snapshot()
	srv.ResetRequests()
	send(t, base, apis[0], g.Placeholder(), "MARK-2", true)
	turn := g.Snapshot().Since(first)
	assert.Equal(t, 1, turn.Requests)
	assert.Equal(t, []int{http.StatusOK}, turn.Statuses)
	want := serverUsage(srv.Requests())
	want.Complete = true
	assert.Equal(t, want, turn.Usage)
	_, failed := turn.Evidence()
	assert.False(t, failed, "the first turn's failure is not this turn's")
	assert.Zero(t, g.Snapshot().Since(gateway.Snapshot{Requests: 99}).Requests, "a later snapshot than this one leaves nothing")
}

// TestBudgetSubAndTokens: a turn's budget under a batch's: both caps hold,
// a charge counts against both, a token cap needs no price, Remaining is
// the tighter of each, and the grant's Refused fires on the first refusal,
// not on the crossing response.
func TestBudgetSubAndTokens(t *testing.T) {
	srv := newUpstream(t)
	gw, base, _ := newGateway(t, srv.URL())
	batch, err := gateway.NewCapped(gateway.Caps{USD: 10, Tokens: 1_000_000})
	require.NoError(t, err)
	turn, err := batch.Sub(gateway.Caps{Tokens: 1})
	require.NoError(t, err)
	assert.Equal(t, gateway.Caps{USD: 10, Tokens: 1}, turn.Remaining())

	g, err := gw.Grant(gateway.GrantSpec{Upstream: srv.URL(), Budget: turn, Price: perToken,
		Credential: gateway.Credential{Scheme: gateway.SchemeAPIKey, Secret: marker}})
	require.NoError(t, err)
	defer g.Revoke()
	resp, _ := send(t, base, apis[0], g.Placeholder(), "MARK-1", false)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	select {
	case <-g.Refused():
		t.Fatal("a crossing response is no refusal")
	default:
	}
	reason, msg := turn.Over()
	assert.Equal(t, "tokens", reason)
	assert.Contains(t, msg, "token cap of 1 is spent")
	assert.Equal(t, turn.SpentTokens(), batch.SpentTokens())
	assert.InDelta(t, turn.Spent(), batch.Spent(), 1e-12)
	over, _ := batch.Exceeded()
	assert.False(t, over, "the batch's caps are not spent")

	resp, _ = send(t, base, apis[0], g.Placeholder(), "MARK-2", false)
	assert.Equal(t, gateway.BudgetStatus, resp.StatusCode)
	select {
	case <-g.Refused():
	default:
		t.Fatal("the refusal was not signalled")
	}

	// A token-only budget needs no price function; an unpriced model does
	// not stop it.
	tok, err := gateway.NewCapped(gateway.Caps{Tokens: 1_000_000})
	require.NoError(t, err)
	g2, err := gw.Grant(gateway.GrantSpec{Upstream: srv.URL(), Budget: tok,
		Credential: gateway.Credential{Scheme: gateway.SchemeAPIKey, Secret: marker}})
	require.NoError(t, err)
	defer g2.Revoke()
	for i := 0; i < 2; i++ {
		resp, _ = send(t, base, apis[0], g2.Placeholder(), "MARK-3", false)
		assert.Equal(t, http.StatusOK, resp.StatusCode)
	}
	assert.Positive(t, tok.SpentTokens())

	// The batch spent by another turn refuses this one's next request.
	spender, err := gateway.NewCapped(gateway.Caps{USD: 1e-9})
	require.NoError(t, err)
	a, err := spender.Sub(gateway.Caps{})
	require.NoError(t, err)
	b, err := spender.Sub(gateway.Caps{})
	require.NoError(t, err)
	ga, err := gw.Grant(gateway.GrantSpec{Upstream: srv.URL(), Budget: a, Price: perToken,
		Credential: gateway.Credential{Scheme: gateway.SchemeAPIKey, Secret: marker}})
	require.NoError(t, err)
	defer ga.Revoke()
	gb, err := gw.Grant(gateway.GrantSpec{Upstream: srv.URL(), Budget: b, Price: perToken,
		Credential: gateway.Credential{Scheme: gateway.SchemeAPIKey, Secret: marker}})
	require.NoError(t, err)
	defer gb.Revoke()
	send(t, base, apis[0], ga.Placeholder(), "MARK-4", false)
	resp, _ = send(t, base, apis[0], gb.Placeholder(), "MARK-5", false)
	assert.Equal(t, gateway.BudgetStatus, resp.StatusCode)

	for _, c := range []gateway.Caps{{}, {USD: -1}, {Tokens: -1}} {
		_, err := gateway.NewCapped(c)
		assert.Error(t, err, "%+v", c)
	}
}
