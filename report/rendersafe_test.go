package report_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/batch"
	"github.com/outpost-dev/outpost/harness"
	"github.com/outpost-dev/outpost/report"
)

// resultsReport loads a results file holding recs.
func resultsReport(t *testing.T, recs []batch.Record) *report.Report {
	t.Helper()
	var b bytes.Buffer
	for _, r := range recs {
		line, err := json.Marshal(r)
		require.NoError(t, err)
		b.Write(append(line, '\n'))
	}
	p := filepath.Join(t.TempDir(), "results.jsonl")
	require.NoError(t, os.WriteFile(p, b.Bytes(), 0o644))
	r, err := report.Load(p)
	require.NoError(t, err)
	return r
}

// TestMarkdownMentionsInert: GitHub finds @-mentions in the rendered text,
// after Markdown has turned character references back into characters
// (github/cmark-gfm#181: "&#64;github" still mentions @github). A job id,
// task or agent name in the step summary or the pull-request comment must
// not ping anyone.
func TestMarkdownMentionsInert(t *testing.T) {
	r := resultsReport(t, []batch.Record{{Job: "ping @octocat", Task: "cc @acme/security-team", Agent: "@ghost",
		Outcome: harness.Outcome{OK: true}, Verdict: harness.VerdictPass}})
	out := render(t, r, "markdown")
	// GitHub's mention pattern: @ after a non-word character, then a name.
	assert.NotRegexp(t, regexp.MustCompile(`(^|\W)@[A-Za-z0-9]`), html.UnescapeString(out),
		"a mention survives as GitHub renders it: %s", out)
	assert.Contains(t, out, "octocat", "the text is kept, only inert")
	// An @ inside a word mentions no one and is kept as it is.
	r = resultsReport(t, []batch.Record{{Job: "mail dev@example.com pass@1",
		Outcome: harness.Outcome{OK: true}, Verdict: harness.VerdictPass}})
	assert.Contains(t, render(t, r, "markdown"), `dev@example.com pass@1`)
}

// TestMarkdownFitsStepSummary: GitHub drops a step summary over 1 MiB
// whole ("upload aborted"); a large batch's Markdown must stay under it and
// keep its totals row.
func TestMarkdownFitsStepSummary(t *testing.T) {
	recs := make([]batch.Record, 12000)
	for i := range recs {
		recs[i] = batch.Record{Job: fmt.Sprintf("django__django-%05d-trial-%d", i/5, i%5+1), Task: fmt.Sprintf("django__django-%05d", i/5),
			Trial: i%5 + 1, Agent: "claude", Outcome: harness.Outcome{OK: true}, Verdict: harness.VerdictPass}
	}
	r := resultsReport(t, recs)
	out := render(t, r, "markdown")
	assert.LessOrEqual(t, len(out)+1, 1<<20, "GitHub's step summary limit") // ci github appends a newline
	assert.Contains(t, out, "| **total** |")
	assert.Contains(t, out, "more jobs are in the HTML report")
}

// TestNoC1ControlsReachATerminal: C1 controls (U+0080–U+009F; U+009B is the
// 8-bit CSI, U+009D the OSC) in an agent's answer, its verifier's output or
// a changed file's name act on a terminal that `outpost report --format
// junit|github` prints to, like ESC would.
func TestNoC1ControlsReachATerminal(t *testing.T) {
	csi := "\u009b2J\u009d0;pwned\u0007"
	r := resultsReport(t, []batch.Record{
		{Job: "answer", Agent: "claude", Outcome: harness.Outcome{OK: true, Text: "done " + csi}},
		{Job: "failed", Agent: "claude", Outcome: harness.Outcome{OK: true}, Verdict: harness.VerdictFail,
			Verify: &harness.Verification{Output: "FAILED " + csi, Error: "tests failed " + csi},
			Patch:  &batch.PatchRecord{Files: []string{"x\u009b2J.py", "evil\u202egnp.py"}}},
	})
	for _, format := range []string{"junit", "github"} {
		out := render(t, r, format)
		assert.NotRegexp(t, regexp.MustCompile("[\u0080-\u009f\u202a-\u202e\u2066-\u2069]"), out, "%s: %q", format, out)
	}
}
