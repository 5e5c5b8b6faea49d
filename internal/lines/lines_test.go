package lines

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type got struct {
	line string
	over bool
}

func readAll(t *testing.T, r io.Reader, max int) []got {
	t.Helper()
	lr := NewReader(r, max)
	var out []got
	for {
		l, over, err := lr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		require.NoError(t, err)
		out = append(out, got{string(l), over})
	}
}

func TestLines(t *testing.T) {
	assert.Equal(t, []got{{"a", false}, {"", false}, {"bc", false}}, readAll(t, strings.NewReader("a\n\nbc\n"), 0))
	assert.Equal(t, []got{{"a", false}, {"tail", false}}, readAll(t, strings.NewReader("a\ntail"), 0), "a last line without newline")
	assert.Nil(t, readAll(t, strings.NewReader(""), 0))
}

func TestOversizedLinesAreSkipped(t *testing.T) {
	in := "ok\n" + strings.Repeat("x", 11) + "\n" + strings.Repeat("y", 10) + "\n" + "after\n" + strings.Repeat("z", 30)
	assert.Equal(t, []got{{"ok", false}, {"", true}, {strings.Repeat("y", 10), false}, {"after", false}, {"", true}},
		readAll(t, strings.NewReader(in), 10))
	// Longer than bufio's own buffer.
	big := strings.Repeat("q", 200<<10) + "\nend\n"
	assert.Equal(t, []got{{"", true}, {"end", false}}, readAll(t, strings.NewReader(big), 100<<10))
}

// endless is an input with no newline at all (/dev/zero).
type endless struct{ n int }

func (e *endless) Read(p []byte) (int, error) {
	if e.n <= 0 {
		return 0, io.EOF
	}
	if len(p) > e.n {
		p = p[:e.n]
	}
	for i := range p {
		p[i] = 0
	}
	e.n -= len(p)
	return len(p), nil
}

func TestEndlessLineStaysBounded(t *testing.T) {
	lr := NewReader(&endless{n: 64 << 20}, 1<<20)
	_, over, err := lr.Next()
	require.NoError(t, err)
	assert.True(t, over)
	assert.Nil(t, lr.buf, "the buffer of a skipped line is released")
	_, _, err = lr.Next()
	assert.ErrorIs(t, err, io.EOF)
}

func TestReadErrorSurfaces(t *testing.T) {
	boom := errors.New("boom")
	lr := NewReader(io.MultiReader(bytes.NewReader([]byte("x\npartial")), errReader{boom}), 0)
	l, _, err := lr.Next()
	require.NoError(t, err)
	assert.Equal(t, "x", string(l))
	l, _, err = lr.Next()
	require.NoError(t, err)
	assert.Equal(t, "partial", string(l))
	_, _, err = lr.Next()
	assert.ErrorIs(t, err, boom)
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

func TestStopWhenEndsAnEndlessLine(t *testing.T) {
	stop := errors.New("stopped")
	reads := 0
	lr := NewReader(&endless{n: 1 << 40}, 0)
	lr.StopWhen(func() error {
		reads++
		if reads > 100 {
			return stop
		}
		return nil
	})
	_, _, err := lr.Next()
	assert.ErrorIs(t, err, stop)
}

// TestOversizedAtOnce: the line is reported as soon as it passes the bound,
// having read little more than the bound of an input that never ends.
func TestOversizedAtOnce(t *testing.T) {
	e := &endless{n: 1 << 40}
	lr := NewReader(e, 1<<20)
	lr.OversizedAtOnce()
	_, over, err := lr.Next()
	require.NoError(t, err)
	assert.True(t, over)
	assert.Less(t, (1<<40)-e.n, 2<<20, "read about the bound, not to a newline")

	lr = NewReader(strings.NewReader("ok\n"+strings.Repeat("x", 11)+"\n"), 10)
	lr.OversizedAtOnce()
	l, over, err := lr.Next()
	require.NoError(t, err)
	assert.Equal(t, "ok", string(l))
	assert.False(t, over)
	_, over, err = lr.Next()
	require.NoError(t, err)
	assert.True(t, over)
}

// TestEndedAndRest: a caller can tell a last line the input stopped in from
// a whole one, and read on after a header line as a stream.
func TestEndedAndRest(t *testing.T) {
	lr := NewReader(strings.NewReader("head\nbody bytes"), 8)
	l, over, err := lr.Next()
	require.NoError(t, err)
	assert.False(t, over)
	assert.Equal(t, "head", string(l))
	assert.True(t, lr.Ended())
	rest, err := io.ReadAll(lr.Rest())
	require.NoError(t, err)
	assert.Equal(t, "body bytes", string(rest))

	lr = NewReader(strings.NewReader("a\ntorn"), 0)
	_, _, _ = lr.Next()
	assert.True(t, lr.Ended())
	l, _, err = lr.Next()
	require.NoError(t, err)
	assert.Equal(t, "torn", string(l))
	assert.False(t, lr.Ended(), "the input stopped in this line")
}
