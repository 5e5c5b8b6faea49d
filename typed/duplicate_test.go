package typed

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCheckRefusesDuplicateKeys: a key named twice is validated as its last
// value only, while a reader of the value may take the first ("bogus"), so
// the answer is refused rather than called valid.
func TestCheckRefusesDuplicateKeys(t *testing.T) {
	s, err := Compile([]byte(verdictSchema))
	require.NoError(t, err)
	for name, answer := range map[string]string{
		"top level": `{"verdict":"bogus","score":1,"verdict":"pass"}`,
		"escaped":   `{"verdict":"bogus","score":1,"\u0076erdict":"pass"}`,
	} {
		v, err := s.Check(answer)
		require.Error(t, err, name)
		assert.Nil(t, v, name)
		assert.Contains(t, err.Error(), `repeats the key "verdict"`, name)
	}
	ok := map[string]string{
		"same key in sibling objects": `[{"a":1},{"a":2}]`,
		"key equal to a value":        `{"a":"a","b":{"a":["a",{"a":1}]}}`,
		"empty containers":            `{"a":{},"b":[],"c":[[],{}]}`,
	}
	any, err := Compile([]byte(`{}`))
	require.NoError(t, err)
	for name, answer := range ok {
		_, err := any.Check(answer)
		assert.NoError(t, err, name)
	}
	_, err = any.Check(`[{"a":{"b":1,"b":1}}]`)
	require.Error(t, err, "nested")
	assert.Contains(t, err.Error(), `repeats the key "b"`)
	deep := strings.Repeat(`{"a":`, 5000) + "1" + strings.Repeat("}", 5000)
	_, err = any.Check(deep)
	assert.NoError(t, err, "deep nesting")
}
