package jsonl

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type rec struct {
	ID string `json:"id"`
}

func collect(t *testing.T, in string, opts Options) ([]string, Result, error) {
	t.Helper()
	var ids []string
	res, err := Decode(strings.NewReader(in), "in.jsonl", opts, func(n int, r rec) error {
		if r.ID == "" {
			return errors.New("no id")
		}
		ids = append(ids, fmt.Sprintf("%d:%s", n, r.ID))
		return nil
	})
	return ids, res, err
}

func TestDecode(t *testing.T) {
	ids, res, err := collect(t, "{\"id\":\"a\"}\n\n# c\n{\"id\":\"b\"}\n", Options{SkipComments: true})
	require.NoError(t, err)
	assert.Equal(t, []string{"1:a", "4:b"}, ids)
	assert.Equal(t, 2, res.Lines)
	assert.False(t, res.Torn)

	_, _, err = collect(t, "# c\n", Options{})
	var je *Error
	require.ErrorAs(t, err, &je, "comments are malformed unless skipped")
}

func TestDecodeMalformedLinesNumbered(t *testing.T) {
	in := "{\"id\":\"a\"}\nnot json\n{\"id\":\"\"}\n{\"id\":\"d\"}\n[1,2]\n"
	ids, _, err := collect(t, in, Options{})
	var je *Error
	require.ErrorAs(t, err, &je)
	assert.Equal(t, []string{"1:a", "4:d"}, ids, "decoding goes on after a bad line")
	assert.Equal(t, 3, je.Count)
	require.Len(t, je.Lines, 3)
	assert.Equal(t, []int{2, 3, 5}, []int{je.Lines[0].Line, je.Lines[1].Line, je.Lines[2].Line})
	assert.Contains(t, err.Error(), "in.jsonl: 3 malformed lines (line 2:")
}

func TestDecodeTornLastLine(t *testing.T) {
	ids, res, err := collect(t, "{\"id\":\"a\"}\n{\"id\":\"b", Options{})
	require.NoError(t, err, "a crash mid-line is not malformed input")
	assert.True(t, res.Torn)
	assert.Equal(t, []string{"1:a"}, ids)

	ids, res, err = collect(t, "{\"id\":\"a\"}", Options{})
	require.NoError(t, err, "a complete last line without newline decodes")
	assert.False(t, res.Torn)
	assert.Equal(t, []string{"1:a"}, ids)
}

func TestDecodeBounds(t *testing.T) {
	long := "{\"id\":\"" + strings.Repeat("x", 300) + "\"}"
	ids, _, err := collect(t, long+"\n{\"id\":\"b\"}\n"+long, Options{MaxLine: 100})
	var je *Error
	require.ErrorAs(t, err, &je)
	assert.Equal(t, 2, je.Count)
	assert.Equal(t, 1, je.Lines[0].Line)
	assert.Equal(t, 3, je.Lines[1].Line)
	assert.Equal(t, []string{"2:b"}, ids, "reading goes on after an over-long line")

	var many strings.Builder
	for i := range 50 {
		fmt.Fprintf(&many, "{\"id\":\"%d\"}\nbad\n", i)
	}
	ids, res, err := collect(t, many.String(), Options{MaxLines: 5})
	require.ErrorAs(t, err, &je)
	assert.Len(t, ids, 5)
	assert.True(t, res.Truncated)
	assert.LessOrEqual(t, len(je.Lines), MaxReported)
}

func FuzzDecode(f *testing.F) {
	f.Add([]byte("{\"id\":\"a\"}\n{\"id\"\n\x00\xff"))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = Decode(strings.NewReader(string(b)), "f", Options{MaxLine: 64, MaxLines: 100}, func(int, rec) error { return nil })
	})
}

// TestLenient: a field of the wrong type is skipped and the rest kept; only
// what is not JSON at all is refused.
func TestLenient(t *testing.T) {
	var v struct {
		A int    `json:"a"`
		B string `json:"b"`
	}
	assert.True(t, Lenient([]byte(`{"a":"not a number","b":"kept"}`), &v))
	assert.Equal(t, 0, v.A)
	assert.Equal(t, "kept", v.B)
	assert.False(t, Lenient([]byte(`{"a":`), &v))
	assert.False(t, Lenient([]byte(`not json`), &v))
}
