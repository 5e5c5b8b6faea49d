package outposttest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Option configures a [Server]. Options are applied in order by [NewServer]
// and [NewUnstartedServer]; an option that gets an invalid value makes the
// constructor fail.
type Option func(*config) error

type config struct {
	addr         string
	scenario     Scenario
	sequence     []Scenario
	answers      []string
	retryAfter   time.Duration
	quotaReset   time.Time
	quotaResetIn time.Duration
	chunkDelay   time.Duration
	// quotaWindow is the representative claim of the subscription headers.
	quotaWindow string
	now         func() time.Time
}

func defaultConfig() config {
	return config{
		addr:        "127.0.0.1:0",
		scenario:    ScenarioOK,
		retryAfter:  time.Second,
		chunkDelay:  200 * time.Millisecond,
		quotaWindow: "five_hour",
		now:         time.Now,
	}
}

// WithScenario sets the default scenario (zero value: [ScenarioOK]).
func WithScenario(s Scenario) Option {
	return func(c *config) error {
		if !s.Valid() {
			return fmt.Errorf("with scenario: unknown scenario %q", s)
		}
		c.scenario = s
		return nil
	}
}

// WithSequence scripts the first len(steps) primary model requests: the
// n-th such request is answered with steps[n-1]; later ones fall back to the
// current scenario (see [Server.SetScenario]). Requests carrying a prompt
// directive and auxiliary requests do not consume a step. Useful for
// "recovers after an outage": WithSequence(ScenarioOverloaded, ScenarioOverloaded).
func WithSequence(steps ...Scenario) Option {
	return func(c *config) error {
		for _, s := range steps {
			if !s.Valid() {
				return fmt.Errorf("with sequence: unknown scenario %q", s)
			}
		}
		c.sequence = append([]Scenario(nil), steps...)
		return nil
	}
}

// WithAnswers scripts the final texts of the next len(texts) primary model
// requests answered with the ok answer ([ScenarioOK], and [ScenarioSlow] and
// [ScenarioQuotaWarning], which answer like it): the n-th such request
// answers exactly texts[n-1] instead of "outpost ok: …", streamed in the
// same chunks; later ones answer the ok text again. Auxiliary requests,
// failures and [ScenarioTool] (its tool call and its closing text) do not
// consume a text. An empty text answers with no text at all. Useful for
// typed-response tests: WithAnswers(`{"city":"Paris"}`).
func WithAnswers(texts ...string) Option {
	return func(c *config) error {
		c.answers = append([]string(nil), texts...)
		return nil
	}
}

// WithRetryAfter sets the retry-after header of [ScenarioRateLimit], rounded
// up to whole seconds (zero value: 1s; 0 sends "retry-after: 0").
func WithRetryAfter(d time.Duration) Option {
	return durationOption("with retry after", d, func(c *config) *time.Duration { return &c.retryAfter })
}

// WithQuotaReset sets the instant at which [ScenarioQuota] and
// [ScenarioSpendLimit] say access returns (zero value: the next midnight UTC
// after the request).
func WithQuotaReset(t time.Time) Option {
	return func(c *config) error {
		c.quotaReset = t
		return nil
	}
}

// WithQuotaResetIn makes [ScenarioQuota] and [ScenarioSpendLimit] say
// access returns d after each answer, rounded up to a whole second (the
// unit of the reset headers); it overrides [WithQuotaReset].
func WithQuotaResetIn(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return errors.New("with quota reset in: the delay must be positive")
		}
		c.quotaResetIn = d
		return nil
	}
}

// WithQuotaWindow sets which subscription window [ScenarioQuota] says is
// exhausted: "five_hour" (zero value; Claude Code says "5-hour limit"),
// "seven_day" (weekly), or another representative claim such as
// "seven_day_opus".
func WithQuotaWindow(claim string) Option {
	return func(c *config) error {
		if claim == "" {
			return errors.New("with quota window: empty claim")
		}
		c.quotaWindow = claim
		return nil
	}
}

// WithChunkDelay sets the delay before every stream event of [ScenarioSlow]
// (zero value: 200ms).
func WithChunkDelay(d time.Duration) Option {
	return durationOption("with chunk delay", d, func(c *config) *time.Duration { return &c.chunkDelay })
}

// durationOption is the option named name that sets the duration field
// returns to d, which may not be negative.
func durationOption(name string, d time.Duration, field func(*config) *time.Duration) Option {
	return func(c *config) error {
		if d < 0 {
			return errors.New(name + ": negative duration")
		}
		*field(c) = d
		return nil
	}
}

// WithAddr sets the listen address. It must be a loopback address; the
// zero value is "127.0.0.1:0" (a random free port).
func WithAddr(addr string) Option {
	return func(c *config) error {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			return fmt.Errorf("with addr: %w", err)
		}
		ip := net.ParseIP(host)
		if host != "localhost" && (ip == nil || !ip.IsLoopback()) {
			return fmt.Errorf("with addr: %q is not a loopback address", addr)
		}
		c.addr = addr
		return nil
	}
}

// WithClock sets the clock used for reset instants and request times
// (zero value: time.Now).
func WithClock(now func() time.Time) Option {
	return func(c *config) error {
		if now == nil {
			return errors.New("with clock: nil clock")
		}
		c.now = now
		return nil
	}
}

// Server is a scripted model server. Create it with [NewServer] (listening)
// or [NewUnstartedServer] (for [Server.Handler] only, or [Server.Start]
// later), and always [Server.Close] it. All methods are safe for concurrent
// use.
type Server struct {
	// times counts requests per (scenario, turn text) for times=N directives.
	timesMu sync.Mutex
	times   map[string]int
	// runs counts conversations per run-each directive (RunEachDirective).
	runs map[string]int

	cfg     config
	handler http.Handler

	// done is closed by Close; it releases hanging and slow handlers.
	done      chan struct{}
	closeOnce sync.Once

	mu       sync.Mutex
	scenario Scenario
	sequence []Scenario
	answers  []string
	requests []Request
	// logBase is the number of entries dropped from the front of requests
	// (see MaxLoggedRequests): entry i of the log is requests[i-logBase].
	logBase  int
	logGen   int
	ln       net.Listener
	srv      *http.Server
	serveErr chan error
	url      string
}

// NewServer creates a server and starts it on a loopback port.
func NewServer(opts ...Option) (*Server, error) {
	s, err := NewUnstartedServer(opts...)
	if err != nil {
		return nil, err
	}
	if err := s.Start(); err != nil {
		return nil, err
	}
	return s, nil
}

// NewUnstartedServer creates a server without listening. Its [Server.Handler]
// can be mounted anywhere; [Server.Start] listens.
func NewUnstartedServer(opts ...Option) (*Server, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o(&cfg); err != nil {
			return nil, fmt.Errorf("outposttest: %w", err)
		}
	}
	s := &Server{
		cfg:      cfg,
		done:     make(chan struct{}),
		scenario: cfg.scenario,
		sequence: cfg.sequence,
		answers:  cfg.answers,
	}
	// One register function per wire API, each in its own file
	// (anthropic.go, responses.go); scenarios, sequences and the log are shared.
	mux := http.NewServeMux()
	s.registerAnthropic(mux)
	s.registerResponses(mux)
	s.registerChat(mux)
	mux.HandleFunc("/", s.notFound)
	s.handler = s.logged(mux)
	return s, nil
}

// Start listens on the configured loopback address and serves in the
// background. It fails if the server is already started or closed.
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed() {
		return errors.New("outposttest: start: server closed")
	}
	if s.ln != nil {
		return errors.New("outposttest: start: already started")
	}
	ln, err := net.Listen("tcp", s.cfg.addr)
	if err != nil {
		return fmt.Errorf("outposttest: listen: %w", err)
	}
	s.ln = ln
	// ErrorLog discards: a library prints nothing (aborted hangs are silent anyway).
	s.srv = &http.Server{Handler: s.handler, ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: log.New(io.Discard, "", 0)}
	s.url = "http://" + ln.Addr().String()
	s.serveErr = make(chan error, 1)
	go func(srv *http.Server, ln net.Listener, ch chan<- error) {
		ch <- srv.Serve(ln)
	}(s.srv, ln, s.serveErr)
	return nil
}

// URL is the base URL ("http://127.0.0.1:PORT", no trailing slash), or ""
// before [Server.Start].
func (s *Server) URL() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.url
}

// Handler serves every API of the server. It can be mounted in another
// http.Server; [Server.Close] still releases its hanging requests.
func (s *Server) Handler() http.Handler { return s.handler }

// Close releases hanging and slow requests, stops listening and closes all
// connections. It is idempotent.
func (s *Server) Close() error {
	s.closeOnce.Do(func() { close(s.done) })
	s.mu.Lock()
	srv, ch := s.srv, s.serveErr
	s.srv = nil
	s.mu.Unlock()
	if srv == nil {
		return nil
	}
	err := srv.Close()
	if serr := <-ch; serr != nil && !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	if err != nil {
		return fmt.Errorf("outposttest: close: %w", err)
	}
	return nil
}

func (s *Server) closed() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// SetScenario changes the scenario used by requests without a directive once
// any scripted sequence is used up.
func (s *Server) SetScenario(sc Scenario) error {
	if !sc.Valid() {
		return fmt.Errorf("outposttest: set scenario: unknown scenario %q", sc)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.scenario = sc
	return nil
}

// Scenario returns the current fallback scenario.
func (s *Server) Scenario() Scenario {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.scenario
}

// SetSequence replaces the remaining scripted sequence (see [WithSequence]).
func (s *Server) SetSequence(steps ...Scenario) error {
	for _, sc := range steps {
		if !sc.Valid() {
			return fmt.Errorf("outposttest: set sequence: unknown scenario %q", sc)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sequence = append([]Scenario(nil), steps...)
	return nil
}

// next picks the scenario of a primary model request without a directive,
// consuming one sequence step if any remain.
func (s *Server) next() Scenario {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.sequence) > 0 {
		sc := s.sequence[0]
		s.sequence = s.sequence[1:]
		return sc
	}
	return s.scenario
}

// SetAnswers replaces the remaining scripted answers (see [WithAnswers]);
// no texts empties the queue.
func (s *Server) SetAnswers(texts ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.answers = append([]string(nil), texts...)
}

// nextAnswer returns the next scripted answer, consuming it, or ok=false
// when none remain.
func (s *Server) nextAnswer() (text string, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.answers) == 0 {
		return "", false
	}
	text = s.answers[0]
	s.answers = s.answers[1:]
	return text, true
}

// wait blocks for d, or until the request's client goes away or the server
// closes; it reports whether the full delay elapsed.
func (s *Server) wait(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil && !s.closed()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	case <-s.done:
		return false
	}
}

// hang blocks until the client goes away or the server closes, then aborts
// the response (see [abort]).
func (s *Server) hang(ctx context.Context) {
	select {
	case <-ctx.Done():
	case <-s.done:
	}
	abort()
}

// abort ends a handler without completing its response: net/http drops the
// connection, so a client sees a broken response rather than a clean empty
// or truncated one. A handler mounted elsewhere panics with
// http.ErrAbortHandler, which http.Server handles the same way.
func abort() { panic(http.ErrAbortHandler) }

// wire is how one API writes the answers of a model request.
type wire struct {
	badRequest func(message string) // a 400 invalid request
	failure    func(p plan)         // p's scripted failure
	stream     func(p plan)         // p as a stream
	json       func(p plan)         // p as one JSON body
}

// modelCall is what an API's handler decoded of one model request: the
// view the request log records, the conversation the scenario reads and
// the wire that writes the answers (its badRequest is the handler's).
type modelCall struct {
	endpoint  string
	model     string
	stream    bool
	maxTokens int
	msgs      []Message
	tools     []string
	schema    json.RawMessage
	conv      conversation
	out       wire
}

// serveModel serves a model request the same way on every API: it reads
// the body, decodes it with decode (which may fill only part of the call
// when it fails), logs the request, answers a decoding error with bad and
// otherwise responds (see [Server.respond]). A request that neither streams
// nor declares tools is auxiliary.
func (s *Server) serveModel(w http.ResponseWriter, r *http.Request, api string, bad func(string), decode func(body []byte) (modelCall, error)) {
	body, err := readBody(r)
	if err != nil {
		s.annotate(r.Context(), func(e *Request) { e.API = api })
		if errors.Is(err, errBodyTooLarge) {
			writeTooLarge(w, api)
			return
		}
		bad("read body: " + err.Error())
		return
	}
	c, err := decode(body)
	c.conv.model = c.model
	directive, derr := c.conv.directive()
	aux := !c.stream && len(c.tools) == 0
	s.annotate(r.Context(), func(e *Request) {
		e.API, e.Endpoint = api, c.endpoint
		e.Model, e.Stream, e.MaxTokens, e.Messages = c.model, c.stream, c.maxTokens, c.msgs
		e.OutputSchema = c.schema
		e.Tools = append(e.Tools, c.tools...)
		e.Auxiliary = aux && err == nil
		e.Directive = directive
	})
	if err != nil {
		bad(err.Error())
		return
	}
	c.out.badRequest = bad
	s.respond(r, c.conv, directive, derr, aux, c.stream, c.out)
}

// errBodyTooLarge is readBody's error for a body over maxBody.
var errBodyTooLarge = errors.New("request body too large")

// readBody reads a request body of at most maxBody bytes; a longer one is
// errBodyTooLarge (never parsed truncated).
func readBody(r *http.Request) ([]byte, error) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err == nil && len(body) > maxBody {
		return nil, errBodyTooLarge
	}
	return body, err
}

// writeTooLarge answers a body over maxBody with 413 in api's error shape.
func writeTooLarge(w http.ResponseWriter, api string) {
	msg := fmt.Sprintf("Request exceeds the maximum allowed number of bytes (%d).", maxBody)
	if api == apiAnthropic {
		writeAnthropicError(w, failure{status: http.StatusRequestEntityTooLarge, kind: "request_too_large", message: msg})
		return
	}
	writeResponsesError(w, responsesError{status: http.StatusRequestEntityTooLarge, typ: "invalid_request_error", message: msg})
}

// openStream starts a Server-Sent Events answer of plan p: header, the
// event-stream headers and a request id under idHeader, status 200, flushed.
func (s *Server) openStream(w http.ResponseWriter, r *http.Request, p plan, header map[string]string, idHeader string) *sse {
	h := w.Header()
	for k, v := range header {
		h.Set(k, v)
	}
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	h.Set(idHeader, requestID())
	w.WriteHeader(http.StatusOK)
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
	return &sse{w: w, s: s, r: r, delay: p.delay, ok: true}
}

// sse writes the Server-Sent Events of one answer, each after the plan's
// delay and flushed. Once a write fails, or the client or the server
// goes away, ok is false and nothing more is written.
type sse struct {
	w     http.ResponseWriter
	s     *Server
	r     *http.Request
	delay time.Duration
	ok    bool
}

// event writes "event: <typ>\n" (none when typ is empty) and
// "data: <data>\n\n", then flushes.
func (e *sse) event(typ string, data []byte) {
	if !e.ok {
		return
	}
	if !e.s.wait(e.r.Context(), e.delay) {
		e.ok = false
		return
	}
	var err error
	if typ != "" {
		_, err = fmt.Fprintf(e.w, "event: %s\ndata: %s\n\n", typ, data)
	} else {
		_, err = fmt.Fprintf(e.w, "data: %s\n\n", data)
	}
	if err != nil {
		e.ok = false
		return
	}
	if f, ok := e.w.(http.Flusher); ok {
		f.Flush()
	}
}

// writeJSON writes body as a JSON answer with status, after header and the
// request id id under idHeader.
func writeJSON(w http.ResponseWriter, status int, header map[string]string, idHeader, id string, body any) {
	for k, v := range header {
		w.Header().Set(k, v)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set(idHeader, id)
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}

// openAIHeader is a copy of a plan's headers without Anthropic's own
// (anthropic-*), for the OpenAI APIs; never nil.
func openAIHeader(h map[string]string) map[string]string {
	out := make(map[string]string, len(h))
	for k, v := range h {
		if !strings.HasPrefix(k, "anthropic-") {
			out[k] = v
		}
	}
	return out
}

// respond answers a decoded model request the same way on every API: an
// auxiliary request gets the ok text without touching the scenario state;
// otherwise the directive (or the next scenario) decides, and the plan is
// a hang, a failure, a stream or a JSON body after its delay.
func (s *Server) respond(r *http.Request, conv conversation, directive Scenario, derr error, aux, stream bool, out wire) {
	if aux {
		// Titles, topics and other side queries: answer sanely, leave the
		// scenario state alone.
		out.json(plan{scenario: ScenarioOK, text: conv.okText()})
		return
	}
	if derr != nil {
		out.badRequest("outposttest: " + derr.Error())
		return
	}
	sc := directive
	if sc == "" {
		sc = s.next()
	}
	p := s.decide(sc, conv)
	s.annotate(r.Context(), func(e *Request) { e.Scenario = p.scenario })
	switch {
	case p.hang:
		s.hang(r.Context())
	case p.failure != nil:
		out.failure(p)
	case stream:
		out.stream(p)
	default:
		if !s.wait(r.Context(), p.delay) {
			abort()
		}
		out.json(p)
	}
}

func (s *Server) notFound(w http.ResponseWriter, r *http.Request) {
	// Connectivity probes (Claude Code sends HEAD /api/hello without
	// CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC) and the root answer 200.
	if r.URL.Path == "/" || r.URL.Path == "/api/hello" {
		if r.Method == http.MethodGet || r.Method == http.MethodHead {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.WriteHeader(http.StatusOK)
			if r.Method == http.MethodGet {
				_, _ = w.Write([]byte("ok\n"))
			}
			return
		}
	}
	// Every other path answers like the API of its family.
	if strings.HasPrefix(r.URL.Path, "/v1/") {
		writeAnthropicError(w, failure{status: http.StatusNotFound, kind: "not_found_error",
			message: "Not found: " + r.Method + " " + r.URL.Path})
		return
	}
	http.NotFound(w, r)
}
