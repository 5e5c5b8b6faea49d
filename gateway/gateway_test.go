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
)

// TestProxiesEveryAPI: for each wire API, streamed and not, ok and tool
// scenarios, the answer through the gateway is the answer of the direct
// path; the upstream saw the real key on every request and never the
// placeholder; the grant's usage equals the server's own token counts.
func TestProxiesEveryAPI(t *testing.T) {
	for _, a := range apis {
		for _, stream := range []bool{true, false} {
			for _, sc := range []outposttest.Scenario{outposttest.ScenarioOK, outposttest.ScenarioTool} {
				name := a.name + "/" + map[bool]string{true: "stream", false: "json"}[stream] + "/" + string(sc)
				t.Run(name, func(t *testing.T) {
					srv := newUpstream(t, outposttest.WithScenario(sc))
					gw, base, logs := newGateway(t, srv.URL())
					g := grant(t, gw, srv.URL(), gateway.SchemeBearer)
					prompt := "say MARK-" + a.name

					direct, directBody := send(t, srv.URL(), a, "sk-direct", prompt, stream)
					srv.ResetRequests()
					resp, body := send(t, base, a, g.Placeholder(), prompt, stream)

					require.Equal(t, direct.StatusCode, resp.StatusCode, "%s", body)
					assert.Equal(t, direct.Header.Get("Content-Type"), resp.Header.Get("Content-Type"))
					wantText, wantKinds := answer(t, a.api, directBody)
					gotText, gotKinds := answer(t, a.api, body)
					assert.Equal(t, wantText, gotText)
					assert.Equal(t, wantKinds, gotKinds, "same stream events")
					if sc == outposttest.ScenarioOK {
						assert.Contains(t, gotText, "MARK-"+a.name)
					}

					reqs := srv.Requests()
					require.Len(t, reqs, 1)
					assert.Equal(t, outposttest.KeyFingerprint(marker), reqs[0].KeyFingerprint, "the real key reached the upstream")
					assert.Equal(t, strings.SplitN(a.path, "?", 2)[0], reqs[0].Path)

					s := g.Snapshot()
					assert.Equal(t, 1, s.Requests)
					assert.Equal(t, []int{http.StatusOK}, s.Statuses)
					assert.Equal(t, []string{reqs[0].Model}, s.Models)
					want := serverUsage(reqs)
					want.Complete = true
					assert.Equal(t, want, s.Usage, "gateway usage equals the server's own counts")
					assert.Positive(t, s.Usage.Output)
					ex := s.Exchanges[0]
					assert.Equal(t, stream, ex.Stream)
					assert.Equal(t, a.api, ex.API)
					assert.Equal(t, gateway.ByUpstream, ex.Answered)
					_, failed := s.Evidence()
					assert.False(t, failed)

					snap, _ := json.Marshal(s)
					for where, text := range map[string]string{"logs": logs.String(), "snapshot": string(snap)} {
						assert.NotContains(t, text, marker, where)
						assert.NotContains(t, text, g.Placeholder(), where)
					}
				})
			}
		}
	}
}

// TestToolTurnSumsUsage: a two-request turn (tool call, then the answer
// after the tool result) sums both responses, as the server counted them.
func TestToolTurnSumsUsage(t *testing.T) {
	srv := newUpstream(t, outposttest.WithScenario(outposttest.ScenarioTool))
	gw, base, _ := newGateway(t, srv.URL())
	g := grant(t, gw, srv.URL(), gateway.SchemeAPIKey)
	a := apis[0]
	_, _ = send(t, base, a, g.Placeholder(), "write MARK-t", true)
	// The follow-up carries the tool result.
	b := a.body("write MARK-t", true)
	b["messages"] = append(b["messages"].([]any),
		map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": map[string]any{}}}},
		map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": "toolu_1", "content": "done"}}})
	withBody := a
	withBody.body = func(string, bool) map[string]any { return b }
	resp, body := send(t, base, withBody, g.Placeholder(), "", true)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	text, _ := answer(t, a.api, body)
	assert.Contains(t, text, "outpost tool done")

	s := g.Snapshot()
	assert.Equal(t, 2, s.Requests)
	want := serverUsage(srv.Requests())
	want.Complete = true
	assert.Equal(t, want, s.Usage)
	assert.Greater(t, s.Usage.Output, s.Exchanges[0].Usage.Output)
}

// TestSchemes: each credential scheme reaches the upstream in its own
// header, and no credential header of the lease survives.
func TestSchemes(t *testing.T) {
	cases := []struct {
		scheme gateway.Scheme
		check  func(t *testing.T, h http.Header)
	}{
		{gateway.SchemeAPIKey, func(t *testing.T, h http.Header) {
			assert.Equal(t, marker, h.Get("X-Api-Key"))
			assert.Empty(t, h.Get("Authorization"))
		}},
		{gateway.SchemeBearer, func(t *testing.T, h http.Header) {
			assert.Equal(t, "Bearer "+marker, h.Get("Authorization"))
			assert.Empty(t, h.Get("X-Api-Key"))
			assert.Empty(t, h.Get("Api-Key"))
		}},
		{gateway.SchemeClaudeOAuth, func(t *testing.T, h http.Header) {
			assert.Equal(t, "Bearer "+marker, h.Get("Authorization"))
			assert.Empty(t, h.Get("X-Api-Key"))
			assert.Contains(t, strings.Join(h.Values("Anthropic-Beta"), ","), gateway.ClaudeOAuthBeta)
			assert.Contains(t, strings.Join(h.Values("Anthropic-Beta"), ","), "some-beta", "the lease's betas stay")
		}},
	}
	for _, c := range cases {
		t.Run(string(c.scheme), func(t *testing.T) {
			up := newRecorder(t)
			gw, base, _ := newGateway(t, up.url)
			g := grant(t, gw, up.url, c.scheme)
			req, err := http.NewRequest(http.MethodPost, base+"/v1/messages", strings.NewReader(`{}`))
			require.NoError(t, err)
			// The lease presents its placeholder in two agreeing headers,
			// plus a cookie and an upgrade-free set of its own headers.
			req.Header.Set("X-Api-Key", g.Placeholder())
			req.Header.Set("Authorization", "Bearer "+g.Placeholder())
			req.Header.Set("Cookie", "session=lease")
			req.Header.Set("Anthropic-Beta", "some-beta")
			req.Header.Set("X-Forwarded-For", "10.1.2.3")
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			resp.Body.Close()
			require.Equal(t, http.StatusOK, resp.StatusCode)
			h := up.last(t)
			c.check(t, h)
			assert.Empty(t, h.Get("Cookie"))
			assert.Empty(t, h.Get("X-Forwarded-For"), "no forwarding headers")
			assert.Equal(t, "identity", h.Get("Accept-Encoding"))
			for _, vs := range h {
				for _, v := range vs {
					assert.NotContains(t, v, g.Placeholder(), "the placeholder never goes upstream")
				}
			}
		})
	}
}
