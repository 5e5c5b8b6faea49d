package gateway_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/gateway"
)

// post sends body to base+path with a bearer key and reads the whole answer.
func post(t *testing.T, base, path, key string, body []byte) (*http.Response, []byte) {
	t.Helper()
	return postRaw(t, context.Background(), base+path, http.Header{"Authorization": {"Bearer " + key}}, body)
}

func ceilDiv(n, d int) int64 { return int64((n + d - 1) / d) }

// chatWithoutUsage is a streamed Chat request that leaves out
// stream_options.include_usage: the upstream answers it, and bills it,
// without sending any usage.
func chatWithoutUsage(t *testing.T) []byte {
	t.Helper()
	raw, err := json.Marshal(map[string]any{"model": "gpt-4.1", "stream": true,
		"messages": []any{map[string]any{"role": "user", "content": "MARK-u"}}})
	require.NoError(t, err)
	return raw
}

// TestBudgetChargesAnAnswerWithoutUsage: an answer that carries no usage
// was billed upstream all the same; the budget is charged the byte-based
// estimate (input from the request, output from the response), priced for
// the model, so code in the lease cannot spend without limit by leaving
// include_usage out.
func TestBudgetChargesAnAnswerWithoutUsage(t *testing.T) {
	srv := newUpstream(t)
	gw, base, _ := newGateway(t, srv.URL())
	b, err := gateway.NewCapped(gateway.Caps{Tokens: 50})
	require.NoError(t, err)
	g, err := gw.Grant(gateway.GrantSpec{Upstream: srv.URL(), Budget: b, Price: gateway.ListPrice,
		Credential: gateway.Credential{Scheme: gateway.SchemeBearer, Secret: marker}})
	require.NoError(t, err)
	defer g.Revoke()

	raw := chatWithoutUsage(t)
	resp, body := post(t, base, "/v1/chat/completions", g.Placeholder(), raw)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, string(body), "[DONE]", "a whole stream")
	require.NotContains(t, string(body), `"usage":{`, "no usage without include_usage")

	s := g.Snapshot()
	require.Len(t, s.Exchanges, 1)
	e := s.Exchanges[0]
	require.NotNil(t, e.Estimate, "an answer without usage is charged an estimate")
	assert.False(t, e.HasUsage)
	assert.Equal(t, "gpt-4.1", e.Model, "the model its chunks name")
	assert.Equal(t, ceilDiv(len(raw), 2), e.Estimate.Input, "one input token per two request bytes")
	assert.Equal(t, ceilDiv(len(body), 4), e.Estimate.Output, "one output token per four response bytes")
	want, _ := gateway.ListPrice("gpt-4.1", *e.Estimate)
	assert.True(t, e.Estimate.CostKnown)
	assert.InDelta(t, want, e.Estimate.CostUSD, 1e-12)
	assert.Equal(t, e.Estimate.Tokens(), b.SpentTokens(), "the budget is charged the estimate")
	assert.False(t, s.Usage.Complete, "the usage of record stays what was measured: incomplete")

	resp, body = post(t, base, "/v1/chat/completions", g.Placeholder(), raw)
	assert.Equal(t, gateway.BudgetStatus, resp.StatusCode, "the estimate spent the cap")
	assert.Contains(t, string(body), gateway.BudgetMarker)
	assert.Len(t, srv.Requests(), 1, "the refused request never reached the upstream")
}

// cutUpstream streams a Responses answer up to its last event before
// response.completed, which alone carries the usage, then holds that
// event until the request ends. With named false the stream names no
// model.
func cutUpstream(t *testing.T, named bool) *httptest.Server {
	t.Helper()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		events := []string{
			`{"type":"response.output_text.delta","delta":"the whole answer"}`,
			`{"type":"response.output_text.done","text":"the whole answer"}`,
			`{"type":"response.output_item.done","item":{"type":"message"}}`,
		}
		if named {
			events = append([]string{`{"type":"response.created","response":{"model":"claude-opus-5-5","usage":null}}`}, events...)
		}
		for _, ev := range events {
			var kind struct{ Type string }
			_ = json.Unmarshal([]byte(ev), &kind)
			_, _ = io.WriteString(w, "event: "+kind.Type+"\ndata: "+ev+"\n\n")
		}
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
			return
		case <-time.After(time.Minute):
		}
		_, _ = io.WriteString(w, "event: response.completed\n"+`data: {"type":"response.completed","response":{"usage":{"input_tokens":5,"output_tokens":5}}}`+"\n\n")
	}))
	t.Cleanup(up.Close)
	return up
}

// streamUntil posts a streamed Responses request and reads events until
// one contains want, then hangs up.
func streamUntil(t *testing.T, base, key, body, want string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/responses", strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	br := bufio.NewReader(resp.Body)
	for !strings.Contains(readEvent(t, br), want) {
	}
}

// settled waits until the grant's only exchange is done.
func settled(t *testing.T, g *gateway.Grant) gateway.Exchange {
	t.Helper()
	var e gateway.Exchange
	require.Eventually(t, func() bool {
		s := g.Snapshot()
		if len(s.Exchanges) != 1 || s.Exchanges[0].Duration == 0 {
			return false
		}
		e = s.Exchanges[0]
		return true
	}, 30*time.Second, 5*time.Millisecond)
	return e
}

// TestBudgetChargesAStreamCutBeforeItsUsage: a lease that hangs up once it
// has the answer, before the closing event that carries the usage, is
// charged the estimate of what passed, priced for the model the stream
// named: hanging up early buys nothing for free.
func TestBudgetChargesAStreamCutBeforeItsUsage(t *testing.T) {
	up := cutUpstream(t, true)
	gw, base, _ := newGateway(t, up.URL)
	b, err := gateway.NewCapped(gateway.Caps{USD: 1e-6})
	require.NoError(t, err)
	g, err := gw.Grant(gateway.GrantSpec{Upstream: up.URL, Budget: b, Price: gateway.ListPrice,
		Credential: gateway.Credential{Scheme: gateway.SchemeBearer, Secret: marker}})
	require.NoError(t, err)
	defer g.Revoke()

	body := `{"model":"gpt-4.1","stream":true,"input":"MARK-cut"}`
	streamUntil(t, base, g.Placeholder(), body, "response.output_item.done")
	e := settled(t, g)
	require.NotNil(t, e.Estimate, "a stream cut before its usage is charged an estimate")
	assert.Equal(t, "claude-opus-5-5", e.Model, "the stream's model wins over the request's")
	assert.Equal(t, ceilDiv(len(body), 2), e.Estimate.Input)
	assert.Positive(t, e.Estimate.Output)
	assert.True(t, e.Estimate.CostKnown)
	assert.InDelta(t, e.Estimate.CostUSD, b.Spent(), 1e-12)

	resp, rb := send(t, base, apis[1], g.Placeholder(), "MARK-next", true)
	assert.Equal(t, gateway.BudgetStatus, resp.StatusCode, "the cut stream's estimate spent the cap")
	assert.Contains(t, string(rb), gateway.BudgetMarker)
}

// TestBudgetEstimateTakesTheRequestsModel: a stream cut before it named a
// model is priced for the model the request named.
func TestBudgetEstimateTakesTheRequestsModel(t *testing.T) {
	up := cutUpstream(t, false)
	gw, base, _ := newGateway(t, up.URL)
	b, err := gateway.NewCapped(gateway.Caps{USD: 10})
	require.NoError(t, err)
	g, err := gw.Grant(gateway.GrantSpec{Upstream: up.URL, Budget: b, Price: gateway.ListPrice,
		Credential: gateway.Credential{Scheme: gateway.SchemeBearer, Secret: marker}})
	require.NoError(t, err)
	defer g.Revoke()

	// A long member before "model": the request's model is read from its
	// top level, not from the text inside it.
	body := `{"input":"say \"model\": \"gpt-6-astra\"` + strings.Repeat(" pad", 1000) + `","model":"gpt-4.1","stream":true}`
	streamUntil(t, base, g.Placeholder(), body, "response.output_item.done")
	e := settled(t, g)
	require.NotNil(t, e.Estimate)
	assert.Equal(t, "gpt-4.1", e.Model)
	want, ok := gateway.ListPrice("gpt-4.1", *e.Estimate)
	require.True(t, ok)
	assert.InDelta(t, want, b.Spent(), 1e-12)
	over, msg := b.Exceeded()
	assert.False(t, over, msg)
}

// TestBudgetErrorEventIsNotCharged: a stream that ends with an error event
// instead of an answer (an upstream failure mid-stream) is no answer to
// estimate: nothing is charged, and the cap stays open.
func TestBudgetErrorEventIsNotCharged(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"model\":\"gpt-4.1\",\"usage\":null}}\n\n"+
			"event: error\ndata: {\"type\":\"error\",\"code\":\"server_error\",\"message\":\"boom\"}\n\n")
	}))
	t.Cleanup(up.Close)
	gw, base, _ := newGateway(t, up.URL)
	b, err := gateway.NewCapped(gateway.Caps{Tokens: 10})
	require.NoError(t, err)
	g, err := gw.Grant(gateway.GrantSpec{Upstream: up.URL, Budget: b,
		Credential: gateway.Credential{Scheme: gateway.SchemeBearer, Secret: marker}})
	require.NoError(t, err)
	defer g.Revoke()
	for range 2 {
		resp, body := send(t, base, apis[1], g.Placeholder(), "MARK-err", true)
		assert.Equal(t, http.StatusOK, resp.StatusCode)
		assert.NotContains(t, string(body), gateway.BudgetMarker)
	}
	for _, e := range g.Snapshot().Exchanges {
		assert.Nil(t, e.Estimate)
	}
	assert.Zero(t, b.SpentTokens())
}

// TestRemoteBudgetChargesTheEstimate: a remote gateway's estimate reaches
// the budget the grant draws on when the grant is revoked.
func TestRemoteBudgetChargesTheEstimate(t *testing.T) {
	srv := newUpstream(t)
	rem, _, _, _ := remoteGateway(t, srv.URL())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	urls, err := rem.Ready(ctx)
	require.NoError(t, err)
	batch, err := gateway.NewCapped(gateway.Caps{Tokens: 1_000_000})
	require.NoError(t, err)
	turn, err := batch.Sub(gateway.Caps{})
	require.NoError(t, err)
	g, err := rem.Grant(ctx, gateway.GrantSpec{Upstream: srv.URL(), Budget: turn,
		Credential: gateway.Credential{Scheme: gateway.SchemeBearer, Secret: marker}})
	require.NoError(t, err)
	resp, _ := post(t, urls[0], "/v1/chat/completions", g.Placeholder(), chatWithoutUsage(t))
	require.Equal(t, http.StatusOK, resp.StatusCode)
	g.Revoke()
	s := g.Snapshot()
	require.Len(t, s.Exchanges, 1)
	require.NotNil(t, s.Exchanges[0].Estimate)
	assert.Equal(t, s.Exchanges[0].Estimate.Tokens(), batch.SpentTokens())
}

// TestGrantRecordsAtMostMaxRequests: past Options.MaxRequestsPerGrant a
// request is refused without being forwarded or recorded, and counted.
func TestGrantRecordsAtMostMaxRequests(t *testing.T) {
	srv := newUpstream(t)
	gw, err := gateway.New(gateway.Options{Upstreams: []string{srv.URL()}, MaxRequestsPerGrant: 3})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, gw.Close()) })
	base, err := gw.ListenTCP("127.0.0.1:0")
	require.NoError(t, err)
	g := grant(t, gw, srv.URL(), gateway.SchemeAPIKey)

	for i := range 2 {
		resp, _ := send(t, base, apis[0], g.Placeholder(), fmt.Sprint("MARK-", i), false)
		require.Equal(t, http.StatusOK, resp.StatusCode)
	}
	req, err := http.NewRequest(http.MethodGet, base+"/v1/files", nil)
	require.NoError(t, err)
	req.Header.Set("X-Api-Key", g.Placeholder())
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusNotFound, resp.StatusCode, "a refused request counts too")
	for range 2 {
		resp, body := send(t, base, apis[0], g.Placeholder(), "MARK-over", false)
		assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
		assert.Contains(t, string(body), "the most one lease may make")
	}
	assert.Len(t, srv.Requests(), 2, "requests past the bound are not forwarded")
	s := g.Snapshot()
	assert.Equal(t, 5, s.Requests)
	assert.Equal(t, 2, s.Dropped)
	assert.Len(t, s.Exchanges, 3)
	assert.Len(t, s.Statuses, 3)
	since := s.Since(gateway.Snapshot{Requests: 1})
	assert.Equal(t, 4, since.Requests)
	assert.Equal(t, 2, since.Dropped)
	assert.Len(t, since.Exchanges, 2)
}
