package gateway

import (
	"bytes"
	"cmp"
	"encoding/json"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/outpost-dev/outpost/internal/lines"
	"github.com/outpost-dev/outpost/usage"
)

// Bounds on what the meter keeps of a response. The response itself always
// passes through whole; only the measurement gives up past these.
const (
	// maxEventBytes bounds one server-sent event line the meter decodes.
	maxEventBytes = 8 << 20
	// maxJSONBytes bounds a non-streamed body the meter decodes for usage.
	maxJSONBytes = 16 << 20
	// maxErrorBytes bounds the part of an error body kept for evidence.
	maxErrorBytes = 16 << 10
	// maxMessage bounds WireError.Message.
	maxMessage = 512
)

// measure is what a response said about itself.
type measure struct {
	model    string
	usage    usage.Usage
	hasUsage bool
	// final: the response's closing usage was seen (message_delta,
	// response.completed, the Chat usage chunk, a whole JSON body).
	final bool
	// failed: the stream carried an error event (an error instead of an
	// answer, which need not carry usage).
	failed bool
	// bytes counts the body's bytes that passed.
	bytes int64
}

// parser consumes a response body as it passes through.
type parser interface {
	feed(b []byte)
	// end is called once at the end of the body; eof says the body ended
	// normally rather than being cut.
	end(eof bool) measure
}

// meter wraps a response body: every byte read by the proxy is also fed to
// the parser, and the result is reported once when the body ends or is
// closed.
type meter struct {
	rc     io.ReadCloser
	p      parser
	report func(m measure, eof bool)
	once   sync.Once
	n      int64 // bytes read
}

func (m *meter) Read(b []byte) (int, error) {
	n, err := m.rc.Read(b)
	if n > 0 {
		m.n += int64(n)
		m.p.feed(b[:n])
	}
	if err == io.EOF {
		m.finish(true)
	}
	return n, err
}

func (m *meter) Close() error {
	m.finish(false)
	return m.rc.Close()
}

func (m *meter) finish(eof bool) {
	m.once.Do(func() {
		ms := m.p.end(eof)
		ms.bytes = m.n
		m.report(ms, eof)
	})
}

// sseParser splits a server-sent event stream into lines and decodes only
// the data lines that carry a usage object (so the per-chunk cost of a long
// stream is one byte scan). A line over maxEventBytes is skipped.
type sseParser struct {
	api   API
	split *lines.Splitter
	m     measure
	// Anthropic streams report usage at message_start and cumulatively in
	// message_delta; delta fields, when present, replace start fields.
	start, delta antUsage
	sawStart     bool
}

func (p *sseParser) feed(b []byte) {
	if p.split == nil {
		p.split = lines.NewSplitter(maxEventBytes, func(l []byte, oversized bool) {
			if !oversized {
				p.line(l)
			}
		})
	}
	_, _ = p.split.Write(b)
}

// line handles one complete line (without its "\n").
func (p *sseParser) line(l []byte) {
	l = bytes.TrimSuffix(l, []byte{'\r'})
	if ev, ok := bytes.CutPrefix(l, []byte("event:")); ok {
		switch string(bytes.TrimSpace(ev)) {
		case "error", "response.failed":
			p.m.failed = true
		}
		return
	}
	data, ok := bytes.CutPrefix(l, []byte("data:"))
	if !ok {
		return
	}
	data = bytes.TrimLeft(data, " ")
	if bytes.HasPrefix(data, []byte(`{"error"`)) {
		p.m.failed = true // a Chat Completions stream's error chunk
	}
	if !hasUsageObject(data) {
		if p.m.model == "" && bytes.Contains(data, []byte(`"model"`)) {
			// The first event names the model (Responses' response.created,
			// every Chat chunk): the price of a stream cut before its usage.
			p.m.model = eventModel(data)
		}
		return
	}
	switch p.api {
	case APIAnthropic:
		var ev struct {
			Type    string `json:"type"`
			Message struct {
				Model string   `json:"model"`
				Usage antUsage `json:"usage"`
			} `json:"message"`
			Usage antUsage `json:"usage"`
		}
		if json.Unmarshal(data, &ev) != nil {
			return
		}
		switch ev.Type {
		case "message_start":
			p.start, p.sawStart = ev.Message.Usage, true
			if ev.Message.Model != "" {
				p.m.model = ev.Message.Model
			}
		case "message_delta":
			p.delta = p.delta.merge(ev.Usage)
			p.m.final = true
		}
		u := p.start.merge(p.delta)
		p.m.usage, p.m.hasUsage = u.normalize(), true
	case APIResponses:
		var ev struct {
			Type     string `json:"type"`
			Response struct {
				Model string    `json:"model"`
				Usage *oaiUsage `json:"usage"`
			} `json:"response"`
		}
		if json.Unmarshal(data, &ev) != nil || ev.Response.Usage == nil {
			return
		}
		p.m.model = cmp.Or(ev.Response.Model, p.m.model)
		p.m.usage, p.m.hasUsage = ev.Response.Usage.normalize(), true
		switch ev.Type {
		case "response.completed", "response.incomplete", "response.failed", "response.done":
			p.m.final = true
		}
	case APIChat:
		var ev struct {
			Model string    `json:"model"`
			Usage *oaiUsage `json:"usage"`
		}
		if json.Unmarshal(data, &ev) != nil || ev.Usage == nil {
			return
		}
		p.m.model = cmp.Or(ev.Model, p.m.model)
		p.m.usage, p.m.hasUsage, p.m.final = ev.Usage.normalize(), true, true
	}
}

// eventModel is the model an event names: Anthropic's message, the
// Responses API's response, or a Chat chunk's own.
func eventModel(data []byte) string {
	var ev struct {
		Model    string                 `json:"model"`
		Message  struct{ Model string } `json:"message"`
		Response struct{ Model string } `json:"response"`
	}
	if json.Unmarshal(data, &ev) != nil {
		return ""
	}
	return bound(cmp.Or(ev.Model, ev.Message.Model, ev.Response.Model), 128)
}

func (p *sseParser) end(eof bool) measure {
	if eof && p.split != nil {
		p.split.End()
	}
	p.split = nil
	m := p.m
	m.usage.Complete = m.final
	return m
}

// hasUsageObject reports whether data holds `"usage"` followed by an
// object (not null): the only lines worth decoding.
func hasUsageObject(data []byte) bool {
	for {
		i := bytes.Index(data, []byte(`"usage"`))
		if i < 0 {
			return false
		}
		rest := bytes.TrimLeft(data[i+len(`"usage"`):], " \t")
		if len(rest) > 0 && rest[0] == ':' {
			rest = bytes.TrimLeft(rest[1:], " \t")
			if len(rest) > 0 && rest[0] == '{' {
				return true
			}
		}
		data = data[i+1:]
	}
}

// jsonParser buffers a whole (bounded) JSON body and decodes its model and
// usage at the end.
type jsonParser struct {
	api  API
	buf  []byte
	over bool
}

func (p *jsonParser) feed(b []byte) {
	if p.over {
		return
	}
	if len(p.buf)+len(b) > maxJSONBytes {
		p.over, p.buf = true, nil
		return
	}
	p.buf = append(p.buf, b...)
}

func (p *jsonParser) end(eof bool) measure {
	var m measure
	if p.over || !eof {
		return m
	}
	switch p.api {
	case APIAnthropic:
		var body struct {
			Model string    `json:"model"`
			Usage *antUsage `json:"usage"`
		}
		if json.Unmarshal(p.buf, &body) == nil && body.Usage != nil {
			m = measure{model: body.Model, usage: body.Usage.normalize(), hasUsage: true, final: true}
		}
	case APIResponses, APIChat:
		var body struct {
			Model string    `json:"model"`
			Usage *oaiUsage `json:"usage"`
		}
		if json.Unmarshal(p.buf, &body) == nil && body.Usage != nil {
			m = measure{model: body.Model, usage: body.Usage.normalize(), hasUsage: true, final: true}
		}
	}
	m.usage.Complete = m.final
	p.buf = nil
	return m
}

// discardParser measures nothing (probes, model lists).
type discardParser struct{}

func (discardParser) feed([]byte)      {}
func (discardParser) end(bool) measure { return measure{} }

// errorParser keeps the head of an error body for [decodeError].
type errorParser struct {
	buf []byte
}

func (p *errorParser) feed(b []byte) {
	if room := maxErrorBytes - len(p.buf); room > 0 {
		p.buf = append(p.buf, b[:min(len(b), room)]...)
	}
}

func (p *errorParser) end(bool) measure { return measure{} }

// antUsage is an Anthropic usage object; nil fields were absent.
type antUsage struct{ usage.Anthropic }

// merge returns a with the fields present in b replacing a's.
func (a antUsage) merge(b antUsage) antUsage {
	if b.Input != nil {
		a.Input = b.Input
	}
	if b.CacheCreation != nil {
		a.CacheCreation = b.CacheCreation
	}
	if b.CacheRead != nil {
		a.CacheRead = b.CacheRead
	}
	if b.Output != nil {
		a.Output = b.Output
	}
	if b.Lifetimes != nil && b.Lifetimes.OneHour != nil {
		a.Lifetimes = b.Lifetimes
	}
	return a
}

// normalize maps Anthropic counters onto usage.Usage.
func (a antUsage) normalize() usage.Usage { return a.Usage() }

// oaiUsage is an OpenAI usage object, in either API's names: Responses
// (input_tokens, output_tokens, *_details) or Chat Completions
// (prompt_tokens, completion_tokens, *_details).
type oaiUsage struct {
	Input      *int64 `json:"input_tokens"`
	Output     *int64 `json:"output_tokens"`
	Prompt     *int64 `json:"prompt_tokens"`
	Completion *int64 `json:"completion_tokens"`
	// Each API names the same two details objects its own way.
	InputDetails      *oaiInputDetails  `json:"input_tokens_details"`
	PromptDetails     *oaiInputDetails  `json:"prompt_tokens_details"`
	OutputDetails     *oaiOutputDetails `json:"output_tokens_details"`
	CompletionDetails *oaiOutputDetails `json:"completion_tokens_details"`
}

// oaiInputDetails is an OpenAI input (prompt) tokens details object.
type oaiInputDetails struct {
	Cached *int64 `json:"cached_tokens"`
}

// oaiOutputDetails is an OpenAI output (completion) tokens details object.
type oaiOutputDetails struct {
	Reasoning *int64 `json:"reasoning_tokens"`
}

// normalize maps OpenAI counters onto usage.Usage: the API's input count
// includes the cached part, usage.Usage.Input does not.
func (o oaiUsage) normalize() usage.Usage {
	in := usage.Count(o.Input) + usage.Count(o.Prompt)
	out := usage.Count(o.Output) + usage.Count(o.Completion)
	var cached, reasoning int64
	if o.InputDetails != nil {
		cached += usage.Count(o.InputDetails.Cached)
	}
	if o.PromptDetails != nil {
		cached += usage.Count(o.PromptDetails.Cached)
	}
	if o.OutputDetails != nil {
		reasoning += usage.Count(o.OutputDetails.Reasoning)
	}
	if o.CompletionDetails != nil {
		reasoning += usage.Count(o.CompletionDetails.Reasoning)
	}
	cached = min(cached, in)
	return usage.Usage{Input: in - cached, Cached: cached, Output: out, Reasoning: min(reasoning, out)}
}

// decodeError reads a failed response's body head and headers. secret is
// removed from every text kept.
func decodeError(body []byte, h headerGetter, secret string, now time.Time) *WireError {
	var e WireError
	var doc struct {
		Type  json.RawMessage `json:"type"`
		Error json.RawMessage `json:"error"`
		// Codex backend bodies carry resets_at beside or inside error.
		ResetsAt *int64 `json:"resets_at"`
	}
	if json.Unmarshal(body, &doc) == nil {
		var inner struct {
			Type     string          `json:"type"`
			Code     json.RawMessage `json:"code"`
			Message  string          `json:"message"`
			ResetsAt *int64          `json:"resets_at"`
		}
		var text string
		switch {
		case json.Unmarshal(doc.Error, &inner) == nil:
		case json.Unmarshal(doc.Error, &text) == nil:
			inner.Message = text
		}
		e.Type, e.Message = inner.Type, inner.Message
		var code string
		if json.Unmarshal(inner.Code, &code) == nil {
			e.Code = code
		} else if len(inner.Code) > 0 && string(inner.Code) != "null" {
			e.Code = string(inner.Code)
		}
		for _, r := range []*int64{inner.ResetsAt, doc.ResetsAt} {
			if r != nil && *r > 0 && e.ResetAt.IsZero() {
				e.ResetAt = time.Unix(*r, 0).UTC()
			}
		}
	} else {
		e.Message = string(body)
	}
	if ra := h.Get("Retry-After"); ra != "" {
		if n, err := strconv.Atoi(strings.TrimSpace(ra)); err == nil && n >= 0 {
			e.RetryAfter = time.Duration(n) * time.Second
		} else if t, err := time.Parse(time.RFC1123, ra); err == nil && t.After(now) {
			e.RetryAfter = t.Sub(now).Round(time.Second)
		}
	}
	e.RateLimitStatus = bound(h.Get("Anthropic-Ratelimit-Unified-Status"), 32)
	if r := h.Get("Anthropic-Ratelimit-Unified-Reset"); r != "" && e.ResetAt.IsZero() {
		if n, err := strconv.ParseInt(strings.TrimSpace(r), 10, 64); err == nil && n > 0 {
			e.ResetAt = time.Unix(n, 0).UTC()
		}
	}
	e.Type = bound(scrub(e.Type, secret), 64)
	e.Code = bound(scrub(e.Code, secret), 64)
	e.Message = bound(scrub(e.Message, secret), maxMessage)
	return &e
}

type headerGetter interface{ Get(string) string }

// scrub removes the secret from s.
func scrub(s, secret string) string {
	if secret == "" {
		return s
	}
	return strings.ReplaceAll(s, secret, Redaction)
}

// bound cuts s to at most n bytes on a rune boundary and drops control
// characters other than newline and tab.
func bound(s string, n int) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x20 && r != '\n' && r != '\t' || r == 0x7f {
			return -1
		}
		return r
	}, strings.ToValidUTF8(s, ""))
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8Start(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }
