package gateway

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"sync"
	"time"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/usage"
)

// Scheme says how the real credential is presented to the upstream.
type Scheme string

// Credential schemes.
const (
	// SchemeAPIKey sends "x-api-key: <secret>" (an Anthropic API key:
	// ANTHROPIC_API_KEY, or Copilot BYOK with provider type anthropic).
	SchemeAPIKey Scheme = "x-api-key"
	// SchemeBearer sends "Authorization: Bearer <secret>" (an OpenAI key for
	// Codex or Copilot BYOK, ANTHROPIC_AUTH_TOKEN, a gateway token).
	SchemeBearer Scheme = "bearer"
	// SchemeClaudeOAuth sends "Authorization: Bearer <secret>" and makes sure
	// the anthropic-beta header carries the OAuth beta, as Claude Code does
	// with CLAUDE_CODE_OAUTH_TOKEN (a `claude setup-token` token). The lease
	// gets the placeholder as its OAuth token, so the CLI stays in
	// subscription mode (rate-limit events, subscription quota wording).
	SchemeClaudeOAuth Scheme = "claude-oauth"
)

// ClaudeOAuthBeta is the anthropic-beta value an OAuth token needs.
const ClaudeOAuthBeta = "oauth-2025-04-20"

// Credential is the real secret a grant swaps in, and how it is sent.
type Credential struct {
	Scheme Scheme
	// Secret is the key or token. It never leaves the gateway except in
	// the header of a request to the grant's upstream.
	Secret string
}

func (c Credential) valid() error {
	switch c.Scheme {
	case SchemeAPIKey, SchemeBearer, SchemeClaudeOAuth:
	default:
		return outposterr.New(outposterr.Configuration, "gateway grant: unknown credential scheme %q", c.Scheme)
	}
	if c.Secret == "" {
		return outposterr.New(outposterr.Configuration, "gateway grant: empty credential")
	}
	for i := 0; i < len(c.Secret); i++ {
		if b := c.Secret[i]; b < 0x20 || b == 0x7f {
			return outposterr.New(outposterr.Configuration, "gateway grant: credential contains control characters")
		}
	}
	return nil
}

// PriceFunc prices usage of a model in US dollars; ok is false when the
// model's price is unknown.
type PriceFunc func(model string, u usage.Usage) (usd float64, ok bool)

// GrantSpec describes one grant: which lease (or turn) may use which real
// credential against which upstream.
type GrantSpec struct {
	// Label names the grant in logs and snapshots (a lease or turn id). It
	// is not a secret and not used for authentication.
	Label string
	// Upstream is the base URL requests are forwarded to; it must be one of
	// Options.Upstreams. The lease's request paths (/v1/messages, ...) are
	// appended to it.
	Upstream string
	// Credential is the real secret and its scheme.
	Credential Credential
	// Price, when set, prices each response's usage (Snapshot.CostUSD).
	Price PriceFunc
	// Budget, when set, is a cost cap this grant draws on (needs Price).
	// Several grants may share one Budget (a per-batch cap).
	Budget *Budget
}

// Grant is one lease's permission to use a real credential through the
// gateway. Its placeholder is the only key the lease ever sees. A Grant is
// safe for concurrent use.
type Grant struct {
	gw          *Gateway
	label       string
	placeholder string
	hash        [sha256.Size]byte
	upstream    upstream
	cred        Credential
	price       PriceFunc
	budget      *Budget

	// ctx is cancelled by Revoke: in-flight requests end with it.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	refused    chan struct{}
	refuseOnce sync.Once

	mu        sync.Mutex
	revoked   bool
	exchanges []Exchange
	dropped   int // requests refused past Options.MaxRequestsPerGrant, not recorded
}

// newPlaceholder returns a random key that means nothing outside this
// gateway: 32 random bytes, URL-safe base64, with a recognizable prefix.
func newPlaceholder() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return PlaceholderPrefix + base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// PlaceholderPrefix starts every placeholder key, so one is recognizable in
// a lease's environment (it is useless anywhere but this gateway).
const PlaceholderPrefix = "outpost-placeholder-"

// Label returns the grant's label.
func (g *Grant) Label() string { return g.label }

// Placeholder returns the per-grant key the lease presents instead of the
// real credential, in whichever header its CLI uses (x-api-key,
// Authorization: Bearer, api-key).
func (g *Grant) Placeholder() string { return g.placeholder }

// Endpoint returns the adapters.Endpoint that points a CLI in the lease at
// the gateway: baseURL is how the lease reaches the gateway (see
// [LeaseURL]), the placeholder goes where the CLI expects its credential —
// the OAuth token for [SchemeClaudeOAuth] (Claude Code then stays in
// subscription mode), the API key otherwise.
func (g *Grant) Endpoint(baseURL string) *adapters.Endpoint {
	if g.cred.Scheme == SchemeClaudeOAuth {
		return &adapters.Endpoint{BaseURL: baseURL, OAuthToken: g.placeholder}
	}
	return &adapters.Endpoint{BaseURL: baseURL, APIKey: g.placeholder}
}

// revokeWait bounds how long Revoke waits for cancelled requests to finish
// recording.
const revokeWait = 5 * time.Second

// Revoke makes the placeholder worthless: later requests get 401, requests
// in flight are cancelled (their usage so far is still recorded). It waits
// briefly for those requests to finish recording, so a Snapshot taken after
// Revoke is final. Revoke is idempotent.
func (g *Grant) Revoke() {
	g.mu.Lock()
	already := g.revoked
	g.revoked = true
	g.mu.Unlock()
	if already {
		return
	}
	g.gw.forget(g)
	g.cancel()
	done := make(chan struct{})
	go func() { g.wg.Wait(); close(done) }()
	t := time.NewTimer(revokeWait)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		g.gw.log.Warn("gateway: requests still running after revoke", "grant", g.label)
	}
}

// Refused is closed when the grant's budget first refuses a request: the
// moment a harness stops the turn, since the agent wanted more than its
// budget (a response that merely crosses the cap is no reason: the turn
// may end with it).
func (g *Grant) Refused() <-chan struct{} { return g.refused }

func (g *Grant) refuse() { g.refuseOnce.Do(func() { close(g.refused) }) }

// Revoked reports whether Revoke was called.
func (g *Grant) Revoked() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.revoked
}

// begin registers a request; it fails once the grant is revoked.
func (g *Grant) begin() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.revoked {
		return false
	}
	g.wg.Add(1)
	return true
}

// priceOf prices u of model with the grant's PriceFunc: (0, false) when u
// was not measured, there is no PriceFunc or it knows no price.
func (g *Grant) priceOf(model string, u usage.Usage, measured bool) (float64, bool) {
	if !measured || g.price == nil {
		return 0, false
	}
	cost, ok := g.price(model, u)
	if !ok {
		return 0, false
	}
	return cost, true
}

// record appends a new exchange and returns its index: -1 past
// Options.MaxRequestsPerGrant, where the request is only counted.
func (g *Grant) record(e Exchange) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.exchanges) >= g.gw.opts.MaxRequestsPerGrant {
		g.dropped++
		return -1
	}
	e.Seq = len(g.exchanges)
	g.exchanges = append(g.exchanges, e)
	return e.Seq
}

// update changes exchange i under the lock.
func (g *Grant) update(i int, f func(*Exchange)) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if i >= 0 && i < len(g.exchanges) {
		f(&g.exchanges[i])
	}
}

// Snapshot returns what the gateway measured for this grant so far. It is
// safe to call while requests run; after Revoke it is final.
func (g *Grant) Snapshot() Snapshot {
	g.mu.Lock()
	ex := make([]Exchange, len(g.exchanges))
	copy(ex, g.exchanges)
	dropped := g.dropped
	g.mu.Unlock()
	s := newSnapshot(g.label, ex)
	s.Requests += dropped
	s.Dropped = dropped
	return s
}
