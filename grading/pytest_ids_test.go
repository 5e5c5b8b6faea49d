package grading

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPytestSummaryIDWithDash: pytest names a test parametrized with a
// string by that string ("test_sub[a - b]"), and its -rA summary prints
// the node id whole ("PASSED tests/a.py::test_sub[a - b]"; a message, when
// there is one, after " - " once the id's brackets closed). The node id as
// pytest prints it is a listed name that must match.
func TestPytestSummaryIDWithDash(t *testing.T) {
	g, err := New(Pytest, []string{"tests/a.py::test_sub[a - b]"}, []string{"tests/a.py::test_neg[0 - 1]"})
	require.NoError(t, err)
	require.NoError(t, g.Read(strings.NewReader("PASSED tests/a.py::test_sub[a - b]\n"+
		"FAILED tests/a.py::test_neg[0 - 1] - assert 0 - 1\n")))
	r := g.Report()
	require.Len(t, r.Tests, 2)
	assert.Equal(t, Passed, r.Tests[0].Status, "the passed test is found, not missing")
	assert.Equal(t, Failed, r.Tests[1].Status, "the failed test is found, not missing")

	// SWE-bench's form (cut at the first space) still matches, and a
	// message is still cut off.
	o, ok := Pytest.Line([]byte("FAILED tests/a.py::test_sub[a - b] - AssertionError: x - y"))
	require.True(t, ok)
	assert.Equal(t, []string{"tests/a.py::test_sub[a - b]", "tests/a.py::test_sub[a"}, o.Names)
}
