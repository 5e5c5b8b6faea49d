package gateway_test

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/textproto"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/gateway"
)

// echoUpstream answers with the credential it was sent: in headers, a
// 103 Early Hints, trailers and the body. handler writes the body; key is
// the credential the request carried.
func echoUpstream(t *testing.T, body func(w http.ResponseWriter, f http.Flusher, key string)) string {
	t.Helper()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		key := r.Header.Get("X-Api-Key")
		w.Header().Set("Link", "</"+key+">; rel=preload")
		w.WriteHeader(http.StatusEarlyHints)
		h := w.Header()
		h.Del("Link")
		h.Set("X-Echo-Key", "you sent "+key)
		h.Add("Www-Authenticate", `Bearer realm="`+key+`"`)
		h.Set("Trailer", "X-Echo-Trailer")
		body(w, w.(http.Flusher), key)
		h.Set("X-Echo-Trailer", key)
	}))
	t.Cleanup(up.Close)
	return up.URL
}

// leaseSees sends a request through the gateway and returns everything the
// lease received: 1xx headers, headers, body and trailers.
func leaseSees(t *testing.T, base, placeholder, path, body string) (resp *http.Response, all string) {
	t.Helper()
	var b strings.Builder
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
		for k, vs := range h {
			b.WriteString(k + ": " + strings.Join(vs, ", ") + "\n")
		}
		return nil
	}})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+path, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("X-Api-Key", placeholder)
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	for k, vs := range resp.Header {
		b.WriteString(k + ": " + strings.Join(vs, ", ") + "\n")
	}
	b.Write(raw)
	for k, vs := range resp.Trailer {
		b.WriteString(k + ": " + strings.Join(vs, ", ") + "\n")
	}
	return resp, b.String()
}

// TestResponsesRedactCredential: an upstream echoing the real key in
// headers, a 103, trailers and a JSON body gives the lease [REDACTED] in
// each place, and the gateway still meters the body's usage.
func TestResponsesRedactCredential(t *testing.T) {
	for _, sized := range []bool{false, true} {
		var sent string
		up := echoUpstream(t, func(w http.ResponseWriter, _ http.Flusher, key string) {
			sent = `{"id":"msg_1","type":"message","model":"claude-x","content":[{"type":"text","text":"your key is ` + key +
				`"}],"usage":{"input_tokens":12,"output_tokens":34}}`
			w.Header().Set("Content-Type", "application/json")
			if sized {
				// The redaction makes the body longer than this (and a sized
				// body carries no trailers).
				w.Header().Set("Content-Length", strconv.Itoa(len(sent)))
			}
			_, _ = io.WriteString(w, sent)
		})
		gw, base, _ := newGateway(t, up)
		g := grant(t, gw, up, gateway.SchemeAPIKey)
		resp, all := leaseSees(t, base, g.Placeholder(), "/v1/messages", `{"model":"claude-x"}`)
		assert.Equal(t, http.StatusOK, resp.StatusCode)
		assert.NotContains(t, all, marker)
		assert.Contains(t, all, "Link: </"+gateway.Redaction+">; rel=preload", "the 103's header")
		assert.Equal(t, "you sent "+gateway.Redaction, resp.Header.Get("X-Echo-Key"))
		assert.Equal(t, `Bearer realm="`+gateway.Redaction+`"`, resp.Header.Get("Www-Authenticate"))
		if !sized {
			assert.Equal(t, gateway.Redaction, resp.Trailer.Get("X-Echo-Trailer"))
		}
		assert.Contains(t, all, strings.ReplaceAll(sent, marker, gateway.Redaction), "the body, with only the key replaced")
		g.Revoke()
		s := g.Snapshot()
		assert.Equal(t, int64(12), s.Usage.Input)
		assert.Equal(t, int64(34), s.Usage.Output)
		assert.True(t, s.Usage.Complete)
	}
}

// TestStreamRedactsSplitCredential: a stream echoing the key in events,
// cut across flushed writes at every offset of the key, reaches the lease
// with the key replaced and its events intact; usage is still metered.
func TestStreamRedactsSplitCredential(t *testing.T) {
	var cut int
	up := echoUpstream(t, func(w http.ResponseWriter, f http.Flusher, key string) {
		w.Header().Set("Content-Type", "text/event-stream")
		write := func(s string) { _, _ = io.WriteString(w, s); f.Flush() }
		write("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"claude-x\",\"usage\":{\"input_tokens\":7,\"output_tokens\":1}}}\n\n")
		ev := "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"delta\":{\"type\":\"text_delta\",\"text\":\"key " + key + " again " + key + "\"}}\n\n"
		at := strings.Index(ev, key) + cut
		write(ev[:at])
		write(ev[at:])
		write("event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":9}}\n\n")
	})
	gw, base, _ := newGateway(t, up)
	for cut = 0; cut <= len(marker); cut++ {
		g := grant(t, gw, up, gateway.SchemeAPIKey)
		_, all := leaseSees(t, base, g.Placeholder(), "/v1/messages", `{"stream":true}`)
		assert.NotContains(t, all, marker, "cut at %d", cut)
		assert.Contains(t, all, `"text":"key `+gateway.Redaction+` again `+gateway.Redaction+`"}}`+"\n\n", "cut at %d", cut)
		g.Revoke()
		s := g.Snapshot()
		assert.Equal(t, int64(7), s.Usage.Input, "cut at %d", cut)
		assert.Equal(t, int64(9), s.Usage.Output, "cut at %d", cut)
		assert.True(t, s.Usage.Complete, "cut at %d", cut)
	}
}

// TestStreamHoldsBackOnlyThePrefix: while the upstream has sent only the
// beginning of the key, the lease already has every byte before it; the
// upstream sends the rest only after the lease read them (a gateway that
// held more would deadlock; the watchdog turns that into a failure).
func TestStreamHoldsBackOnlyThePrefix(t *testing.T) {
	next := make(chan struct{})
	up := echoUpstream(t, func(w http.ResponseWriter, f http.Flusher, key string) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: {\"n\":1}\n\ndata: {\"text\":\""+key[:len(key)/2])
		f.Flush()
		<-next
		_, _ = io.WriteString(w, key[len(key)/2:]+"\"}\n\n")
		f.Flush()
		<-next
	})
	gw, base, _ := newGateway(t, up)
	g := grant(t, gw, up, gateway.SchemeAPIKey)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/messages", strings.NewReader(`{"stream":true}`))
	req.Header.Set("X-Api-Key", g.Placeholder())
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	want := "data: {\"n\":1}\n\ndata: {\"text\":\""
	got := make([]byte, len(want))
	_, err = io.ReadFull(br, got)
	require.NoError(t, err)
	assert.Equal(t, want, string(got), "everything before the key's beginning arrived")
	next <- struct{}{}
	line, err := br.ReadString('\n')
	require.NoError(t, err)
	assert.Equal(t, gateway.Redaction+"\"}\n", line)
	next <- struct{}{}
}
