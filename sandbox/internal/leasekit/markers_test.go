package leasekit

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// markerCase is a Markers that takes the payloads "ok" and a letter (the
// last when the letter is L) and records them.
func markerCase(w *bytes.Buffer, dropAfter bool, taken *[]string) *Markers {
	return &Markers{W: w, Prefix: []byte("\x1emk:n0nce:"), End: '\n', Max: 8, DropAfter: dropAfter,
		Take: func(p string) (bool, bool) {
			if len(p) != 3 || !strings.HasPrefix(p, "ok") || p[2] < 'A' || p[2] > 'z' {
				return false, false
			}
			*taken = append(*taken, p)
			return true, p == "okL"
		}}
}

// TestMarkersSplits: whatever the writes' sizes, the output is the stream
// without the wrapper's markers, every marker is taken once and in order,
// and after the last one the rest passes on or is dropped.
func TestMarkersSplits(t *testing.T) {
	const prefix = "\x1emk:n0nce:"
	pieces := []string{"plain text ", "\x1e", prefix[:4], prefix, prefix + "bad\n", prefix + "ok", prefix + "123456789\n",
		"\x1emk:other:ok\n", "\n", "\x1e\x1e"}
	rng := rand.New(rand.NewPCG(7, 11))
	for i := range 600 {
		var out, stream strings.Builder
		var want []string
		for range rng.IntN(10) {
			if rng.IntN(4) == 0 {
				p := "ok" + string(rune('a'+rng.IntN(26)))
				want = append(want, p)
				stream.WriteString(prefix + p + "\n")
				continue
			}
			s := pieces[rng.IntN(len(pieces))]
			// A piece is output as it is unless it completes a marker with
			// what follows: a NUL after a piece that holds a prefix keeps
			// every payload it could begin one that Take refuses.
			if strings.Contains(s, prefix[:4]) && !strings.HasSuffix(s, "\n") {
				s += "\x00"
			}
			stream.WriteString(s)
			out.WriteString(s)
		}
		last := i%3 != 0
		dropAfter := i%2 == 0
		if last {
			want = append(want, "okL")
			stream.WriteString(prefix + "okL\n" + "after " + prefix)
			if !dropAfter {
				out.WriteString("after " + prefix)
			}
		}
		var dst bytes.Buffer
		var taken []string
		m := markerCase(&dst, dropAfter, &taken)
		for rest := []byte(stream.String()); len(rest) > 0; {
			n := 1 + rng.IntN(min(len(rest), 9))
			k, err := m.Write(rest[:n])
			require.NoError(t, err)
			require.Equal(t, n, k)
			rest = rest[n:]
		}
		m.Flush()
		assert.Equal(t, out.String(), dst.String(), "case %d: %q", i, stream.String())
		assert.Equal(t, want, taken, "case %d: %q", i, stream.String())
	}
}

// TestMarkersOutputAlone: what is no marker of the wrapper's (another
// nonce, a payload Take refuses, one longer than Max, a prefix the stream
// ends in) is output, unchanged.
func TestMarkersOutputAlone(t *testing.T) {
	for _, s := range []string{
		"plain output\n",
		"\x1emk:other:ok\n",
		"\x1emk:n0nce:nope\n",
		"\x1emk:n0nce:ok3456789\n",
		"\x1emk:n0nce:ok",
		"\x1e\x1e\x1emk:n0",
		strings.Repeat("\x1emk:n0nce:", 3),
	} {
		var dst bytes.Buffer
		var taken []string
		m := markerCase(&dst, false, &taken)
		_, err := m.Write([]byte(s))
		require.NoError(t, err)
		m.Flush()
		assert.Equal(t, s, dst.String(), "%q", s)
		assert.Empty(t, taken, "%q", s)
	}
}

type failWriter struct{ n int }

func (f *failWriter) Write(b []byte) (int, error) {
	f.n++
	return 0, errors.New("closed")
}

// TestMarkersWriterFails: once W refuses output the rest of it is dropped,
// and the markers are still taken.
func TestMarkersWriterFails(t *testing.T) {
	fw := &failWriter{}
	var taken []string
	m := &Markers{W: fw, Prefix: []byte("\x1emk:"), End: '\n', Max: 8, Take: func(p string) (bool, bool) {
		taken = append(taken, p)
		return true, p == "end"
	}}
	for _, s := range []string{"one", "\x1emk:a\n", "two", "\x1emk:end\n", "three"} {
		n, err := m.Write([]byte(s))
		require.NoError(t, err)
		require.Equal(t, len(s), n)
	}
	m.Flush()
	assert.Equal(t, []string{"a", "end"}, taken)
	assert.Equal(t, 1, fw.n, "W is not written again once it failed")
}

// TestMarkersLateWrite writes while the stream's end flushes, as a
// stream's copy goroutine can after a cancelled stream: under -race an
// unsynchronized Markers fails.
func TestMarkersLateWrite(t *testing.T) {
	out := &TailBuffer{Max: 1 << 16}
	m := &Markers{W: out, Prefix: []byte("\x1emk:n0nce:"), End: '\n', Max: 8, Take: func(string) (bool, bool) { return true, false }}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 100 {
				_, _ = m.Write([]byte("late \x1emk:n0"))
			}
		})
	}
	for range 100 {
		m.Flush()
	}
	wg.Wait()
}

func TestHeldTail(t *testing.T) {
	p := []byte("\x1eab\x1ec")
	for _, c := range []struct {
		data string
		want int
	}{{"", 0}, {"x", 0}, {"x\x1e", 1}, {"x\x1ea", 2}, {"x\x1eab\x1e", 4}, {"\x1eab\x1ec", 0}, {"x\x1eb", 0}, {"\x1e\x1e", 1}} {
		assert.Equal(t, c.want, heldTail([]byte(c.data), p), "%q", c.data)
	}
}
