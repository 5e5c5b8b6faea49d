package gateway_test

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/gateway"
	"github.com/outpost-dev/outpost/outposttest"
)

// TestEvidence: every failure scenario of the scripted server, on every
// API, yields the evidence documented for it, with the status history.
func TestEvidence(t *testing.T) {
	reset := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	q, rl, auth, over, unav, srvErr, req := gateway.EvidenceQuota, gateway.EvidenceRateLimit, gateway.EvidenceAuth,
		gateway.EvidenceOverloaded, gateway.EvidenceUnavailable, gateway.EvidenceServerError, gateway.EvidenceRequest
	want := map[string]map[outposttest.Scenario]gateway.EvidenceKind{
		"anthropic": {"rate_limit": rl, "quota": q, "spend_limit": req, "credits": req, "overloaded": over,
			"unavailable": unav, "server_error": srvErr, "unauthorized": auth},
		"responses": {"rate_limit": rl, "quota": q, "spend_limit": q, "credits": q, "overloaded": over,
			"unavailable": unav, "server_error": srvErr, "unauthorized": auth},
		// Copilot's service words its quota as a rate limit (429
		// rate_limited): only the CLI's own text tells them apart.
		"chat": {"rate_limit": rl, "quota": rl, "spend_limit": q, "credits": q, "overloaded": over,
			"unavailable": unav, "server_error": srvErr, "unauthorized": auth},
	}
	for _, a := range apis {
		for sc, kind := range want[a.name] {
			t.Run(a.name+"/"+string(sc), func(t *testing.T) {
				srv := newUpstream(t, outposttest.WithScenario(sc), outposttest.WithQuotaReset(reset))
				gw, base, _ := newGateway(t, srv.URL())
				g := grant(t, gw, srv.URL(), gateway.SchemeBearer)
				resp, body := send(t, base, a, g.Placeholder(), "MARK-e", true)
				direct, directBody := send(t, srv.URL(), a, "k", "MARK-e", true)
				assert.Equal(t, direct.StatusCode, resp.StatusCode)
				assert.JSONEq(t, stripIDs(t, directBody), stripIDs(t, body), "the error body passes through")

				s := g.Snapshot()
				assert.Equal(t, []int{resp.StatusCode}, s.Statuses)
				ev, ok := s.Evidence()
				require.True(t, ok)
				assert.Equal(t, kind, ev.Kind)
				assert.Equal(t, resp.StatusCode, ev.Status)
				require.NotNil(t, s.Exchanges[0].Error)
				if sc == outposttest.ScenarioQuota && kind == q {
					assert.True(t, reset.Equal(ev.ResetAt), "reset %s", ev.ResetAt)
				}
				if sc == outposttest.ScenarioRateLimit {
					assert.Equal(t, time.Second, s.Exchanges[0].Error.RetryAfter)
				}
				if kind == over || kind == unav {
					assert.NotEmpty(t, ev.Reason)
				}
				assert.False(t, s.Usage.Complete && s.Usage.Tokens() > 0)
			})
		}
	}
}

// stripIDs removes the random request ids of an error body.
func stripIDs(t *testing.T, b []byte) string {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m), "%s", b)
	delete(m, "request_id")
	out, _ := json.Marshal(m)
	return string(out)
}

// TestEvidenceAfterRecovery: failures the CLI retried past are history,
// not evidence; the status history keeps them in order.
func TestEvidenceAfterRecovery(t *testing.T) {
	srv := newUpstream(t, outposttest.WithSequence(outposttest.ScenarioOverloaded, outposttest.ScenarioRateLimit))
	gw, base, _ := newGateway(t, srv.URL())
	g := grant(t, gw, srv.URL(), gateway.SchemeAPIKey)
	for range 3 {
		send(t, base, apis[0], g.Placeholder(), "MARK-r", true)
	}
	s := g.Snapshot()
	assert.Equal(t, []int{529, 429, 200}, s.Statuses)
	_, ok := s.Evidence()
	assert.False(t, ok, "the last request succeeded")
	want := serverUsage(srv.Requests())
	want.Complete = true
	assert.Equal(t, want, s.Usage, "failures carry no usage")
}

// TestUnreachableUpstream: a dead upstream is a 502 the gateway answers,
// evidence "unavailable".
func TestUnreachableUpstream(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	dead := "http://" + ln.Addr().String()
	require.NoError(t, ln.Close())
	gw, base, _ := newGateway(t, dead)
	g := grant(t, gw, dead, gateway.SchemeBearer)
	resp, body := send(t, base, apis[2], g.Placeholder(), "MARK-d", true)
	assert.Equal(t, http.StatusBadGateway, resp.StatusCode)
	assert.Contains(t, string(body), "unreachable")
	s := g.Snapshot()
	assert.Equal(t, gateway.Unreachable, s.Exchanges[0].Refusal)
	ev, ok := s.Evidence()
	require.True(t, ok)
	assert.Equal(t, gateway.EvidenceUnavailable, ev.Kind)
	assert.Equal(t, "upstream unreachable", ev.Reason)
}

// TestErrorTextNeverHoldsTheSecret: an upstream that echoes the credential
// in its error body and headers (hostile or careless) does not put it into
// the snapshot.
func TestErrorTextNeverHoldsTheSecret(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Retry-After", "junk "+marker)
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = io.WriteString(w, `{"error":{"message":"bad key `+r.Header.Get("X-Api-Key")+`","type":"`+marker+`","code":"`+marker+`"}}`)
	}))
	defer up.Close()
	gw, base, logs := newGateway(t, up.URL)
	g := grant(t, gw, up.URL, gateway.SchemeAPIKey)
	send(t, base, apis[0], g.Placeholder(), "MARK-s", false)
	s := g.Snapshot()
	b, _ := json.Marshal(s)
	assert.NotContains(t, string(b), marker)
	assert.Contains(t, s.Exchanges[0].Error.Message, "bad key [REDACTED]")
	ev, _ := s.Evidence()
	assert.NotContains(t, ev.Message, marker)
	assert.NotContains(t, logs.String(), marker)
}
