package grading

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// parseAll returns name → worst status of every test a fixture log reports
// under its own name.
func parseAll(t *testing.T, p Parser, file string) map[string]Status {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", file))
	require.NoError(t, err)
	got := map[string]Status{}
	for _, l := range strings.Split(string(b), "\n") {
		if o, ok := p.Line([]byte(l)); ok {
			if cur, seen := got[o.Names[0]]; !seen || o.Status.rank() > cur.rank() {
				got[o.Names[0]] = o.Status
			}
		}
	}
	return got
}

func TestPytestVerboseAndSummary(t *testing.T) {
	got := parseAll(t, Pytest, "pytest-rA-v.txt")
	assert.Equal(t, map[string]Status{
		"tests/test_calc.py::test_add":               Passed,
		"tests/test_calc.py::test_sub":               Failed,
		"tests/test_calc.py::test_skip":              Skipped, // from the verbose line; the summary names a location
		"tests/test_calc.py::test_expected":          XFail,
		"tests/test_calc.py::test_lucky":             XPass,
		"tests/test_calc.py::test_param[1-2]":        Passed,
		"tests/test_calc.py::test_param[a b-c]":      Passed,
		"tests/test_calc.py::test_fixture":           Error,
		"tests/test_calc.py::TestClass::test_method": Passed,
	}, got, "the captured log record \"ERROR    tests.test_calc:…\" is no test")
}

func TestPytestSummaryOnly(t *testing.T) {
	got := parseAll(t, Pytest, "pytest-rA.txt")
	assert.Equal(t, map[string]Status{
		"tests/test_app.py::test_add":            Passed,
		"tests/test_app.py::test_divide":         Passed,
		"tests/test_app.py::TestParse::test_int": Passed,
		"tests/test_app.py::test_divide_zero":    Failed,
		"tests/test_broken.py":                   Error, // a collection error
	}, got, "progress lines (\"tests/test_app.py ..F.\") report no test")
}

func TestPytestXdist(t *testing.T) {
	got := parseAll(t, Pytest, "pytest-xdist.txt")
	assert.Equal(t, map[string]Status{
		"tests/test_calc.py::test_add": Passed,
		"tests/test_calc.py::test_sub": Failed,
		"tests/test_calc.py::test_mul": Passed,
	}, got)
}

func TestPytestLines(t *testing.T) {
	for line, want := range map[string]*Outcome{
		"PASSED tests/a.py::test_x":                            {Names: []string{"tests/a.py::test_x"}, Status: Passed},
		"FAILED tests/a.py::test_y - AssertionError: 1 != 2":   {Names: []string{"tests/a.py::test_y"}, Status: Failed},
		"FAILED tests/a.py::test_p[a b] - assert 0":            {Names: []string{"tests/a.py::test_p[a b]", "tests/a.py::test_p[a"}, Status: Failed},
		"\x1b[32mPASSED\x1b[0m tests/a.py::test_x":             {Names: []string{"tests/a.py::test_x"}, Status: Passed},
		"tests/a.py::test_x PASSED\r":                          {Names: []string{"tests/a.py::test_x"}, Status: Passed},
		"tests/a.py::test_x SKIPPED (no db)  [ 10%]":           {Names: []string{"tests/a.py::test_x"}, Status: Skipped},
		"ERROR    root:app.py:12 something broke":              nil,
		"ERROR tests/a.py::test_z":                             {Names: []string{"tests/a.py::test_z"}, Status: Error},
		"SKIPPED [2] tests/a.py:4: later":                      nil,
		"PASSED":                                               nil,
		"tests/a.py .F.                                [100%]": nil,
		"FAILED some words that are not a test":                nil,
	} {
		o, ok := Pytest.Line([]byte(line))
		if want == nil {
			assert.False(t, ok, "%q: %+v", line, o)
			continue
		}
		assert.True(t, ok, line)
		assert.Equal(t, *want, o, line)
	}
}

func TestGoTestJSON(t *testing.T) {
	got := parseAll(t, GoTestJSON, "gotest.json")
	assert.Equal(t, map[string]Status{
		"TestAdd":                Passed, // in both packages
		"TestBroken":             Failed,
		"TestSkipped":            Skipped,
		"TestTable/one_plus_one": Passed,
		"TestTable/bad_case":     Failed,
		"TestTable":              Failed,
	}, got, "package events (no Test) are no test")
	assert.Empty(t, parseAll(t, GoTestJSON, "gotest-build-failed.json"), "a build failure reports no test")

	o, ok := GoTestJSON.Line([]byte(`{"Action":"pass","Package":"example.com/calc/sub","Test":"TestAdd","Elapsed":0}`))
	require.True(t, ok)
	assert.Equal(t, []string{"TestAdd", "example.com/calc/sub.TestAdd"}, o.Names)
	for _, l := range []string{`{"Action":"run","Package":"p","Test":"TestA"}`, `{"Action":"output","Package":"p","Test":"TestA","Output":"--- PASS: TestA\n"}`, `--- PASS: TestA (0.00s)`, `{not json`} {
		_, ok := GoTestJSON.Line([]byte(l))
		assert.False(t, ok, l)
	}
}

func grade(t *testing.T, p Parser, file string, f2p, p2p []string) *Report {
	t.Helper()
	g, err := New(p, f2p, p2p)
	require.NoError(t, err)
	f, err := os.Open(filepath.Join("testdata", file))
	require.NoError(t, err)
	defer f.Close()
	require.NoError(t, g.Read(f))
	return g.Report()
}

func TestGraderResolved(t *testing.T) {
	r := grade(t, GoTestJSON, "gotest.json", []string{"TestTable/one_plus_one"}, []string{"example.com/calc.TestAdd", "example.com/calc/sub.TestAdd"})
	assert.True(t, r.Resolved(), "%+v", r)
	assert.Equal(t, Count{Passed: 1, Total: 1}, r.FailToPass)
	assert.Equal(t, Count{Passed: 2, Total: 2}, r.PassToPass)
	assert.Equal(t, map[Status]int{Failed: 3, Skipped: 1}, r.Other)
	assert.Equal(t, []TestOutcome{
		{Name: "TestTable/one_plus_one", Group: FailToPass, Status: Passed},
		{Name: "example.com/calc.TestAdd", Group: PassToPass, Status: Passed},
		{Name: "example.com/calc/sub.TestAdd", Group: PassToPass, Status: Passed},
	}, r.Tests)

	for name, c := range map[string]struct{ f2p, p2p []string }{
		"a fail-to-pass test fails":      {[]string{"TestTable/bad_case"}, []string{"TestAdd"}},
		"a pass-to-pass test breaks":     {[]string{"TestAdd"}, []string{"TestBroken"}},
		"a skipped test is no pass":      {[]string{"TestSkipped"}, nil},
		"a missing test is a failure":    {[]string{"TestAdd"}, []string{"TestGone"}},
		"a parent fails with its child":  {nil, []string{"TestTable"}},
		"qualified in the wrong package": {[]string{"example.com/calc/sub.TestBroken"}, nil},
	} {
		r := grade(t, GoTestJSON, "gotest.json", c.f2p, c.p2p)
		assert.False(t, r.Resolved(), name)
	}
	r = grade(t, GoTestJSON, "gotest.json", []string{"TestGone"}, nil)
	assert.Equal(t, Missing, r.Tests[0].Status)

	r = grade(t, GoTestJSON, "gotest-build-failed.json", []string{"TestX"}, nil)
	assert.False(t, r.Resolved())
	assert.Equal(t, Missing, r.Tests[0].Status)

	r = grade(t, Pytest, "pytest-rA-v.txt", []string{"tests/test_calc.py::test_param[a b-c]", "tests/test_calc.py::test_expected"},
		[]string{"tests/test_calc.py::test_add", "tests/test_calc.py::TestClass::test_method"})
	assert.True(t, r.Resolved(), "xfail counts as passing: %+v", r)
	r = grade(t, Pytest, "pytest-rA-v.txt", []string{"tests/test_calc.py::test_param[a"}, nil)
	assert.True(t, r.Resolved(), "SWE-bench's cut name matches: %+v", r)
	for _, bad := range []string{"tests/test_calc.py::test_lucky", "tests/test_calc.py::test_fixture", "tests/test_calc.py::test_skip", "tests/test_calc.py::test_sub"} {
		r := grade(t, Pytest, "pytest-rA-v.txt", []string{"tests/test_calc.py::test_add"}, []string{bad})
		assert.False(t, r.Resolved(), bad)
	}
}

// TestGraderWorstWins: a test reported passed and then failed (a teardown
// error after its call passed) is not a pass, whatever the order.
func TestGraderWorstWins(t *testing.T) {
	for _, log := range []string{
		"tests/a.py::test_x PASSED\nERROR tests/a.py::test_x - teardown\n",
		"ERROR tests/a.py::test_x - teardown\ntests/a.py::test_x PASSED\n",
	} {
		g, err := New(Pytest, []string{"tests/a.py::test_x"}, nil)
		require.NoError(t, err)
		require.NoError(t, g.Read(strings.NewReader(log)))
		assert.Equal(t, Error, g.Report().Tests[0].Status)
	}
}

// TestGraderLongLines: a line over MaxLine is skipped, and the lines after
// it still count.
func TestGraderLongLines(t *testing.T) {
	g, err := New(Pytest, []string{"tests/a.py::test_x"}, nil)
	require.NoError(t, err)
	log := "PASSED tests/a.py::" + strings.Repeat("x", MaxLine+10) + "\nPASSED tests/a.py::test_x\n"
	require.NoError(t, g.Read(strings.NewReader(log)))
	assert.True(t, g.Report().Resolved())
}

func TestNewChecksLists(t *testing.T) {
	for want, c := range map[string]struct {
		p        Parser
		f2p, p2p []string
	}{
		`unknown parser "junit"`:                     {"junit", []string{"a"}, nil},
		"no test listed":                             {Pytest, nil, []string{}},
		"an empty test name":                         {Pytest, []string{" "}, nil},
		`"a" is listed twice (also in fail_to_pass)`: {Pytest, []string{"a"}, []string{"a"}},
		"not one line of text":                       {Pytest, []string{"a\nb"}, nil},
		"over 4096 bytes":                            {Pytest, []string{strings.Repeat("a", MaxName+1)}, nil},
		"over the bound of 20000":                    {GoTestJSON, make([]string, MaxTests+1), nil},
	} {
		_, err := New(c.p, c.f2p, c.p2p)
		require.Error(t, err, want)
		assert.Contains(t, err.Error(), want)
	}
}

func TestReportJSON(t *testing.T) {
	g, err := New(GoTestJSON, []string{"TestA"}, []string{"TestB"})
	require.NoError(t, err)
	require.NoError(t, g.Read(strings.NewReader(`{"Action":"pass","Package":"p","Test":"TestA"}`+"\n"+`{"Action":"pass","Package":"p","Test":"TestC"}`)))
	b, err := json.Marshal(g.Report())
	require.NoError(t, err)
	assert.JSONEq(t, `{"parser":"go-test-json","fail_to_pass":{"passed":1,"total":1},"pass_to_pass":{"passed":0,"total":1},
		"other":{"passed":1},"tests":[{"name":"TestA","group":"fail_to_pass","status":"passed"},{"name":"TestB","group":"pass_to_pass","status":"missing"}]}`, string(b))
}

// flakyReader fails once, then has more to read.
type flakyReader struct{ calls int }

func (f *flakyReader) Read(p []byte) (int, error) {
	f.calls++
	switch f.calls {
	case 1:
		return copy(p, "PASSED a.py::t\n"), nil
	case 2:
		return 0, io.ErrUnexpectedEOF
	case 3:
		return copy(p, "more\n"), nil
	}
	return 0, io.EOF
}

// TestReadDrains: Read returns its reader's error after draining it, so a
// pipe's writer is never left blocked.
func TestReadDrains(t *testing.T) {
	g, err := New(Pytest, []string{"a.py::t"}, nil)
	require.NoError(t, err)
	r := &flakyReader{}
	require.ErrorIs(t, g.Read(r), io.ErrUnexpectedEOF)
	assert.Equal(t, 4, r.calls, "read to its end")
	assert.True(t, g.Report().Resolved(), "the lines before the error count")
}
