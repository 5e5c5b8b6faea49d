package shquote

import (
	"os/exec"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestQuote(t *testing.T) {
	assert.Equal(t, `'it'\''s'`, Quote("it's"))
	assert.Equal(t, `''`, Quote(""))
	assert.Equal(t, `'a=b'`, Quote("a=b"))
	assert.Equal(t, "tests/a.py::test_b", Arg("tests/a.py::test_b"))
	assert.Equal(t, `'t[a b]'`, Arg("t[a b]"))
	assert.Equal(t, `'it'\''s'`, Arg("it's"))
	assert.Equal(t, `''`, Arg(""))
	assert.Equal(t, `'é'`, Arg("é"))
}

// TestShellReadsBack: sh reads every quoted word back as the word it was.
func TestShellReadsBack(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh on this machine")
	}
	words := []string{"", "plain", "it's", "'", "''", `a"b`, "$HOME", "`id`", "a b\tc", "line\nbreak", "*", "~", "\\", "a=b", "-n", "é ü"}
	script := `for w in`
	for _, w := range words {
		script += " " + Arg(w) + " " + Quote(w)
	}
	script += `; do printf '%s\0' "$w"; done`
	out, err := exec.Command("sh", "-c", script).Output()
	require.NoError(t, err)
	var want []byte
	for _, w := range words {
		want = append(append(want, w...), 0)
		want = append(append(want, w...), 0)
	}
	assert.Equal(t, string(want), string(out))
}
