package gateway_test

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/gateway"
	"github.com/outpost-dev/outpost/outposttest"
)

// TestStreamsUnbuffered: each event reaches the lease before the upstream
// sends the next one. The upstream waits for the test to read an event
// before writing the next, so a gateway that buffered would deadlock (the
// watchdog turns that into a failure, not a timing assertion).
func TestStreamsUnbuffered(t *testing.T) {
	next := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		for i := range 5 {
			_, _ = io.WriteString(w, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"n\":"+string(rune('0'+i))+"}\n\n")
			w.(http.Flusher).Flush()
			select {
			case <-next:
			case <-r.Context().Done():
				return
			}
		}
		_, _ = io.WriteString(w, "event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":5}}\n\n")
	}))
	defer up.Close()
	gw, base, _ := newGateway(t, up.URL)
	g := grant(t, gw, up.URL, gateway.SchemeAPIKey)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/messages", strings.NewReader(`{"stream":true}`))
	req.Header.Set("X-Api-Key", g.Placeholder())
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	for i := range 5 {
		ev := readEvent(t, br)
		require.Contains(t, ev, `"n":`+string(rune('0'+i)), "event %d arrived before the next was sent", i)
		next <- struct{}{}
	}
	assert.Contains(t, readEvent(t, br), "message_delta")
	_, _ = io.ReadAll(br)
	resp.Body.Close()
	g.Revoke()
	s := g.Snapshot()
	assert.Equal(t, int64(5), s.Usage.Output)
	assert.True(t, s.Exchanges[0].Stream)
}

func readEvent(t *testing.T, br *bufio.Reader) string {
	t.Helper()
	var b strings.Builder
	for {
		line, err := br.ReadString('\n')
		require.NoError(t, err)
		if line == "\n" {
			return b.String()
		}
		b.WriteString(line)
	}
}

// TestRevokeEndsRequestsInFlight: a request hanging upstream ends when its
// grant is revoked; the snapshot is final after Revoke; later requests are
// refused.
func TestRevokeEndsRequestsInFlight(t *testing.T) {
	srv := newUpstream(t, outposttest.WithScenario(outposttest.ScenarioHang))
	gw, base, _ := newGateway(t, srv.URL())
	g := grant(t, gw, srv.URL(), gateway.SchemeAPIKey)
	done := make(chan error, 1)
	go func() {
		raw := `{"model":"m","stream":true,"max_tokens":1,"tools":[{"name":"Bash"}],"messages":[{"role":"user","content":"MARK-h"}]}`
		req, _ := http.NewRequest(http.MethodPost, base+"/v1/messages", strings.NewReader(raw))
		req.Header.Set("X-Api-Key", g.Placeholder())
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			_, err = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		done <- err
	}()
	require.Eventually(t, func() bool { return len(srv.Requests()) == 1 }, 10*time.Second, 10*time.Millisecond,
		"the request reached the upstream")
	g.Revoke()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the hanging request outlived its grant")
	}
	s := g.Snapshot()
	require.Len(t, s.Exchanges, 1)
	assert.NotEqual(t, http.StatusOK, s.Exchanges[0].Status)
	resp, _ := send(t, base, apis[0], g.Placeholder(), "MARK-after", true)
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	assert.Len(t, g.Snapshot().Exchanges, 1, "a refused placeholder is not the grant's request")
}

// TestClientGoneMidStream: a lease that hangs up mid-stream leaves an
// exchange marked incomplete, not a crash.
func TestClientGoneMidStream(t *testing.T) {
	srv := newUpstream(t, outposttest.WithScenario(outposttest.ScenarioSlow), outposttest.WithChunkDelay(50*time.Millisecond))
	gw, base, _ := newGateway(t, srv.URL())
	g := grant(t, gw, srv.URL(), gateway.SchemeAPIKey)
	ctx, cancel := context.WithCancel(context.Background())
	raw := `{"model":"m","stream":true,"max_tokens":1,"tools":[{"name":"Bash"}],"messages":[{"role":"user","content":"MARK-c"}]}`
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/messages", strings.NewReader(raw))
	req.Header.Set("X-Api-Key", g.Placeholder())
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	br := bufio.NewReader(resp.Body)
	assert.Contains(t, readEvent(t, br), "message_start")
	cancel()
	resp.Body.Close()
	g.Revoke()
	s := g.Snapshot()
	require.Len(t, s.Exchanges, 1)
	assert.False(t, s.Usage.Complete, "the stream was cut before its final usage")
	assert.Equal(t, http.StatusOK, s.Exchanges[0].Status)
}

// TestRequestBodyBounded: a body over the bound is refused with 413.
func TestRequestBodyBounded(t *testing.T) {
	up := newRecorder(t)
	gw, err := gateway.New(gateway.Options{Upstreams: []string{up.url}, MaxRequestBytes: 1024})
	require.NoError(t, err)
	defer gw.Close()
	base, err := gw.ListenTCP("127.0.0.1:0")
	require.NoError(t, err)
	g, err := gw.Grant(gateway.GrantSpec{Upstream: up.url, Credential: gateway.Credential{Scheme: gateway.SchemeBearer, Secret: marker}})
	require.NoError(t, err)
	req, _ := http.NewRequest(http.MethodPost, base+"/v1/chat/completions", strings.NewReader(strings.Repeat("x", 4096)))
	req.Header.Set("Authorization", "Bearer "+g.Placeholder())
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
	assert.Equal(t, gateway.RefusedTooLarge, g.Snapshot().Exchanges[0].Refusal)
}
