package gateway_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/gateway"
	"github.com/outpost-dev/outpost/outposterr"
)

// recorder is an upstream that records request headers and paths.
type recorder struct {
	url   string
	mu    sync.Mutex
	heads []http.Header
	paths []string
}

func newRecorder(t *testing.T) *recorder {
	t.Helper()
	r := &recorder{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.heads = append(r.heads, req.Header.Clone())
		r.paths = append(r.paths, req.URL.RequestURI())
		r.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"ok":true}`)
	}))
	t.Cleanup(srv.Close)
	r.url = srv.URL
	return r
}

func (r *recorder) last(t *testing.T) http.Header {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	require.NotEmpty(t, r.heads, "the upstream was reached")
	return r.heads[len(r.heads)-1]
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.heads)
}

// TestPlaceholderChecks: without the grant's placeholder nothing reaches
// the upstream, and the lease gets a 401 in its API's error shape.
func TestPlaceholderChecks(t *testing.T) {
	up := newRecorder(t)
	gw, base, logs := newGateway(t, up.url)
	g := grant(t, gw, up.url, gateway.SchemeAPIKey)
	other := grant(t, gw, up.url, gateway.SchemeAPIKey)
	revoked := grant(t, gw, up.url, gateway.SchemeAPIKey)
	revoked.Revoke()
	revoked.Revoke() // idempotent
	assert.True(t, revoked.Revoked())

	cases := map[string]http.Header{
		"none":             {},
		"real key":         {"X-Api-Key": {marker}},
		"unknown":          {"X-Api-Key": {gateway.PlaceholderPrefix + "AAAA"}},
		"revoked":          {"X-Api-Key": {revoked.Placeholder()}},
		"conflict":         {"X-Api-Key": {g.Placeholder()}, "Authorization": {"Bearer " + other.Placeholder()}},
		"basic auth":       {"Authorization": {"Basic " + g.Placeholder()}},
		"prefix of key":    {"X-Api-Key": {g.Placeholder()[:len(g.Placeholder())-1]}},
		"empty bearer":     {"Authorization": {"Bearer "}},
		"two distinct key": {"X-Api-Key": {g.Placeholder(), other.Placeholder()}},
	}
	for name, h := range cases {
		for _, path := range []string{"/v1/messages", "/v1/responses", "/v1/chat/completions"} {
			req, err := http.NewRequest(http.MethodPost, base+path, strings.NewReader(`{}`))
			require.NoError(t, err)
			for k, v := range h {
				req.Header[k] = v
			}
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, "%s %s", name, path)
			assert.Contains(t, string(body), "placeholder key", "%s: a clear body", name)
			var shape map[string]any
			require.NoError(t, json.Unmarshal(body, &shape))
			if path == "/v1/messages" {
				assert.Equal(t, "error", shape["type"], "Anthropic error shape")
			} else {
				assert.Contains(t, shape, "error", "OpenAI error shape")
			}
		}
	}
	assert.Zero(t, up.count(), "nothing reached the upstream")
	assert.Zero(t, g.Snapshot().Requests)
	assert.NotContains(t, logs.String(), marker)
	for _, gr := range []*gateway.Grant{g, other, revoked} {
		assert.NotContains(t, logs.String(), gr.Placeholder())
	}

	// Each grant's own key works, in any of the headers the CLIs use.
	for _, h := range []http.Header{
		{"X-Api-Key": {g.Placeholder()}},
		{"Authorization": {"Bearer " + g.Placeholder()}},
		{"Authorization": {"bearer " + g.Placeholder()}},
		{"Api-Key": {g.Placeholder()}},
	} {
		req, _ := http.NewRequest(http.MethodPost, base+"/v1/messages", strings.NewReader(`{}`))
		for k, v := range h {
			req.Header[k] = v
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusOK, resp.StatusCode, "%v", h)
	}
	assert.Equal(t, 4, g.Snapshot().Requests)
	assert.Zero(t, other.Snapshot().Requests, "usage is per grant")
}

// TestPlaceholdersAreRandom: placeholders are long, distinct, and carry
// nothing of the secret.
func TestPlaceholdersAreRandom(t *testing.T) {
	up := newRecorder(t)
	gw, _, _ := newGateway(t, up.url)
	seen := map[string]bool{}
	for range 50 {
		g := grant(t, gw, up.url, gateway.SchemeBearer)
		p := g.Placeholder()
		assert.True(t, strings.HasPrefix(p, gateway.PlaceholderPrefix))
		assert.GreaterOrEqual(t, len(p)-len(gateway.PlaceholderPrefix), 43, "256 bits")
		assert.False(t, seen[p])
		assert.NotContains(t, p, marker)
		seen[p] = true
		ep := g.Endpoint(gateway.LeaseURL(gateway.DefaultLeasePort))
		assert.Equal(t, p, ep.APIKey)
		assert.Empty(t, ep.OAuthToken)
	}
	o := grant(t, gw, up.url, gateway.SchemeClaudeOAuth)
	ep := o.Endpoint("http://127.0.0.1:1")
	assert.Equal(t, o.Placeholder(), ep.OAuthToken, "Claude's OAuth form keeps the CLI in subscription mode")
	assert.Empty(t, ep.APIKey)
}

// TestAllowlist: only allowlisted upstreams can be granted, and the lease
// cannot steer the host or reach paths outside the model APIs.
func TestAllowlist(t *testing.T) {
	up := newRecorder(t)
	for name, opts := range map[string]gateway.Options{
		"empty":          {},
		"plain http":     {Upstreams: []string{"http://api.example.com"}},
		"user info":      {Upstreams: []string{"https://user:pw@api.example.com"}},
		"query":          {Upstreams: []string{"https://api.example.com?x=1"}},
		"not a URL":      {Upstreams: []string{"api.example.com"}},
		"other scheme":   {Upstreams: []string{"ftp://api.example.com"}},
		"unclean prefix": {Upstreams: []string{"https://api.example.com/a/../b"}},
	} {
		_, err := gateway.New(opts)
		require.Error(t, err, name)
		assert.Equal(t, outposterr.Configuration, outposterr.ClassOf(err), name)
	}

	gw, base, _ := newGateway(t, up.url, "https://api.example.com/prefix")
	_, err := gw.Grant(gateway.GrantSpec{Upstream: "https://evil.example.com", Credential: gateway.Credential{Scheme: gateway.SchemeBearer, Secret: marker}})
	require.Error(t, err)
	assert.NotContains(t, err.Error(), marker)
	_, err = gw.Grant(gateway.GrantSpec{Upstream: up.url, Credential: gateway.Credential{Scheme: "cookie", Secret: marker}})
	require.Error(t, err)
	_, err = gw.Grant(gateway.GrantSpec{Upstream: up.url, Credential: gateway.Credential{Scheme: gateway.SchemeBearer}})
	require.Error(t, err)
	_, err = gw.Grant(gateway.GrantSpec{Upstream: up.url, Credential: gateway.Credential{Scheme: gateway.SchemeBearer, Secret: "a\nb"}})
	require.Error(t, err)
	_, err = gw.Grant(gateway.GrantSpec{Upstream: "https://api.example.com/prefix/", Credential: gateway.Credential{Scheme: gateway.SchemeBearer, Secret: marker}})
	require.NoError(t, err, "a trailing slash names the same upstream")

	g := grant(t, gw, up.url, gateway.SchemeBearer)
	for _, target := range []string{
		"/v1/files",
		"/v1/messages/../files",
		"/v1/./messages",
		"//v1/messages",
		"/v1/messages/",
		"/v1%2Fmessages",
		"/v1/models/a%2F..%2F..%2Fadmin",
		"/v1/organizations/usage",
		"http://evil.example.com/v1/messages",
		"/admin",
	} {
		resp := rawRequest(t, base, "POST", target, g.Placeholder())
		assert.Contains(t, []int{http.StatusNotFound, http.StatusBadRequest}, resp.StatusCode, target)
	}
	assert.Zero(t, up.count(), "no stray path reached the upstream")
	resp := rawRequest(t, base, "DELETE", "/v1/messages", g.Placeholder())
	assert.Equal(t, http.StatusNotFound, resp.StatusCode, "methods are allowlisted too")
	resp = rawRequest(t, base, "GET", "/v1/models/claude-opus-5-5", g.Placeholder())
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, 1, up.count())
	up.mu.Lock()
	assert.Equal(t, "/v1/models/claude-opus-5-5", up.paths[0])
	up.mu.Unlock()
	s := g.Snapshot()
	for _, e := range s.Exchanges[:len(s.Exchanges)-1] {
		if e.Status == http.StatusNotFound {
			assert.Equal(t, gateway.RefusedRoute, e.Refusal)
			assert.Equal(t, gateway.ByGateway, e.Answered)
		}
	}

	// A WebSocket upgrade is refused, so Codex falls back to HTTP.
	req, _ := http.NewRequest(http.MethodPost, base+"/v1/responses", strings.NewReader("{}"))
	req.Header.Set("Authorization", "Bearer "+g.Placeholder())
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "websocket")
	r2, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	r2.Body.Close()
	assert.Equal(t, http.StatusUpgradeRequired, r2.StatusCode)
}

// rawRequest writes a request line verbatim (Go's client would clean it).
func rawRequest(t *testing.T, base, method, target, key string) *http.Response {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	require.NoError(t, err)
	defer c.Close()
	_, err = io.WriteString(c, method+" "+target+" HTTP/1.1\r\nHost: gw\r\nX-Api-Key: "+key+
		"\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}")
	require.NoError(t, err)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	require.NoError(t, err)
	_, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp
}

// TestUpstreamPrefix: an upstream with a path prefix gets the lease's path
// appended to it.
func TestUpstreamPrefix(t *testing.T) {
	up := newRecorder(t)
	gw, base, _ := newGateway(t, up.url+"/api/")
	g := grant(t, gw, up.url+"/api", gateway.SchemeBearer)
	resp := rawRequest(t, base, "POST", "/v1/chat/completions?x=1", g.Placeholder())
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	up.mu.Lock()
	defer up.mu.Unlock()
	assert.Equal(t, []string{"/api/v1/chat/completions?x=1"}, up.paths)
}

// TestUnixSocket: the gateway serves on a unix socket any uid can connect
// to, replaces a stale one, refuses a live one or another file, and
// removes it on Close.
func TestUnixSocket(t *testing.T) {
	up := newRecorder(t)
	dir := t.TempDir()
	sock := filepath.Join(dir, "gw.sock")

	// A stale socket (its listener gone without cleanup) is replaced.
	stale, err := net.Listen("unix", sock)
	require.NoError(t, err)
	stale.(*net.UnixListener).SetUnlinkOnClose(false)
	require.NoError(t, stale.Close())

	gw, err := gateway.New(gateway.Options{Upstreams: []string{up.url}})
	require.NoError(t, err)
	require.NoError(t, gw.ListenUnix(sock))
	fi, err := os.Stat(sock)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o666), fi.Mode().Perm())

	g, err := gw.Grant(gateway.GrantSpec{Upstream: up.url, Credential: gateway.Credential{Scheme: gateway.SchemeBearer, Secret: marker}})
	require.NoError(t, err)
	c, err := net.Dial("unix", sock)
	require.NoError(t, err)
	_, err = io.WriteString(c, "POST /v1/responses HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer "+g.Placeholder()+
		"\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}")
	require.NoError(t, err)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	require.NoError(t, err)
	resp.Body.Close()
	c.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "Bearer "+marker, up.last(t).Get("Authorization"))

	// A second gateway cannot take over a live socket, nor a regular file.
	gw2, err := gateway.New(gateway.Options{Upstreams: []string{up.url}})
	require.NoError(t, err)
	err = gw2.ListenUnix(sock)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "in use")
	file := filepath.Join(dir, "file")
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	require.Error(t, gw2.ListenUnix(file))
	require.NoError(t, gw2.Close())

	require.NoError(t, gw.Close())
	require.NoError(t, gw.Close(), "idempotent")
	_, err = os.Lstat(sock)
	assert.ErrorIs(t, err, os.ErrNotExist, "Close removes the socket")
	_, err = gw.Grant(gateway.GrantSpec{Upstream: up.url, Credential: gateway.Credential{Scheme: gateway.SchemeBearer, Secret: marker}})
	require.Error(t, err, "no grants after Close")
	assert.True(t, g.Revoked(), "Close revokes every grant")
}

// TestListenTCPLoopbackOnly: the TCP listener never binds a routable address.
func TestListenTCPLoopbackOnly(t *testing.T) {
	gw, err := gateway.New(gateway.Options{Upstreams: []string{"https://api.example.com"}})
	require.NoError(t, err)
	defer gw.Close()
	for _, addr := range []string{"0.0.0.0:0", ":0", "localhost:0", "10.0.0.1:0"} {
		_, err := gw.ListenTCP(addr)
		require.Error(t, err, addr)
	}
	u, err := gw.ListenTCP("127.0.0.1:0")
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(u, "http://127.0.0.1:"))
}
