package outposttest_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/outposttest"
)

// TestLogKeyFingerprint: the log proves which credential arrived without
// holding it.
func TestLogKeyFingerprint(t *testing.T) {
	srv := newServer(t)
	send := func(h map[string]string) outposttest.Request {
		t.Helper()
		srv.ResetRequests()
		raw, _ := json.Marshal(body(false, msg("user", "MARK-k")))
		req, err := http.NewRequest(http.MethodPost, srv.URL()+"/v1/messages", bytes.NewReader(raw))
		require.NoError(t, err)
		for k, v := range h {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		reqs := srv.Requests()
		require.Len(t, reqs, 1)
		return reqs[0]
	}
	r := send(map[string]string{"X-Api-Key": "sk-secret-1"})
	assert.Equal(t, outposttest.KeyFingerprint("sk-secret-1"), r.KeyFingerprint)
	assert.NotEqual(t, outposttest.KeyFingerprint("sk-secret-2"), r.KeyFingerprint)
	r = send(map[string]string{"Authorization": "Bearer tok-2"})
	assert.Equal(t, outposttest.KeyFingerprint("tok-2"), r.KeyFingerprint)
	r = send(nil)
	assert.Empty(t, r.KeyFingerprint)
	b, _ := json.Marshal(srv.Requests())
	assert.NotContains(t, string(b), "tok-2")
	assert.True(t, strings.HasPrefix(outposttest.KeyFingerprint("x"), "sha256:"))
}

// TestLogUsage: the usage each answer reported is logged, normalized, for
// every API, streamed and not.
func TestLogUsage(t *testing.T) {
	srv := newServer(t)
	m := streamMessage(t, srv, msg("user", "MARK-u1"))
	r := srv.Requests()[0]
	require.NotNil(t, r.Usage)
	assert.EqualValues(t, m.usageEnd["input_tokens"], r.Usage.Input)
	assert.EqualValues(t, m.usageEnd["output_tokens"], r.Usage.Output)
	assert.EqualValues(t, m.usageEnd["cache_read_input_tokens"], r.Usage.Cached)

	for _, path := range []string{"/v1/responses", "/v1/chat/completions"} {
		srv.ResetRequests()
		b := map[string]any{"model": "gpt-5.5", "stream": false, "input": "MARK-u2",
			"messages": []any{map[string]any{"role": "user", "content": "MARK-u2"}},
			"tools":    []any{map[string]any{"type": "function", "name": "exec_command", "function": map[string]any{"name": "bash"}}}}
		resp := post(t, srv, path, b)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		var out struct {
			Usage map[string]any `json:"usage"`
		}
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
		r := srv.Requests()[0]
		require.NotNil(t, r.Usage, path)
		in := out.Usage["input_tokens"]
		if in == nil {
			in = out.Usage["prompt_tokens"]
		}
		assert.EqualValues(t, in, r.Usage.Input+r.Usage.Cached, path)
		assert.Positive(t, r.Usage.Output, path)
	}

	srv.ResetRequests()
	resp := post(t, srv, "/v1/messages", body(false, msg("user", "[[outpost:scenario=rate_limit]]")))
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	assert.Nil(t, srv.Requests()[0].Usage, "a failure reports no usage")
}
