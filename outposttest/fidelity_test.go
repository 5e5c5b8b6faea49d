package outposttest_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/outposttest"
)

// repeatReader yields the same byte forever.
type repeatReader byte

func (r repeatReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(r)
	}
	return len(p), nil
}

// TestOversizedBodyIsRefusedAs413: a body over the server's bound is
// answered 413 in the API's own error shape, not parsed truncated (which
// said "unexpected end of JSON input", blaming the client's JSON).
func TestOversizedBodyIsRefusedAs413(t *testing.T) {
	srv, err := outposttest.NewUnstartedServer()
	require.NoError(t, err)
	defer srv.Close()
	const limit = 64 << 20
	for _, tc := range []struct{ path, errType string }{
		{"/v1/messages", "request_too_large"},
		{"/v1/messages/count_tokens", "request_too_large"},
		{"/v1/responses", "invalid_request_error"},
		{"/v1/chat/completions", "invalid_request_error"},
	} {
		prefix := `{"model":"m","stream":true,"messages":[{"role":"user","content":"`
		b := io.MultiReader(strings.NewReader(prefix), io.LimitReader(repeatReader('a'), limit+1))
		req := httptest.NewRequest(http.MethodPost, tc.path, b)
		rec := httptest.NewRecorder()
		srv.Handler().ServeHTTP(rec, req)
		assert.Equal(t, http.StatusRequestEntityTooLarge, rec.Code, tc.path)
		var e struct {
			Error struct{ Type, Message string } `json:"error"`
		}
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &e), tc.path)
		assert.Equal(t, tc.errType, e.Error.Type, tc.path)
		assert.NotContains(t, e.Error.Message, "unexpected end of JSON input", tc.path)
	}
}

// TestRequestLogIsBounded: a long-running server (outpost stub-model, an
// offline runner) keeps only the newest MaxLoggedRequests entries, and
// entries of requests still in flight are still annotated.
func TestRequestLogIsBounded(t *testing.T) {
	srv, err := outposttest.NewUnstartedServer()
	require.NoError(t, err)
	defer srv.Close()
	n := outposttest.MaxLoggedRequests + 5
	for i := range n {
		rec := httptest.NewRecorder()
		srv.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/?i="+itoa(i), nil))
		require.Equal(t, http.StatusOK, rec.Code)
	}
	reqs := srv.Requests()
	require.Equal(t, outposttest.MaxLoggedRequests, len(reqs))
	assert.Equal(t, "i=5", reqs[0].Query)
	assert.Equal(t, "i="+itoa(n-1), reqs[len(reqs)-1].Query)
	for _, r := range reqs {
		assert.Equal(t, http.StatusOK, r.Status, r.Query)
	}
	// A model request after the log wrapped is still fully annotated.
	rec := httptest.NewRecorder()
	raw := `{"model":"m","stream":true,"tools":[{"name":"Bash"}],"messages":[{"role":"user","content":"MARK-b"}]}`
	srv.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/messages", strings.NewReader(raw)))
	reqs = srv.Requests()
	last := reqs[len(reqs)-1]
	assert.Equal(t, outposttest.ScenarioOK, last.Scenario)
	assert.Equal(t, http.StatusOK, last.Status)
	assert.NotNil(t, last.Usage)
	srv.ResetRequests()
	assert.Empty(t, srv.Requests())
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

// TestResponsesJSONToolCallUsesDeclaredShell: a non-streamed Responses
// request that offers only "shell" gets a call of "shell", as the stream
// does, not of the undeclared exec_command.
func TestResponsesJSONToolCallUsesDeclaredShell(t *testing.T) {
	srv := newServer(t)
	raw := `{"model":"gpt-5","stream":false,"tools":[{"type":"function","name":"shell"}],"input":"MARK-s ` +
		outposttest.Directive(outposttest.ScenarioTool) + `"}`
	resp, err := http.Post(srv.URL()+"/v1/responses", "application/json", strings.NewReader(raw))
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var body struct {
		Output []struct {
			Type, Name, Arguments string
		} `json:"output"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
	var calls int
	for _, it := range body.Output {
		if it.Type == "function_call" {
			calls++
			assert.Equal(t, "shell", it.Name)
			assert.Contains(t, it.Arguments, `"command":["bash","-lc"`)
		}
	}
	assert.Equal(t, 1, calls)
}

// TestResponsesSendNoAnthropicHeaders: the Responses API's answers carry
// no anthropic-* headers (the Chat Completions API's never did).
func TestResponsesSendNoAnthropicHeaders(t *testing.T) {
	srv := newServer(t)
	for _, stream := range []bool{true, false} {
		raw, _ := json.Marshal(map[string]any{"model": "gpt-5", "stream": stream,
			"tools": []any{map[string]any{"type": "function", "name": "exec_command"}},
			"input": "MARK-h " + outposttest.Directive(outposttest.ScenarioQuotaWarning)})
		resp, err := http.Post(srv.URL()+"/v1/responses", "application/json", strings.NewReader(string(raw)))
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		for k := range resp.Header {
			assert.False(t, strings.HasPrefix(strings.ToLower(k), "anthropic-"), "stream=%v header %s", stream, k)
		}
	}
}
