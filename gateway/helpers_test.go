package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/gateway"
	"github.com/outpost-dev/outpost/outposttest"
	"github.com/outpost-dev/outpost/usage"
)

// marker is the real credential in these tests: it must reach the upstream
// and nothing else.
const marker = "sk-outpost-marker-gw-7d1e0c55"

func newUpstream(t *testing.T, opts ...outposttest.Option) *outposttest.Server {
	t.Helper()
	srv, err := outposttest.NewServer(opts...)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, srv.Close()) })
	return srv
}

// logBuffer collects the gateway's debug logs for leak checks.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(b)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// newGateway starts a gateway on loopback TCP that allows the given
// upstreams; it returns the gateway, its URL and its log.
func newGateway(t *testing.T, upstreams ...string) (*gateway.Gateway, string, *logBuffer) {
	t.Helper()
	logs := &logBuffer{}
	gw, err := gateway.New(gateway.Options{Upstreams: upstreams,
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, gw.Close()) })
	u, err := gw.ListenTCP("127.0.0.1:0")
	require.NoError(t, err)
	return gw, u, logs
}

func grant(t *testing.T, gw *gateway.Gateway, upstream string, scheme gateway.Scheme) *gateway.Grant {
	t.Helper()
	g, err := gw.Grant(gateway.GrantSpec{Label: "lease-1", Upstream: upstream,
		Credential: gateway.Credential{Scheme: scheme, Secret: marker}})
	require.NoError(t, err)
	t.Cleanup(g.Revoke)
	return g
}

// apiRequest is a minimal model request of one API.
type apiRequest struct {
	name   string
	api    gateway.API
	path   string
	header func(key string) http.Header
	body   func(prompt string, stream bool) map[string]any
}

var apis = []apiRequest{
	{
		name: "anthropic", api: gateway.APIAnthropic, path: "/v1/messages?beta=true",
		header: func(key string) http.Header {
			return http.Header{"X-Api-Key": {key}, "Anthropic-Version": {"2023-06-01"}}
		},
		body: func(prompt string, stream bool) map[string]any {
			return map[string]any{"model": "claude-opus-5-5", "max_tokens": 1024, "stream": stream,
				"tools":    []any{map[string]any{"name": "Bash", "input_schema": map[string]any{"type": "object"}}},
				"messages": []any{map[string]any{"role": "user", "content": prompt}}}
		},
	},
	{
		name: "responses", api: gateway.APIResponses, path: "/v1/responses",
		header: func(key string) http.Header { return http.Header{"Authorization": {"Bearer " + key}} },
		body: func(prompt string, stream bool) map[string]any {
			return map[string]any{"model": "gpt-5.5", "stream": stream, "input": []any{
				map[string]any{"type": "message", "role": "user", "content": []any{map[string]any{"type": "input_text", "text": prompt}}}},
				"tools": []any{map[string]any{"type": "function", "name": "exec_command", "parameters": map[string]any{"type": "object"}}}}
		},
	},
	{
		name: "chat", api: gateway.APIChat, path: "/v1/chat/completions",
		header: func(key string) http.Header { return http.Header{"Authorization": {"Bearer " + key}} },
		body: func(prompt string, stream bool) map[string]any {
			b := map[string]any{"model": "gpt-4.1", "stream": stream,
				"messages": []any{map[string]any{"role": "user", "content": prompt}},
				"tools":    []any{map[string]any{"type": "function", "function": map[string]any{"name": "bash", "parameters": map[string]any{"type": "object"}}}}}
			if stream {
				b["stream_options"] = map[string]any{"include_usage": true}
			}
			return b
		},
	},
}

// send posts one model request of api to base with key.
func send(t *testing.T, base string, a apiRequest, key, prompt string, stream bool) (*http.Response, []byte) {
	t.Helper()
	return sendCtx(t, context.Background(), base, a, key, prompt, stream)
}

func sendCtx(t *testing.T, ctx context.Context, base string, a apiRequest, key, prompt string, stream bool) (*http.Response, []byte) {
	t.Helper()
	raw, err := json.Marshal(a.body(prompt, stream))
	require.NoError(t, err)
	return postRaw(t, ctx, base+a.path, a.header(key), raw)
}

// postRaw posts a JSON body to url with header and reads the whole answer.
func postRaw(t *testing.T, ctx context.Context, url string, header http.Header, raw []byte) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(raw))
	require.NoError(t, err)
	for k, v := range header {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, b
}

// serverUsage sums the usage the scripted server logged, in usage.Usage terms.
func serverUsage(reqs []outposttest.Request) usage.Usage {
	var u usage.Usage
	for _, r := range reqs {
		if r.Usage != nil {
			u = u.Add(usage.Usage{Input: r.Usage.Input, Cached: r.Usage.Cached, CacheCreated: r.Usage.CacheCreated,
				Output: r.Usage.Output, Reasoning: r.Usage.Reasoning})
		}
	}
	return u
}

// answer extracts the answer text of a response body of any API, streamed
// or not, and the sequence of stream event kinds.
func answer(t *testing.T, api gateway.API, body []byte) (text string, kinds []string) {
	t.Helper()
	var b strings.Builder
	type chat struct {
		Choices []struct {
			Delta   struct{ Content string }
			Message struct{ Content string }
		}
	}
	if !bytes.HasPrefix(bytes.TrimSpace(body), []byte("{")) {
		for _, line := range strings.Split(string(body), "\n") {
			data, ok := strings.CutPrefix(line, "data: ")
			if !ok {
				continue
			}
			if data == "[DONE]" {
				kinds = append(kinds, "[DONE]")
				continue
			}
			var ev struct {
				Type  string
				Delta json.RawMessage
			}
			require.NoError(t, json.Unmarshal([]byte(data), &ev), data)
			kinds = append(kinds, ev.Type)
			switch api {
			case gateway.APIAnthropic:
				var d struct{ Text string }
				_ = json.Unmarshal(ev.Delta, &d)
				b.WriteString(d.Text)
			case gateway.APIResponses:
				var d string
				if ev.Type == "response.output_text.delta" && json.Unmarshal(ev.Delta, &d) == nil {
					b.WriteString(d)
				}
			case gateway.APIChat:
				var c chat
				require.NoError(t, json.Unmarshal([]byte(data), &c))
				for _, ch := range c.Choices {
					b.WriteString(ch.Delta.Content)
				}
			}
		}
		return b.String(), kinds
	}
	switch api {
	case gateway.APIAnthropic:
		var m struct{ Content []struct{ Text string } }
		require.NoError(t, json.Unmarshal(body, &m))
		for _, c := range m.Content {
			b.WriteString(c.Text)
		}
	case gateway.APIResponses:
		var m struct {
			Output []struct{ Content []struct{ Text string } }
		}
		require.NoError(t, json.Unmarshal(body, &m))
		for _, o := range m.Output {
			for _, c := range o.Content {
				b.WriteString(c.Text)
			}
		}
	case gateway.APIChat:
		var c chat
		require.NoError(t, json.Unmarshal(body, &c))
		for _, ch := range c.Choices {
			b.WriteString(ch.Message.Content)
		}
	}
	return b.String(), nil
}
