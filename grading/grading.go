// Package grading grades a test run the way SWE-bench does: the output of
// a test command is parsed line by line into per-test outcomes, and an
// attempt is resolved exactly when every fail-to-pass test passed and every
// pass-to-pass test still passed.
//
// Two log formats are read ([Parser]):
//
//   - "pytest": the short test summary of pytest -rA ("PASSED
//     tests/test_a.py::test_x", "FAILED tests/test_a.py::test_y - msg") and
//     the verbose lines of pytest -v ("tests/test_a.py::test_x PASSED  [
//     50%]"), pytest-xdist's "[gw0] [ 50%] PASSED tests/…" included. A test
//     is named by its pytest node id, as pytest prints it. SWE-bench's own
//     parser cuts a name at its first space (a parametrized id such as
//     "test_x[a b]" becomes "test_x[a"); a listed name matches either form.
//   - "go-test-json": the events of go test -json, a test's "pass", "fail"
//     or "skip". A test is named as the event's Test field: "TestName", or
//     "TestName/sub" for a subtest (go test writes spaces in subtest names
//     as underscores). An unqualified name matches the test in every
//     package; "pkg/path.TestName" (the event's Package, a dot, its Test)
//     matches it in that package only.
//
// A test reported more than once (pytest -v and -rA together, go test
// -count=2, one name in several packages) takes its worst outcome: error,
// then failed, xpass, skipped, xfail, passed. A listed test the log does not
// report is "missing", which counts as failed. Only passed and xfail count as
// passing (as in SWE-bench): skipped, xpass, failed, error and missing do not.
//
// Memory is bounded: only the listed tests' outcomes are kept (at most
// [MaxTests] names of [MaxName] bytes), the others are counted by status,
// and a log line over [MaxLine] bytes is skipped.
package grading

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/outpost-dev/outpost/internal/lines"
)

// Bounds.
const (
	// MaxTests bounds the names of the two lists together.
	MaxTests = 20000
	// MaxName bounds one test name.
	MaxName = 4096
	// MaxLine bounds one log line read; a longer line is skipped.
	MaxLine = 1 << 20
)

// Status is a test's outcome.
type Status string

// Statuses.
const (
	Passed  Status = "passed"
	Failed  Status = "failed"
	Error   Status = "error"
	Skipped Status = "skipped"
	// XFail is an expected failure (pytest's xfail): it counts as passing.
	XFail Status = "xfail"
	// XPass is an unexpected pass of an xfail test: it does not count as
	// passing.
	XPass Status = "xpass"
	// Missing is a listed test the log did not report; it counts as failed.
	Missing Status = "missing"
)

// OK reports whether s counts as passing: passed or xfail.
func (s Status) OK() bool { return s == Passed || s == XFail }

// rank orders outcomes for a test reported more than once: the highest wins.
func (s Status) rank() int {
	switch s {
	case Passed:
		return 1
	case XFail:
		return 2
	case Skipped:
		return 3
	case XPass:
		return 4
	case Failed:
		return 5
	case Error:
		return 6
	}
	return 0
}

// Parser names a log format.
type Parser string

// Parsers.
const (
	Pytest     Parser = "pytest"
	GoTestJSON Parser = "go-test-json"
)

// Parsers lists the known parsers.
func Parsers() []Parser { return []Parser{Pytest, GoTestJSON} }

// Valid reports whether p is a known parser.
func (p Parser) Valid() bool { return p == Pytest || p == GoTestJSON }

// Outcome is one report of a test in a log: the names it goes by (the
// first is its own; the others are the forms a list may use for it) and
// its status.
type Outcome struct {
	Names  []string
	Status Status
}

// Line parses one log line (without its newline); ok is false for a line
// that reports no test outcome.
func (p Parser) Line(line []byte) (o Outcome, ok bool) {
	switch p {
	case Pytest:
		return pytestLine(line)
	case GoTestJSON:
		return goTestLine(line)
	}
	return Outcome{}, false
}

var pytestStatuses = map[string]Status{
	"PASSED": Passed, "FAILED": Failed, "ERROR": Error,
	"SKIPPED": Skipped, "XFAIL": XFail, "XPASS": XPass,
}

var (
	// xdistPrefix is pytest-xdist's "[gw0] [ 50%] " before a status.
	xdistPrefix = regexp.MustCompile(`^\[gw\d+\] \[ *\d+%\] `)
	// verboseLine is "NODEID STATUS" with anything after the status.
	verboseLine = regexp.MustCompile(`^(\S.*?::.*?) (PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)(?: .*)?$`)
	// ansi is a terminal colour sequence (pytest --color=yes).
	ansi = regexp.MustCompile("\x1b\\[[0-9;]*m")
)

func pytestLine(b []byte) (Outcome, bool) {
	if bytes.IndexByte(b, 0x1b) >= 0 {
		b = ansi.ReplaceAll(b, nil)
	}
	s := strings.TrimRight(string(b), " \r\t")
	s = xdistPrefix.ReplaceAllString(s, "")
	// The short test summary (-rA): "STATUS NODEID[ - message]".
	if word, rest, found := strings.Cut(s, " "); found {
		if st, known := pytestStatuses[word]; known {
			// "SKIPPED [1] tests/test_a.py:12: reason" names a location,
			// not a test.
			if rest == "" || rest[0] == '[' || rest[0] == ' ' {
				return Outcome{}, false
			}
			name := cutMessage(rest)
			first, _, _ := strings.Cut(name, " ")
			// Only a node id or a test file ("ERROR tests/test_a.py -
			// ImportError", a collection error), not a log record that
			// starts with ERROR.
			if !strings.Contains(name, "::") && !strings.HasSuffix(first, ".py") {
				return Outcome{}, false
			}
			return outcome(st, name, first), true
		}
	}
	// The verbose form (-v): "NODEID STATUS[ (reason)][  [ 50%]]".
	if m := verboseLine.FindStringSubmatch(s); m != nil {
		first, _, _ := strings.Cut(m[1], " ")
		return outcome(pytestStatuses[m[2]], m[1], first), true
	}
	return Outcome{}, false
}

// cutMessage is the node id of a short-summary line's rest: up to the
// first " - " outside the id's brackets, for a parametrized id may hold
// " - " itself ("test_sub[a - b] - AssertionError").
func cutMessage(rest string) string {
	depth := 0
	for i := 0; i < len(rest); i++ {
		switch rest[i] {
		case '[':
			depth++
		case ']':
			depth = max(depth-1, 0)
		case ' ':
			if depth == 0 && strings.HasPrefix(rest[i:], " - ") {
				return rest[:i]
			}
		}
	}
	if depth > 0 {
		// Unbalanced brackets: not an id's; cut at the first " - ".
		name, _, _ := strings.Cut(rest, " - ")
		return name
	}
	return rest
}

// outcome is an Outcome named name, then its other forms when they differ.
func outcome(st Status, name string, aliases ...string) Outcome {
	o := Outcome{Names: []string{name}, Status: st}
	for _, a := range aliases {
		if a != "" && a != name {
			o.Names = append(o.Names, a)
		}
	}
	return o
}

// goTestEvent is the part of a go test -json event read.
type goTestEvent struct {
	Action  string
	Package string
	Test    string
}

func goTestLine(b []byte) (Outcome, bool) {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || b[0] != '{' {
		return Outcome{}, false // go test writes build errors as text
	}
	var ev goTestEvent
	if json.Unmarshal(b, &ev) != nil || ev.Test == "" {
		return Outcome{}, false
	}
	var st Status
	switch ev.Action {
	case "pass":
		st = Passed
	case "fail":
		st = Failed
	case "skip":
		st = Skipped
	default:
		return Outcome{}, false
	}
	qualified := ""
	if ev.Package != "" {
		qualified = ev.Package + "." + ev.Test
	}
	return outcome(st, ev.Test, qualified), true
}

// Group is the list a test was named in.
type Group string

// Groups.
const (
	FailToPass Group = "fail_to_pass"
	PassToPass Group = "pass_to_pass"
)

// TestOutcome is a listed test's outcome.
type TestOutcome struct {
	Name   string `json:"name"`
	Group  Group  `json:"group"`
	Status Status `json:"status"`
}

// Count is how many of a list's tests passed.
type Count struct {
	Passed int `json:"passed"`
	Total  int `json:"total"`
}

// Report is a graded log: the listed tests' outcomes (fail-to-pass first,
// each list in its order), how many of each list passed, and the count of
// the other reports by status (a test reported twice counts twice).
type Report struct {
	Parser     Parser         `json:"parser"`
	FailToPass Count          `json:"fail_to_pass"`
	PassToPass Count          `json:"pass_to_pass"`
	Other      map[Status]int `json:"other,omitempty"`
	Tests      []TestOutcome  `json:"tests"`
}

// Resolved reports whether every listed test passed (SWE-bench's
// "resolved"): false when there is no listed test.
func (r *Report) Resolved() bool {
	return r.FailToPass.Total+r.PassToPass.Total > 0 &&
		r.FailToPass.Passed == r.FailToPass.Total && r.PassToPass.Passed == r.PassToPass.Total
}

// Grader tallies the outcomes of the listed tests in a log. Its methods
// are safe for concurrent use (stdout and stderr read at once).
type Grader struct {
	parser Parser
	mu     sync.Mutex
	index  map[string]int
	tests  []TestOutcome
	other  map[Status]int
}

// CheckLists checks a parser and its lists without making a Grader.
func CheckLists(p Parser, failToPass, passToPass []string) error {
	_, err := New(p, failToPass, passToPass)
	return err
}

// New returns a Grader of logs in p's format for the two lists. It fails
// on an unknown parser, no listed test, more than [MaxTests] names, an
// empty, over-long or non-UTF-8 name, a name with a line break, or a name
// listed twice.
func New(p Parser, failToPass, passToPass []string) (*Grader, error) {
	if !p.Valid() {
		return nil, fmt.Errorf("unknown parser %q: use %q or %q", p, Pytest, GoTestJSON)
	}
	n := len(failToPass) + len(passToPass)
	switch {
	case n == 0:
		return nil, errors.New("no test listed: give fail_to_pass or pass_to_pass")
	case n > MaxTests:
		return nil, fmt.Errorf("%d tests listed, over the bound of %d", n, MaxTests)
	}
	g := &Grader{parser: p, index: make(map[string]int, n), tests: make([]TestOutcome, 0, n), other: map[Status]int{}}
	for _, l := range []struct {
		g     Group
		names []string
	}{{FailToPass, failToPass}, {PassToPass, passToPass}} {
		for _, name := range l.names {
			switch {
			case strings.TrimSpace(name) == "":
				return nil, fmt.Errorf("%s: an empty test name", l.g)
			case len(name) > MaxName:
				return nil, fmt.Errorf("%s: a test name over %d bytes", l.g, MaxName)
			case !utf8.ValidString(name) || strings.ContainsAny(name, "\n\r\x00"):
				return nil, fmt.Errorf("%s: test name %q is not one line of text", l.g, name)
			}
			if i, dup := g.index[name]; dup {
				return nil, fmt.Errorf("%s: test %q is listed twice (also in %s)", l.g, name, g.tests[i].Group)
			}
			g.index[name] = len(g.tests)
			g.tests = append(g.tests, TestOutcome{Name: name, Group: l.g, Status: Missing})
		}
	}
	return g, nil
}

// Read parses r line by line to its end (lines over [MaxLine] are
// skipped) and records each outcome. It returns r's read error, after
// draining r so that a writer into a pipe is never blocked.
func (g *Grader) Read(r io.Reader) error {
	lr := lines.NewReader(r, MaxLine)
	for {
		line, oversized, err := lr.Next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			_, _ = io.Copy(io.Discard, r)
			return err
		}
		if oversized {
			continue
		}
		if o, ok := g.parser.Line(line); ok {
			g.Record(o)
		}
	}
}

// Record records one outcome: for each listed test it names, the worse of
// that test's outcomes so far and this one; when it names none, a count of
// its status among the other reports.
func (g *Grader) Record(o Outcome) {
	g.mu.Lock()
	defer g.mu.Unlock()
	listed := false
	for _, name := range o.Names {
		i, ok := g.index[name]
		if !ok {
			continue
		}
		listed = true
		if t := &g.tests[i]; o.Status.rank() > t.Status.rank() {
			t.Status = o.Status
		}
	}
	if !listed {
		g.other[o.Status]++
	}
}

// Report returns the outcomes so far.
func (g *Grader) Report() *Report {
	g.mu.Lock()
	defer g.mu.Unlock()
	r := &Report{Parser: g.parser, Tests: append([]TestOutcome(nil), g.tests...)}
	for _, t := range r.Tests {
		c := &r.FailToPass
		if t.Group == PassToPass {
			c = &r.PassToPass
		}
		c.Total++
		if t.Status.OK() {
			c.Passed++
		}
	}
	if len(g.other) > 0 {
		r.Other = make(map[Status]int, len(g.other))
		for s, n := range g.other {
			r.Other[s] = n
		}
	}
	return r
}
