package gateway

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/usage"
)

// Streams shaped like the vendors' documented examples (not the scripted
// server's), including the fields the scripted server leaves out.
const (
	anthropicStream = "event: message_start\n" +
		`data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"claude-opus-4-6","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":25,"cache_creation_input_tokens":100,"cache_read_input_tokens":2000,"output_tokens":1,"cache_creation":{"ephemeral_5m_input_tokens":60,"ephemeral_1h_input_tokens":40}}}}` + "\n\n" +
		"event: ping\ndata: {\"type\": \"ping\"}\n\n" +
		"event: content_block_delta\n" +
		`data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"the word \"usage\": {x}"}}` + "\n\n" +
		"event: message_delta\n" +
		`data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":15}}` + "\n\n" +
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	chatStream = `data: {"id":"c1","object":"chat.completion.chunk","model":"gpt-4o-mini","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}],"usage":null}` + "\n\n" +
		`data: {"id":"c1","object":"chat.completion.chunk","model":"gpt-4o-mini","choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}],"usage":null}` + "\n\n" +
		`data: {"id":"c1","object":"chat.completion.chunk","model":"gpt-4o-mini","choices":[],"usage":{"prompt_tokens":90,"completion_tokens":12,"total_tokens":102,"prompt_tokens_details":{"cached_tokens":64,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":4}}}` + "\n\n" +
		"data: [DONE]\n\n"
	responsesStream = "event: response.created\n" +
		`data: {"type":"response.created","sequence_number":0,"response":{"id":"resp_1","model":"gpt-5.5","status":"in_progress","usage":null}}` + "\n\n" +
		"event: response.output_text.delta\n" +
		`data: {"type":"response.output_text.delta","sequence_number":1,"delta":"Hi"}` + "\n\n" +
		"event: response.completed\n" +
		`data: {"type":"response.completed","sequence_number":2,"response":{"id":"resp_1","model":"gpt-5.5-2026","status":"completed","usage":{"input_tokens":36,"input_tokens_details":{"cached_tokens":10},"output_tokens":87,"output_tokens_details":{"reasoning_tokens":50},"total_tokens":123}}}` + "\n\n"
)

var streams = []struct {
	api   API
	body  string
	model string
	want  usage.Usage
}{
	{APIAnthropic, anthropicStream, "claude-opus-4-6", usage.Usage{Input: 25, CacheCreated: 100, CacheCreated1h: 40, Cached: 2000, Output: 15, Complete: true}},
	{APIChat, chatStream, "gpt-4o-mini", usage.Usage{Input: 26, Cached: 64, Output: 12, Reasoning: 4, Complete: true}},
	{APIResponses, responsesStream, "gpt-5.5-2026", usage.Usage{Input: 26, Cached: 10, Output: 87, Reasoning: 50, Complete: true}},
}

// TestSSEParserAnySplit: the measurement does not depend on how the stream
// is cut into reads (one byte at a time, odd sizes, CRLF line ends).
func TestSSEParserAnySplit(t *testing.T) {
	for _, s := range streams {
		for _, crlf := range []bool{false, true} {
			body := s.body
			if crlf {
				body = strings.ReplaceAll(body, "\n", "\r\n")
			}
			for _, size := range []int{1, 2, 3, 7, 64, len(body)} {
				p := &sseParser{api: s.api}
				for b := []byte(body); len(b) > 0; {
					n := min(size, len(b))
					p.feed(b[:n])
					b = b[n:]
				}
				m := p.end(true)
				assert.Equal(t, s.want, m.usage, "%s size %d crlf %v", s.api, size, crlf)
				assert.Equal(t, s.model, m.model)
				assert.True(t, m.hasUsage)
			}
		}
	}
}

// TestSSEParserCutStream: a stream cut before its closing usage reports
// what it saw, marked incomplete.
func TestSSEParserCutStream(t *testing.T) {
	i := strings.Index(anthropicStream, "event: message_delta")
	p := &sseParser{api: APIAnthropic}
	p.feed([]byte(anthropicStream[:i]))
	m := p.end(false)
	assert.True(t, m.hasUsage)
	assert.False(t, m.usage.Complete)
	assert.Equal(t, int64(25), m.usage.Input)

	p = &sseParser{api: APIChat}
	p.feed([]byte(chatStream[:strings.Index(chatStream, `"choices":[]`)]))
	m = p.end(false)
	assert.False(t, m.hasUsage)
}

// TestSSEParserNewerAnthropicDelta: message_delta may repeat every counter
// (cumulative); its values replace message_start's.
func TestSSEParserNewerAnthropicDelta(t *testing.T) {
	body := strings.Replace(anthropicStream, `"usage":{"output_tokens":15}`,
		`"usage":{"input_tokens":30,"cache_creation_input_tokens":100,"cache_read_input_tokens":2000,"output_tokens":15,"server_tool_use":{"web_search_requests":0}}`, 1)
	p := &sseParser{api: APIAnthropic}
	p.feed([]byte(body))
	m := p.end(true)
	assert.Equal(t, usage.Usage{Input: 30, CacheCreated: 100, CacheCreated1h: 40, Cached: 2000, Output: 15, Complete: true}, m.usage,
		"the 1-hour share of message_start stands when the delta does not repeat it")
}

// TestSSEParserBoundsLines: a line longer than the bound is skipped whole
// and parsing resumes after it (that the skipped line is never buffered is
// internal/lines' TestSplitterEndlessLineStaysBounded).
func TestSSEParserBoundsLines(t *testing.T) {
	huge := "data: {\"usage\":{" + strings.Repeat("x", maxEventBytes+10) + "\n\n"
	p := &sseParser{api: APIChat}
	for b := []byte(huge + chatStream); len(b) > 0; {
		n := min(1<<20, len(b))
		p.feed(b[:n])
		b = b[n:]
	}
	m := p.end(true)
	assert.Equal(t, streams[1].want, m.usage)
}

func TestJSONParser(t *testing.T) {
	cases := []struct {
		api  API
		body string
		want usage.Usage
	}{
		{APIAnthropic, `{"id":"msg","model":"claude-x","content":[],"usage":{"input_tokens":5,"cache_read_input_tokens":7,"output_tokens":9}}`,
			usage.Usage{Input: 5, Cached: 7, Output: 9, Complete: true}},
		{APIResponses, `{"model":"gpt","output":[],"usage":{"input_tokens":20,"input_tokens_details":{"cached_tokens":5},"output_tokens":9,"output_tokens_details":{"reasoning_tokens":3}}}`,
			usage.Usage{Input: 15, Cached: 5, Output: 9, Reasoning: 3, Complete: true}},
		{APIChat, `{"model":"gpt","choices":[],"usage":{"prompt_tokens":20,"completion_tokens":9,"prompt_tokens_details":{"cached_tokens":25}}}`,
			usage.Usage{Input: 0, Cached: 20, Output: 9, Complete: true}},
		{APIChat, `{"model":"gpt","choices":[],"usage":{"prompt_tokens":-3,"completion_tokens":9}}`,
			usage.Usage{Output: 9, Complete: true}},
	}
	for _, c := range cases {
		p := &jsonParser{api: c.api}
		p.feed([]byte(c.body))
		m := p.end(true)
		assert.Equal(t, c.want, m.usage, c.body)
	}
	p := &jsonParser{api: APIChat}
	p.feed([]byte(`{"usage":`))
	assert.False(t, p.end(false).hasUsage, "a cut body measures nothing")
	p = &jsonParser{api: APIChat}
	p.feed(make([]byte, maxJSONBytes+1))
	assert.False(t, p.end(true).hasUsage, "an oversized body is not buffered")
	assert.Nil(t, p.buf)
}

func TestDecodeError(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	h := http.Header{}
	h.Set("Retry-After", "7")
	h.Set("Anthropic-Ratelimit-Unified-Status", "rejected")
	h.Set("Anthropic-Ratelimit-Unified-Reset", "1893456000")
	e := decodeError([]byte(`{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}`), h, "s3cret", now)
	assert.Equal(t, "rate_limit_error", e.Type)
	assert.Equal(t, "slow down", e.Message)
	assert.Equal(t, 7*time.Second, e.RetryAfter)
	assert.Equal(t, "rejected", e.RateLimitStatus)
	assert.Equal(t, time.Unix(1893456000, 0).UTC(), e.ResetAt)

	e = decodeError([]byte(`{"error":{"message":"limit","type":"usage_limit_reached","code":null,"resets_at":1893459600}}`), http.Header{}, "", now)
	assert.Equal(t, "usage_limit_reached", e.Type)
	assert.Empty(t, e.Code)
	assert.Equal(t, time.Unix(1893459600, 0).UTC(), e.ResetAt)

	e = decodeError([]byte(`{"error":{"message":"x","code":429}}`), http.Header{}, "", now)
	assert.Equal(t, "429", e.Code)

	e = decodeError([]byte("<html>bad gateway s3cret\x00\x1b[31m</html>"+strings.Repeat("y", 2000)), http.Header{}, "s3cret", now)
	assert.NotContains(t, e.Message, "s3cret")
	assert.NotContains(t, e.Message, "\x00")
	assert.NotContains(t, e.Message, "\x1b")
	assert.LessOrEqual(t, len(e.Message), maxMessage+len("…"))

	h = http.Header{}
	h.Set("Retry-After", now.Add(90*time.Second).Format(time.RFC1123))
	e = decodeError(nil, h, "", now)
	assert.Equal(t, 90*time.Second, e.RetryAfter)
}

func TestHasUsageObject(t *testing.T) {
	for in, want := range map[string]bool{
		`{"usage":{"a":1}}`:               true,
		`{"usage" : {"a":1}}`:             true,
		`{"usage":null}`:                  false,
		`{"text":"usage"}`:                false,
		`{"usage":null,"x":{"usage":{}}}`: true,
		`"usage"`:                         false,
		`"usage":`:                        false,
	} {
		assert.Equal(t, want, hasUsageObject([]byte(in)), in)
	}
}

func TestRoutes(t *testing.T) {
	for _, ok := range []string{"/v1/messages", "/v1/responses", "/v1/chat/completions", "/chat/completions"} {
		_, found := match(http.MethodPost, mustURL(t, ok))
		assert.True(t, found, ok)
	}
	_, found := match(http.MethodGet, mustURL(t, "/v1/models/claude-opus-4-6"))
	assert.True(t, found)
	for _, bad := range []string{"/v1/models/..", "/v1/models/a b", "/v1/models/", "/v1/models/" + strings.Repeat("a", 200)} {
		_, found := match(http.MethodGet, mustURL(t, bad))
		assert.False(t, found, bad)
	}
}

func mustURL(t *testing.T, p string) *url.URL {
	t.Helper()
	u, err := url.Parse(p)
	require.NoError(t, err)
	return u
}

// FuzzSSEParser: hostile upstream bytes never panic the meter, whatever
// the API and however the reads are cut.
func FuzzSSEParser(f *testing.F) {
	for _, s := range streams {
		f.Add([]byte(s.body), uint8(3))
	}
	f.Add([]byte("data: {\"usage\":{\"input_tokens\":\"x\"}}\n"), uint8(1))
	f.Fuzz(func(t *testing.T, body []byte, cut uint8) {
		for _, api := range []API{APIAnthropic, APIResponses, APIChat} {
			p := &sseParser{api: api}
			size := int(cut) + 1
			for b := body; len(b) > 0; {
				n := min(size, len(b))
				p.feed(b[:n])
				b = b[n:]
			}
			m := p.end(true)
			if m.usage.Input < 0 || m.usage.Output < 0 || m.usage.Cached < 0 {
				t.Fatalf("negative usage %+v", m.usage)
			}
			j := &jsonParser{api: api}
			j.feed(body)
			_ = j.end(true)
			_ = decodeError(body, http.Header{}, "k", time.Time{})
		}
	})
}
