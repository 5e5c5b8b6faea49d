package gateway

import (
	"cmp"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/usage"
)

// Defaults of [Options].
const (
	// DefaultMaxRequestBytes bounds a request body from a lease.
	DefaultMaxRequestBytes = 64 << 20
	// DefaultMaxRequestsPerGrant bounds the requests one grant records.
	DefaultMaxRequestsPerGrant = 20_000
	// DefaultLeasePort is the port a lease's forwarder listens on, inside
	// the lease's own network namespace (see [LeaseURL]).
	DefaultLeasePort = 47321
)

// Options configure a [Gateway]. The zero value of each field is described
// on it.
type Options struct {
	// Upstreams is the allowlist of upstream base URLs grants may name
	// ("https://api.anthropic.com", "https://api.openai.com", or a loopback
	// test server). https is required except for loopback hosts; no user
	// info, query or fragment. A grant naming anything else is refused.
	Upstreams []string
	// Transport sends requests upstream. Nil: a transport that uses no
	// proxy from the environment, dials with a 30 s timeout and lets the
	// CLI's own timeouts bound slow answers.
	Transport http.RoundTripper
	// MaxRequestBytes bounds a request body (0: DefaultMaxRequestBytes).
	MaxRequestBytes int64
	// MaxRequestsPerGrant bounds the requests a grant records (0:
	// DefaultMaxRequestsPerGrant). A request past it is refused (400, not
	// forwarded) and only counted, so a lease can grow neither the
	// gateway's memory nor a grant's snapshot without bound.
	MaxRequestsPerGrant int
	// Logger receives debug records of each exchange (never a credential
	// or placeholder). Nil: discarded.
	Logger *slog.Logger
	// Now is the clock (nil: time.Now).
	Now func() time.Time
}

// Gateway is a credential-injecting reverse proxy for model APIs. Create it
// with [New], serve it on listeners ([Gateway.ListenUnix],
// [Gateway.ListenTCP], [Gateway.Serve]), hand out [Grant]s, and [Gateway.Close]
// it. All methods are safe for concurrent use.
type Gateway struct {
	opts      Options
	log       *slog.Logger
	now       func() time.Time
	upstreams map[string]upstream
	proxy     *httputil.ReverseProxy
	srv       *http.Server

	mu        sync.Mutex
	grants    map[[sha256.Size]byte]*Grant
	listeners []net.Listener
	sockets   []string
	closed    bool
	serving   sync.WaitGroup
}

// upstream is a validated base URL.
type upstream struct {
	raw string
	u   *url.URL
}

// New validates opts and returns a gateway that is not listening yet.
func New(opts Options) (*Gateway, error) {
	g := &Gateway{opts: opts, log: opts.Logger, now: opts.Now, upstreams: map[string]upstream{},
		grants: map[[sha256.Size]byte]*Grant{}}
	if g.log == nil {
		g.log = slog.New(slog.DiscardHandler)
	}
	if g.now == nil {
		g.now = time.Now
	}
	if g.opts.MaxRequestBytes <= 0 {
		g.opts.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if g.opts.MaxRequestsPerGrant <= 0 {
		g.opts.MaxRequestsPerGrant = DefaultMaxRequestsPerGrant
	}
	if len(opts.Upstreams) == 0 {
		return nil, outposterr.New(outposterr.Configuration, "gateway: no upstreams allowed (Options.Upstreams is empty)")
	}
	for _, raw := range opts.Upstreams {
		up, err := parseUpstream(raw)
		if err != nil {
			return nil, err
		}
		g.upstreams[up.raw] = up
	}
	transport := opts.Transport
	if transport == nil {
		transport = defaultTransport()
	}
	g.proxy = &httputil.ReverseProxy{
		Rewrite:        g.rewrite,
		Transport:      redactTransport{transport},
		FlushInterval:  -1, // flush every write: streams pass through unbuffered
		ModifyResponse: g.modifyResponse,
		ErrorHandler:   g.proxyError,
		ErrorLog:       slog.NewLogLogger(g.log.Handler(), slog.LevelDebug),
		BufferPool:     copyBuffers{},
	}
	g.srv = &http.Server{
		Handler:           g,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    1 << 20,
		ErrorLog:          slog.NewLogLogger(g.log.Handler(), slog.LevelDebug),
	}
	return g, nil
}

func defaultTransport() *http.Transport {
	return &http.Transport{
		Proxy:                 nil, // never a proxy from the environment
		DialContext:           (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          64,
		MaxIdleConnsPerHost:   32,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
		// Large reads let a burst of events that arrived together pass in
		// one write instead of one per event.
		ReadBufferSize: 64 << 10,
	}
}

// copyBuffers recycles the proxy's response copy buffers.
type copyBuffers struct{}

var copyPool = sync.Pool{New: func() any { b := make([]byte, 64<<10); return &b }}

func (copyBuffers) Get() []byte  { return *(copyPool.Get().(*[]byte)) }
func (copyBuffers) Put(b []byte) { copyPool.Put(&b) }

// parseUpstream validates one allowlist entry.
func parseUpstream(raw string) (upstream, error) {
	bad := func(why string) (upstream, error) {
		return upstream{}, outposterr.New(outposterr.Configuration, "gateway: upstream %q %s", raw, why)
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || u.Opaque != "" {
		return bad("is not an absolute URL")
	}
	switch {
	case u.User != nil:
		return bad("must not carry user info")
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		return bad("must not have a query or fragment")
	case u.Scheme == "https":
	case u.Scheme == "http" && loopbackHost(u.Hostname()):
	case u.Scheme == "http":
		return bad("must use https (plain http is allowed for loopback hosts only)")
	default:
		return bad("must be an http(s) URL")
	}
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawPath = ""
	if u.Path != "" && !cleanPath(u.Path) {
		return bad("has an unclean path")
	}
	return upstream{raw: u.String(), u: u}, nil
}

func loopbackHost(h string) bool {
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// Grant registers a grant and returns it. The placeholder it carries is
// random and new; the real credential stays in the gateway.
func (g *Gateway) Grant(spec GrantSpec) (*Grant, error) {
	up, err := parseUpstream(spec.Upstream)
	if err != nil {
		return nil, err
	}
	allowed, ok := g.upstreams[up.raw]
	if !ok {
		return nil, outposterr.New(outposterr.Configuration, "gateway grant: upstream %q is not on the allowlist", spec.Upstream)
	}
	if err := spec.Credential.valid(); err != nil {
		return nil, err
	}
	if spec.Budget != nil && spec.Price == nil && spec.Budget.CostCapped() {
		return nil, outposterr.New(outposterr.Configuration, "gateway grant: a budget needs a price function")
	}
	ph, err := newPlaceholder()
	if err != nil {
		return nil, outposterr.Wrap(outposterr.Configuration, err, "gateway grant: make placeholder")
	}
	ctx, cancel := context.WithCancel(context.Background())
	gr := &Grant{gw: g, label: spec.Label, placeholder: ph, hash: sha256.Sum256([]byte(ph)),
		upstream: allowed, cred: spec.Credential, price: spec.Price, budget: spec.Budget, ctx: ctx, cancel: cancel,
		refused: make(chan struct{})}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		cancel()
		return nil, outposterr.New(outposterr.Configuration, "gateway grant: gateway closed")
	}
	g.grants[gr.hash] = gr
	g.log.Debug("gateway: grant", "grant", gr.label, "upstream", allowed.raw, "scheme", spec.Credential.Scheme)
	return gr, nil
}

func (g *Gateway) forget(gr *Grant) {
	g.mu.Lock()
	if g.grants[gr.hash] == gr {
		delete(g.grants, gr.hash)
	}
	g.mu.Unlock()
	g.log.Debug("gateway: revoke", "grant", gr.label)
}

// lookup finds the grant of a presented placeholder. The table is keyed by
// the placeholder's SHA-256, so the lookup's timing says nothing about how
// much of a guess was right.
func (g *Gateway) lookup(key string) *Grant {
	if !strings.HasPrefix(key, PlaceholderPrefix) {
		return nil
	}
	h := sha256.Sum256([]byte(key))
	g.mu.Lock()
	gr := g.grants[h]
	g.mu.Unlock()
	if gr == nil || subtle.ConstantTimeCompare([]byte(gr.placeholder), []byte(key)) != 1 {
		return nil
	}
	return gr
}

// ListenUnix serves the gateway on a unix socket at path, made connectable
// by any user (mode 0666) so a lease running as another uid can use it
// through a bind mount. Keep path in a directory only its owner can enter
// (0700): a bind mount reaches the socket without entering the directory,
// other host users cannot. A stale socket left by a dead process is
// replaced; a live one or any other file is an error. Close removes it.
func (g *Gateway) ListenUnix(path string) error {
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode().Type() != fs.ModeSocket {
			return outposterr.New(outposterr.Configuration, "gateway: %s exists and is not a socket", path)
		}
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			c.Close()
			return outposterr.New(outposterr.Configuration, "gateway: socket %s is in use", path)
		}
		if err := os.Remove(path); err != nil {
			return outposterr.Wrap(outposterr.Configuration, err, "gateway: remove stale socket")
		}
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return outposterr.Wrap(outposterr.Configuration, err, "gateway: listen on %s", path)
	}
	if err := os.Chmod(path, 0o666); err != nil {
		ln.Close()
		return outposterr.Wrap(outposterr.Configuration, err, "gateway: chmod socket")
	}
	if err := g.start(ln, path); err != nil {
		return err
	}
	return nil
}

// ListenTCP serves the gateway on addr, which must be a loopback address
// ("127.0.0.1:0" picks a free port), and returns its base URL
// ("http://127.0.0.1:PORT"). Use it for host leases and for a Kubernetes
// sidecar, whose loopback the pod's containers share.
func (g *Gateway) ListenTCP(addr string) (string, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return "", outposterr.Wrap(outposterr.Configuration, err, "gateway: listen address %q", addr)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return "", outposterr.New(outposterr.Configuration, "gateway: listen address %q is not a loopback IP", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", outposterr.Wrap(outposterr.Configuration, err, "gateway: listen on %s", addr)
	}
	if err := g.start(ln, ""); err != nil {
		return "", err
	}
	return "http://" + ln.Addr().String(), nil
}

// Serve serves the gateway on ln until [Gateway.Close], for listeners the
// caller makes itself. It returns nil after Close.
func (g *Gateway) Serve(ln net.Listener) error {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		ln.Close()
		return outposterr.New(outposterr.Configuration, "gateway: closed")
	}
	g.listeners = append(g.listeners, ln)
	g.mu.Unlock()
	if err := g.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("gateway: serve: %w", err)
	}
	return nil
}

func (g *Gateway) start(ln net.Listener, socket string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		ln.Close()
		return outposterr.New(outposterr.Configuration, "gateway: closed")
	}
	g.listeners = append(g.listeners, ln)
	if socket != "" {
		g.sockets = append(g.sockets, socket)
	}
	g.serving.Add(1)
	go func() {
		defer g.serving.Done()
		if err := g.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			g.log.Warn("gateway: serve", "addr", ln.Addr().String(), "err", err)
		}
	}()
	return nil
}

// Handler returns the gateway as an http.Handler, for mounting in another
// server.
func (g *Gateway) Handler() http.Handler { return g }

// Close stops every listener, closes connections (ending streams in
// flight), revokes every grant and removes the unix sockets it created. It
// is idempotent.
func (g *Gateway) Close() error {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return nil
	}
	g.closed = true
	grants := slices.Collect(maps.Values(g.grants))
	sockets := g.sockets
	g.mu.Unlock()
	err := g.srv.Close()
	for _, gr := range grants {
		gr.Revoke()
	}
	g.serving.Wait()
	for _, s := range sockets {
		if rerr := os.Remove(s); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
			err = errors.Join(err, rerr)
		}
	}
	if err != nil {
		return fmt.Errorf("gateway: close: %w", err)
	}
	return nil
}

// LeaseURL is the base URL a CLI inside a lease uses to reach the gateway
// through the lease's forwarder on its own loopback.
func LeaseURL(port int) string { return "http://127.0.0.1:" + strconv.Itoa(port) }

// credentialHeaders are the headers a lease may present its placeholder
// in; all of them are removed before a request goes upstream.
var credentialHeaders = []string{"Authorization", "X-Api-Key", "Api-Key", "Proxy-Authorization", "Cookie"}

// presented returns the placeholder a request carries. Several credential
// headers must agree; ok is false for none or a conflict.
func presented(h http.Header) (key string, ok bool) {
	var vals []string
	for _, name := range []string{"X-Api-Key", "Api-Key"} {
		vals = append(vals, h.Values(name)...)
	}
	for _, v := range h.Values("Authorization") {
		scheme, tok, found := strings.Cut(v, " ")
		if !found || !strings.EqualFold(scheme, "Bearer") {
			return "", false
		}
		vals = append(vals, strings.TrimSpace(tok))
	}
	for _, v := range vals {
		if v == "" || (key != "" && v != key) {
			return "", false
		}
		key = v
	}
	return key, key != ""
}

// ctxKey carries a request's state from ServeHTTP to the proxy hooks.
type ctxKey struct{}

// call is one request in flight.
type call struct {
	grant   *Grant
	route   route
	seq     int
	started time.Time
	// req meters the request body sent upstream.
	req *requestMeter
}

// ServeHTTP authenticates the placeholder, checks the route and the
// budget, and forwards the request upstream with the real credential.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	started := g.now()
	rt, routed := match(r.Method, r.URL)
	api := rt.api
	if !routed {
		api = guessAPI(r.URL.Path)
	}
	key, ok := presented(r.Header)
	var gr *Grant
	if ok {
		gr = g.lookup(key)
	}
	if gr == nil || !gr.begin() {
		g.log.Debug("gateway: unknown placeholder", "method", r.Method, "path", bound(r.URL.Path, 128))
		writeError(w, api, http.StatusUnauthorized, "authentication_error",
			"outpost gateway: the request does not carry a valid placeholder key; this endpoint accepts only the per-lease key Outpost issued, and it stops working when the lease ends")
		return
	}
	defer gr.wg.Done()
	ex := Exchange{Started: started, Method: r.Method, Path: bound(r.URL.Path, 256), API: api, modelCall: rt.model}
	refuse := func(status int, refusal Refusal, kind, msg string) {
		ex.Status, ex.Answered, ex.Refusal, ex.done = status, ByGateway, refusal, true
		ex.Error = &WireError{Type: kind, Message: msg}
		ex.Duration = g.now().Sub(started)
		gr.record(ex)
		g.log.Debug("gateway: refused", "grant", gr.label, "method", r.Method, "path", ex.Path, "status", status, "why", refusal)
		writeError(w, api, status, kind, msg)
	}
	switch {
	case !routed:
		refuse(http.StatusNotFound, RefusedRoute, "not_found_error",
			"outpost gateway: "+r.Method+" "+ex.Path+" is not a model API endpoint this gateway forwards")
		return
	case r.Header.Get("Upgrade") != "":
		refuse(http.StatusUpgradeRequired, RefusedUpgrade, "invalid_request_error",
			"outpost gateway: protocol upgrades (WebSocket) are not forwarded; use HTTP streaming")
		return
	}
	if gr.budget != nil {
		if over, msg := gr.budget.Exceeded(); over {
			gr.refuse()
			refuse(BudgetStatus, RefusedBudget, "invalid_request_error", msg)
			return
		}
	}
	seq := gr.record(ex)
	if seq < 0 {
		g.log.Debug("gateway: refused", "grant", gr.label, "method", r.Method, "path", ex.Path, "why", "too many requests")
		writeError(w, api, http.StatusBadRequest, "invalid_request_error",
			fmt.Sprintf("outpost gateway: this lease made %d requests, the most one lease may make", g.opts.MaxRequestsPerGrant))
		return
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	stop := context.AfterFunc(gr.ctx, cancel)
	defer stop()
	c := &call{grant: gr, route: rt, seq: seq, started: started,
		req: &requestMeter{rc: http.MaxBytesReader(w, r.Body, g.opts.MaxRequestBytes)}}
	r = r.WithContext(context.WithValue(ctx, ctxKey{}, c))
	r.Body = c.req
	// A response that never reached the meter or the error handler is
	// closed here, also when a broken stream aborts the handler.
	defer gr.update(seq, func(e *Exchange) {
		if !e.done {
			e.done = true
			e.Duration = g.now().Sub(started)
			if e.Refusal == "" && e.Status == 0 {
				e.Refusal = ClientGone
			}
		}
	})
	g.proxy.ServeHTTP(w, r)
}

// rewrite builds the upstream request: the grant's upstream and the
// validated path, the lease's query, no credential of the lease's, the
// real credential, and no compression (so usage can be read on the way).
func (g *Gateway) rewrite(pr *httputil.ProxyRequest) {
	c := pr.In.Context().Value(ctxKey{}).(*call)
	up := c.grant.upstream.u
	out := pr.Out
	out.URL = &url.URL{Scheme: up.Scheme, Host: up.Host, Path: up.Path + pr.In.URL.Path, RawQuery: pr.In.URL.RawQuery}
	out.Host = ""
	for _, h := range credentialHeaders {
		out.Header.Del(h)
	}
	out.Header.Set("Accept-Encoding", "identity")
	cred := c.grant.cred
	switch cred.Scheme {
	case SchemeAPIKey:
		out.Header.Set("X-Api-Key", cred.Secret)
	case SchemeBearer:
		out.Header.Set("Authorization", "Bearer "+cred.Secret)
	case SchemeClaudeOAuth:
		out.Header.Set("Authorization", "Bearer "+cred.Secret)
		if c.route.api == APIAnthropic && !hasBeta(out.Header, ClaudeOAuthBeta) {
			out.Header.Add("Anthropic-Beta", ClaudeOAuthBeta)
		}
	}
}

func hasBeta(h http.Header, beta string) bool {
	for _, v := range h.Values("Anthropic-Beta") {
		for _, b := range strings.Split(v, ",") {
			if strings.TrimSpace(b) == beta {
				return true
			}
		}
	}
	return false
}

// modifyResponse records the status, wraps the body in a meter and
// redacts the credential from what goes back to the lease.
func (g *Gateway) modifyResponse(resp *http.Response) error {
	c := resp.Request.Context().Value(ctxKey{}).(*call)
	gr := c.grant
	stream := strings.HasPrefix(strings.ToLower(resp.Header.Get("Content-Type")), "text/event-stream")
	gr.update(c.seq, func(e *Exchange) {
		e.Status, e.Answered, e.Stream = resp.StatusCode, ByUpstream, stream
	})
	var p parser = discardParser{}
	switch {
	case resp.StatusCode >= http.StatusBadRequest:
		p = &errorParser{}
	case resp.Header.Get("Content-Encoding") != "" && resp.Header.Get("Content-Encoding") != "identity":
		// The upstream compressed anyway: pass it through unmeasured.
	case stream && c.route.model:
		p = &sseParser{api: c.route.api}
	case c.route.model:
		p = &jsonParser{api: c.route.api}
	}
	header := resp.Header.Clone()
	status := resp.StatusCode
	var body io.ReadCloser = &meter{rc: resp.Body, p: p, report: func(m measure, eof bool) {
		g.finish(c, p, status, header, m, eof)
	}}
	// The meter reads the upstream's bytes; the lease gets them with the
	// credential redacted (headers, body, trailers).
	secret := gr.cred.Secret
	redactHeader(resp.Header, secret)
	redactHeader(resp.Trailer, secret)
	if resp.Body != http.NoBody && resp.Request.Method != http.MethodHead {
		// A redaction changes the body's length.
		resp.ContentLength = -1
		resp.Header.Del("Content-Length")
		body = newRedactor(body, secret, func() { redactHeader(resp.Trailer, secret) })
	}
	resp.Body = body
	return nil
}

// finish records a response's measurement, prices it and charges the
// budget: what was measured, or an estimate for a successful model call
// whose usage did not come whole (see estimate.go).
func (g *Gateway) finish(c *call, p parser, status int, header http.Header, m measure, eof bool) {
	gr := c.grant
	var werr *WireError
	if ep, ok := p.(*errorParser); ok {
		werr = decodeError(ep.buf, header, gr.cred.Secret, g.now())
	}
	cost, priced := gr.priceOf(m.model, m.usage, m.hasUsage)
	model, charge := m.model, m.usage
	var est *usage.Usage
	if c.route.model && status >= 200 && status < 300 && !m.final && !m.failed {
		reqBytes, reqModel := c.req.read()
		model = cmp.Or(model, reqModel)
		u := estimate(m, reqBytes)
		u.CostUSD, u.CostKnown = gr.priceOf(model, u, true)
		est, charge = &u, u
	}
	if gr.budget != nil {
		switch {
		case est != nil:
			gr.budget.charge(est.CostUSD, est.CostKnown, model, est.Tokens())
		case m.hasUsage:
			gr.budget.charge(cost, priced, model, charge.Tokens())
		}
	}
	var ex Exchange
	gr.update(c.seq, func(e *Exchange) {
		e.done = true
		e.Duration = g.now().Sub(c.started)
		e.Model, e.Usage, e.HasUsage = bound(model, 128), m.usage, m.hasUsage
		e.CostUSD, e.Priced = cost, priced
		e.Estimate = est
		e.Error = werr
		ex = *e
	})
	g.log.Debug("gateway: exchange", "grant", gr.label, "method", ex.Method, "path", ex.Path, "status", ex.Status,
		"model", ex.Model, "input", ex.Usage.Input, "cached", ex.Usage.Cached, "output", ex.Usage.Output,
		"complete", eof && (!ex.modelCall || ex.Usage.Complete), "duration", ex.Duration)
}

// proxyError answers a request the upstream did not answer: 502 when it
// could not be reached, nothing when the lease went away.
func (g *Gateway) proxyError(w http.ResponseWriter, r *http.Request, err error) {
	c := r.Context().Value(ctxKey{}).(*call)
	gone := r.Context().Err() != nil
	c.grant.update(c.seq, func(e *Exchange) {
		e.done = true
		e.Duration = g.now().Sub(c.started)
		if gone {
			e.Refusal = ClientGone
			return
		}
		e.Status, e.Answered, e.Refusal = http.StatusBadGateway, ByGateway, Unreachable
		e.Error = &WireError{Type: "api_error", Message: "outpost gateway: upstream unreachable"}
	})
	var mbe *http.MaxBytesError
	switch {
	case gone:
		g.log.Debug("gateway: request ended by the lease or a revoke", "grant", c.grant.label, "path", r.URL.Path)
	case errors.As(err, &mbe):
		c.grant.update(c.seq, func(e *Exchange) {
			e.Status, e.Refusal = http.StatusRequestEntityTooLarge, RefusedTooLarge
			e.Error = &WireError{Type: "invalid_request_error", Message: "outpost gateway: request body too large"}
		})
		writeError(w, c.route.api, http.StatusRequestEntityTooLarge, "invalid_request_error", "outpost gateway: request body too large")
	default:
		g.log.Debug("gateway: upstream unreachable", "grant", c.grant.label, "upstream", c.grant.upstream.u.Host, "err", scrub(err.Error(), c.grant.cred.Secret))
		writeError(w, c.route.api, http.StatusBadGateway, "api_error",
			"outpost gateway: upstream "+c.grant.upstream.u.Host+" unreachable")
	}
}

// writeError answers with an error body in the API's own shape, so the CLI
// surfaces the message.
func writeError(w http.ResponseWriter, api API, status int, kind, msg string) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Outpost-Gateway", "1")
	w.WriteHeader(status)
	var body string
	switch api {
	case APIResponses, APIChat:
		code := "outpost_gateway"
		if strings.HasPrefix(msg, BudgetMarker) {
			code = "outpost_budget_exceeded"
		}
		body = `{"error":{"message":` + quote(msg) + `,"type":` + quote(kind) + `,"param":null,"code":` + quote(code) + `}}`
	default:
		body = `{"type":"error","error":{"type":` + quote(kind) + `,"message":` + quote(msg) + `}}`
	}
	_, _ = io.WriteString(w, body+"\n")
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
