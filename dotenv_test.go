package outpost

import (
	"maps"
	"slices"
	"testing"

	"github.com/joho/godotenv"
	"github.com/stretchr/testify/assert"
)

var dotenvSamples = []string{
	"A=1\nB=2\n",
	"# comment\nexport A=1\n  B = two words # trailing\n",
	"A=\"multi\nline\"\nB='x'\nC=\"esc\\\"aped\"\n",
	"A=1\r\nB=2\r\n",
	"A: yaml\nB=\n",
	"A=1\nA=2\n",
	"A=\"x\nA=y\"\nB=1\n",
	"exportX=1\nexport\tY=2\n",
	"",
	"A=${B}\nB=1",
}

// TestDotenvKeysMatchParser: the key scanner finds exactly the names the
// parser keeps, plus the repetitions it silently collapses.
func TestDotenvKeysMatchParser(t *testing.T) {
	for _, in := range dotenvSamples {
		checkDotenvKeys(t, in)
	}
	assert.Equal(t, []string{"A", "A"}, dotenvKeys([]byte("A=1\nA=2\n")))
	assert.Equal(t, []string{"A", "B"}, dotenvKeys([]byte("A=\"x\nA=y\"\nB=1\n")), "a quoted value spans lines")
}

func checkDotenvKeys(t *testing.T, in string) {
	t.Helper()
	m, err := godotenv.UnmarshalBytes([]byte(in))
	if err != nil {
		return
	}
	keys := dotenvKeys([]byte(in))
	set := slices.Sorted(maps.Keys(m))
	got := slices.Compact(slices.Sorted(slices.Values(keys)))
	assert.Equal(t, set, got, "input %q", in)
}

func FuzzDotenvKeys(f *testing.F) {
	for _, s := range dotenvSamples {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		checkDotenvKeys(t, in)
	})
}
