package gateway

import (
	"errors"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// chunks is a body read in the given pieces, one per Read.
type chunks struct {
	parts []string
	err   error // returned after the last part (nil: io.EOF)
}

func (c *chunks) Read(p []byte) (int, error) {
	if len(c.parts) == 0 {
		if c.err != nil {
			return 0, c.err
		}
		return 0, io.EOF
	}
	n := copy(p, c.parts[0])
	c.parts[0] = c.parts[0][n:]
	if c.parts[0] == "" {
		c.parts = c.parts[1:]
	}
	return n, nil
}

func (c *chunks) Close() error { return nil }

// split cuts s at the given offsets.
func split(s string, cuts ...int) []string {
	var parts []string
	prev := 0
	for _, c := range cuts {
		parts = append(parts, s[prev:c])
		prev = c
	}
	return append(parts, s[prev:])
}

// TestRedactorEveryCut: the redacted body equals strings.ReplaceAll of the
// whole body however it is cut into reads, for secrets that overlap
// themselves too; one-byte reads as well.
func TestRedactorEveryCut(t *testing.T) {
	for _, secret := range []string{"sk-ant-api03-abcdef", "abab", "aXa", "s", "sk-ant-api03-" + strings.Repeat("k-", 20) + "Zz9"} {
		body := "data: {\"k\":\"" + secret + "\"}\n\nx" + secret + secret + "ab" + secret[:len(secret)/2] + "\n" + secret[:len(secret)-1]
		want := strings.ReplaceAll(body, secret, Redaction)
		for i := 0; i <= len(body); i++ {
			for j := i; j <= len(body); j++ {
				got, err := io.ReadAll(newRedactor(&chunks{parts: split(body, i, j)}, secret, nil))
				require.NoError(t, err)
				require.Equal(t, want, string(got), "secret %q cut at %d,%d", secret, i, j)
			}
		}
		got, err := io.ReadAll(newRedactor(io.NopCloser(iotest.OneByteReader(strings.NewReader(body))), secret, nil))
		require.NoError(t, err)
		assert.Equal(t, want, string(got))
	}
}

// TestRedactorRandom: random bodies over a small alphabet (many partial
// matches) in random reads agree with strings.ReplaceAll.
func TestRedactorRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for n := range 4000 {
		secret := randString(rng, 1+rng.IntN(6), "ab")
		if n%2 == 1 {
			// Long enough for the anchored search.
			secret = randString(rng, 33+rng.IntN(12), "ab")
		}
		var body strings.Builder
		for body.Len() < 300 {
			if rng.IntN(3) == 0 {
				body.WriteString(secret[:1+rng.IntN(len(secret))])
			} else {
				body.WriteString(randString(rng, rng.IntN(8), "abc\n"))
			}
		}
		b := body.String()
		var cuts []int
		for c := rng.IntN(len(b) + 1); c < len(b); c += 1 + rng.IntN(40) {
			cuts = append(cuts, c)
		}
		got, err := io.ReadAll(newRedactor(&chunks{parts: split(b, cuts...)}, secret, nil))
		require.NoError(t, err)
		require.Equal(t, strings.ReplaceAll(b, secret, Redaction), string(got), "secret %q body %q cuts %v", secret, b, cuts)
	}
}

func randString(rng *rand.Rand, n int, alphabet string) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = alphabet[rng.IntN(len(alphabet))]
	}
	return string(b)
}

// TestRedactorHoldsOnlyAPrefix: a read returns at once everything but a
// tail that could begin the secret; a complete line is never held.
func TestRedactorHoldsOnlyAPrefix(t *testing.T) {
	secret := "sk-secret-123"
	src := &chunks{parts: []string{"data: one\n\n", "data: sk-sec", "ret-123 two\n\n", "data: sk-x\n\n"}}
	r := newRedactor(src, secret, nil)
	buf := make([]byte, 64)
	n, err := r.Read(buf)
	require.NoError(t, err)
	assert.Equal(t, "data: one\n\n", string(buf[:n]), "a complete event is not held")
	n, err = r.Read(buf)
	require.NoError(t, err)
	assert.Equal(t, "data: ", string(buf[:n]), "only the beginning of the secret is held")
	n, err = r.Read(buf)
	require.NoError(t, err)
	assert.Equal(t, Redaction+" two\n\n", string(buf[:n]))
	n, err = r.Read(buf)
	require.NoError(t, err)
	assert.Equal(t, "data: sk-x\n\n", string(buf[:n]), "a prefix that turned out not to be the secret is released")
}

// TestRedactorCutDropsHeldPrefix: a body cut by an error does not pass on
// the beginning of the secret it was holding; a body that ends normally
// does (it is not the secret).
func TestRedactorCutDropsHeldPrefix(t *testing.T) {
	secret := "sk-secret-123"
	broken := errors.New("connection reset")
	got, err := io.ReadAll(newRedactor(&chunks{parts: []string{"x", "sk-secret-12"}, err: broken}, secret, nil))
	require.ErrorIs(t, err, broken)
	assert.Equal(t, "x", string(got))
	got, err = io.ReadAll(newRedactor(&chunks{parts: []string{"x", "sk-secret-12"}}, secret, nil))
	require.NoError(t, err)
	assert.Equal(t, "xsk-secret-12", string(got))
}

func TestRedactHeader(t *testing.T) {
	h := map[string][]string{"X-Echo": {"key=sk-1 and sk-1"}, "Other": {"fine"}, "Sk-1-Name": {"v"}}
	redactHeader(h, "sk-1")
	assert.Equal(t, []string{"key=" + Redaction + " and " + Redaction}, h["X-Echo"])
	assert.Equal(t, []string{"fine"}, h["Other"])
	assert.Equal(t, []string{"v"}, h[Redaction+"-Name"])
	assert.NotContains(t, h, "Sk-1-Name")
}

// eventReader returns one event per Read, as a flushed stream arrives.
type eventReader struct {
	ev []byte
	n  int
}

func (e *eventReader) Read(p []byte) (int, error) {
	if e.n == 0 {
		return 0, io.EOF
	}
	e.n--
	return copy(p, e.ev), nil
}

func (e *eventReader) Close() error { return nil }

// BenchmarkRedact is the redactor's own cost: 4 MiB of 2 KiB events read
// one event per read, copied as the proxy copies a body, without and with
// the redactor (whose secret begins with a byte the events hold often).
func BenchmarkRedact(b *testing.B) {
	const events = 2048
	ev := []byte("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"" +
		strings.Repeat("sk-x ", 400) + "\"}}\n\n")
	secret := "sk-ant-api03-" + strings.Repeat("Q", 95)
	buf := make([]byte, 64<<10)
	for _, name := range []string{"copy", "redact"} {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(events * len(ev)))
			b.ReportAllocs()
			for b.Loop() {
				var body io.ReadCloser = &eventReader{ev: ev, n: events}
				if name == "redact" {
					body = newRedactor(body, secret, nil)
				}
				if _, err := io.CopyBuffer(io.Discard, struct{ io.Reader }{body}, buf); err != nil {
					b.Fatal(err)
				}
				_ = body.Close()
			}
		})
	}
}
