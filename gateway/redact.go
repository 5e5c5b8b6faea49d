package gateway

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"strings"
	"sync"
)

// Redaction replaces every occurrence of a grant's real credential in what
// the upstream answers (status line aside: response headers, 1xx headers,
// the body, streamed or not, and trailers) before any of it reaches the
// lease. An upstream that echoes the key it was sent — an error message, a
// debug header, a misconfigured proxy — gives the lease this instead.
const Redaction = "[REDACTED]"

// redactBufSize is the size of a redactor's read buffer (the transport's
// read size: a burst of events that arrived together passes in one read).
const redactBufSize = 64 << 10

var redactPool = sync.Pool{New: func() any { b := make([]byte, 0, redactBufSize); return &b }}

// redactHeader replaces the secret in every value of h, and in every name
// regardless of case (names arrive canonicalized: "X-Sk-Ant-…"), in place.
func redactHeader(h map[string][]string, secret string) {
	lower := strings.ToLower(secret)
	for k, vs := range h {
		for i, v := range vs {
			if strings.Contains(v, secret) {
				vs[i] = strings.ReplaceAll(v, secret, Redaction)
			}
		}
		if nk := replaceFold(k, lower); nk != k {
			delete(h, k)
			h[nk] = append(h[nk], vs...)
		}
	}
}

// replaceFold replaces every ASCII-case-insensitive occurrence of lower (a
// lowercase string) in s with [Redaction].
func replaceFold(s, lower string) string {
	ls := strings.ToLower(s)
	if len(ls) != len(s) || !strings.Contains(ls, lower) {
		return s
	}
	var b strings.Builder
	for {
		i := strings.Index(ls, lower)
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:i])
		b.WriteString(Redaction)
		s, ls = s[i+len(lower):], ls[i+len(lower):]
	}
}

// redactor is a response body with every occurrence of secret replaced by
// [Redaction]. It holds back only the longest tail of what it read that
// could begin the secret (at most len(secret)-1 bytes; none for an event
// ending in a newline, as a credential has no control characters), so a
// stream is delayed by nothing else: each read from the upstream is
// returned as soon as it is read.
type redactor struct {
	src    io.ReadCloser
	secret []byte
	// atEOF runs once when the body ends normally (trailers are known).
	atEOF func()

	in   *[]byte // in[:held] is the held tail, moved to the front lazily
	tail int     // start of the held tail in *in (valid while out is unread)
	held int     // length of the held tail
	out  []byte  // bytes ready for the reader (in *in or in *rep)
	rep  *[]byte // output buffer when a replacement was made
	err  error
}

func newRedactor(src io.ReadCloser, secret string, atEOF func()) *redactor {
	return &redactor{src: src, secret: []byte(secret), atEOF: atEOF}
}

func (r *redactor) Read(p []byte) (int, error) {
	for len(r.out) == 0 {
		if r.err != nil {
			return 0, r.err
		}
		r.fill()
	}
	n := copy(p, r.out)
	r.out = r.out[n:]
	return n, nil
}

// fill reads once from the source and makes out the redacted part of the
// held tail and what was read, minus the new tail.
func (r *redactor) fill() {
	if r.in == nil {
		r.in = redactPool.Get().(*[]byte)
	}
	buf := (*r.in)[:cap(*r.in)]
	// The output of the previous fill has been read: the held tail moves to
	// the front.
	copy(buf, buf[r.tail:r.tail+r.held])
	n, err := r.src.Read(buf[r.held:])
	data := buf[:r.held+n]
	r.tail, r.held = 0, 0
	if err != nil {
		r.err = err
	}
	// Whole occurrences first, left to right; the tail is looked for after
	// the last one.
	start := 0
	var out []byte
	replaced := false
	for {
		i := indexSecret(data[start:], r.secret)
		if i < 0 {
			break
		}
		if !replaced {
			if r.rep == nil {
				r.rep = redactPool.Get().(*[]byte)
			}
			out, replaced = (*r.rep)[:0], true
		}
		out = append(out, data[start:start+i]...)
		out = append(out, Redaction...)
		start += i + len(r.secret)
	}
	end := len(data)
	switch {
	case err == nil:
		// Held until the next read says whether it is the secret.
		r.held = partialSuffix(data[start:], r.secret)
		r.tail = end - r.held
		end = r.tail
	case err != io.EOF:
		// A cut body ends here: a beginning of the secret is dropped, not
		// passed on.
		end -= partialSuffix(data[start:], r.secret)
	}
	if replaced {
		out = append(out, data[start:end]...)
		*r.rep = out
		r.out = out
	} else {
		r.out = data[:end]
	}
	if err == io.EOF && r.atEOF != nil {
		r.atEOF()
		r.atEOF = nil
	}
}

// indexSecret is bytes.Index(b, secret), faster on text full of the
// secret's common first bytes ("sk-"): it looks for the secret's last
// bytes (random in a key, rare in text) with the vectorized short search,
// then compares the rest.
func indexSecret(b, secret []byte) int {
	const tail = 16
	if len(secret) <= 2*tail {
		return bytes.Index(b, secret)
	}
	anchor := secret[len(secret)-tail:]
	lead := len(secret) - tail
	off := lead
	for off < len(b) {
		i := bytes.Index(b[off:], anchor)
		if i < 0 {
			return -1
		}
		at := off + i - lead
		if bytes.Equal(b[at:at+lead], secret[:lead]) {
			return at
		}
		off += i + 1
	}
	return -1
}

// partialSuffix returns the length of the longest suffix of b that is a
// proper prefix of secret (0 when none is).
func partialSuffix(b, secret []byte) int {
	k := min(len(secret)-1, len(b))
	for k > 0 {
		// The longest candidate starts at the first byte in the window
		// that could begin the secret.
		j := bytes.IndexByte(b[len(b)-k:], secret[0])
		if j < 0 {
			return 0
		}
		k -= j
		if bytes.Equal(b[len(b)-k:], secret[:k]) {
			return k
		}
		k--
	}
	return 0
}

// Close closes the source and returns the buffers.
func (r *redactor) Close() error {
	err := r.src.Close()
	if r.in != nil {
		redactPool.Put(r.in)
		r.in = nil
	}
	if r.rep != nil {
		*r.rep = (*r.rep)[:0]
		redactPool.Put(r.rep)
		r.rep = nil
	}
	r.out = nil
	if r.err == nil {
		r.err = io.ErrClosedPipe
	}
	return err
}

// redactTransport sends requests with the wrapped transport and redacts
// the headers of 1xx informational responses, which the proxy forwards to
// the lease as they arrive (before ModifyResponse): its hook runs before
// the proxy's, on the same header map.
type redactTransport struct{ rt http.RoundTripper }

func (t redactTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	c, ok := req.Context().Value(ctxKey{}).(*call)
	if !ok {
		return t.rt.RoundTrip(req)
	}
	secret := c.grant.cred.Secret
	trace := &httptrace.ClientTrace{Got1xxResponse: func(_ int, h textproto.MIMEHeader) error {
		redactHeader(h, secret)
		return nil
	}}
	return t.rt.RoundTrip(req.WithContext(httptrace.WithClientTrace(req.Context(), trace)))
}
