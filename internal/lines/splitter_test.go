package lines

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// split feeds in to a Splitter in the given pieces and ends it.
func split(in string, max int, cuts []int) []got {
	var out []got
	s := NewSplitter(max, func(l []byte, over bool) { out = append(out, got{string(l), over}) })
	prev := 0
	for _, c := range append(cuts, len(in)) {
		_, _ = s.Write([]byte(in[prev:c]))
		prev = c
	}
	s.End()
	return out
}

func TestSplitterLines(t *testing.T) {
	assert.Equal(t, []got{{"a", false}, {"", false}, {"bc", false}}, split("a\n\nbc\n", 0, nil))
	assert.Equal(t, []got{{"a", false}, {"bc", false}}, split("a\nbc\n", 0, []int{1, 2, 3}), "a line across writes")
	assert.Equal(t, []got{{"a", false}, {"tail", false}}, split("a\ntail", 0, []int{3}), "End emits a last line without newline")
	assert.Nil(t, split("", 0, nil))
}

func TestSplitterSkipsOversizedLines(t *testing.T) {
	in := "ok\n" + strings.Repeat("x", 11) + "\n" + strings.Repeat("y", 10) + "\nafter\n" + strings.Repeat("z", 30)
	want := []got{{"ok", false}, {"", true}, {strings.Repeat("y", 10), false}, {"after", false}, {"", true}}
	assert.Equal(t, want, split(in, 10, nil), "whole lines in one write")
	assert.Equal(t, want, split(in, 10, []int{5, 9, 20, 30}), "lines across writes")
}

// TestSplitterMatchesReader: pushed in any pieces, the input splits into
// the lines Reader reads from it.
func TestSplitterMatchesReader(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 500 {
		var b strings.Builder
		for range rng.IntN(8) {
			b.WriteString(strings.Repeat("ab", rng.IntN(9)))
			if rng.IntN(5) > 0 {
				b.WriteString("\n")
			}
		}
		in := b.String()
		var cuts []int
		for c := 0; c < len(in); c += 1 + rng.IntN(7) {
			cuts = append(cuts, c)
		}
		max := 1 + rng.IntN(12)
		assert.Equal(t, readAll(t, strings.NewReader(in), max), split(in, max, cuts), "%q max %d cuts %v", in, max, cuts)
	}
}

// TestSplitterEndlessLineStaysBounded: an endless line costs the bound,
// never more.
func TestSplitterEndlessLineStaysBounded(t *testing.T) {
	var out []got
	s := NewSplitter(1<<10, func(l []byte, over bool) { out = append(out, got{string(l), over}) })
	chunk := []byte(strings.Repeat("x", 300))
	for range 1000 {
		_, _ = s.Write(chunk)
		assert.LessOrEqual(t, cap(s.partial), 1<<11)
	}
	_, _ = s.Write([]byte("\nnext\n"))
	assert.Equal(t, []got{{"", true}, {"next", false}}, out)
}
