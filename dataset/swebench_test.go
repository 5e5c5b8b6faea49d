package dataset

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/outposterr"
)

// TestTestList: SWE-bench's lists read as arrays or as strings holding one.
func TestTestList(t *testing.T) {
	var row SWEBenchRow
	require.NoError(t, json.Unmarshal([]byte(`{"FAIL_TO_PASS":"[\"a::b\", \"c\"]","PASS_TO_PASS":["d"]}`), &row))
	assert.Equal(t, TestList{"a::b", "c"}, row.FailToPass)
	assert.Equal(t, TestList{"d"}, row.PassToPass)
	require.NoError(t, json.Unmarshal([]byte(`{"FAIL_TO_PASS":"","PASS_TO_PASS":null}`), &row))
	assert.Empty(t, row.FailToPass)
	err := json.Unmarshal([]byte(`{"PASS_TO_PASS":"a::b"}`), &row)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "PASS_TO_PASS: want a list of test names")
}

// endless is an endless run of one byte.
type endless byte

func (e endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(e)
	}
	return len(p), nil
}

// TestImportRowBound: a row line over the bound ends the import with an
// error naming it, without reading the rest of the line (here endless).
func TestImportRowBound(t *testing.T) {
	in := io.MultiReader(strings.NewReader("\n"+`{"instance_id":"`), endless('a'))
	_, err := ImportSWEBench(context.Background(), in, SWEBenchOptions{Repos: t.TempDir(), Agent: "claude"},
		func(Job) error { return nil })
	require.Error(t, err)
	assert.Equal(t, outposterr.Configuration, outposterr.ClassOf(err))
	assert.Contains(t, err.Error(), fmt.Sprintf("dataset line 2: longer than %d bytes", maxRow))
}

// TestImportBadInput: rows that cannot become a job are configuration
// errors naming the row and the field, before any mirror is looked at.
func TestImportBadInput(t *testing.T) {
	opts := SWEBenchOptions{Repos: t.TempDir(), Agent: "claude"}
	row := `{"instance_id":"i","repo":"o/n","base_commit":"` + strings.Repeat("a", 40) + `","problem_statement":"p","FAIL_TO_PASS":["t"]}`
	for _, c := range []struct{ in, want string }{
		{"", "the dataset is empty"},
		{"\n\n" + strings.Replace(row, `"i"`, `""`, 1), "dataset line 3: no instance_id"},
		{strings.Replace(row, `"o/n"`, `"o/n/x"`, 1), `instance i: repo "o/n/x" is not owner/name`},
		{strings.Replace(row, strings.Repeat("a", 40), "main", 1), `base_commit "main" is not a full commit id`},
		{strings.Replace(row, `"p"`, `" "`, 1), "instance i: no problem_statement"},
		{`[{"instance_id": 5}]`, "dataset row 1: json: cannot unmarshal number"},
		{row, "instance i: no mirror of o/n"},
	} {
		_, err := ImportSWEBench(context.Background(), strings.NewReader(c.in), opts, func(Job) error { return nil })
		require.Error(t, err, c.in)
		assert.Equal(t, outposterr.Configuration, outposterr.ClassOf(err), "%v", err)
		assert.Contains(t, err.Error(), c.want)
	}
	_, err := ImportSWEBench(context.Background(), strings.NewReader(row), SWEBenchOptions{Repos: t.TempDir()}, nil)
	assert.ErrorContains(t, err, "no agent")
}

func TestShellQuote(t *testing.T) {
	assert.Equal(t, "tests/a.py::test_b", shellQuote("tests/a.py::test_b"))
	assert.Equal(t, `'t[a b]'`, shellQuote("t[a b]"))
	assert.Equal(t, `'it'\''s'`, shellQuote("it's"))
	assert.Equal(t, `''`, shellQuote(""))
}
