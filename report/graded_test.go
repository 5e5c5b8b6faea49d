package report_test

import (
	"encoding/xml"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/report"
)

func TestGradedTotalsAndScores(t *testing.T) {
	_, r := graded(t)
	tt := r.Totals
	assert.Equal(t, 7, tt.Graded)
	assert.Equal(t, 3, tt.Solved)
	assert.Equal(t, 3, tt.VerdictFail)
	assert.Equal(t, 1, tt.VerdictError)
	assert.Equal(t, 8, tt.NotGraded)
	s := r.Scores
	assert.InDelta(t, 0.5, s.PassAt1, 1e-9, "mean of the tasks' pass@1: readme ½, parser ½, refactor-api 1, bad-login 0")
	require.Len(t, s.Tasks, 5)
	byTask := map[string]int{}
	for i, ts := range s.Tasks {
		byTask[ts.Task] = i
	}
	readme := s.Tasks[byTask["readme"]]
	assert.Equal(t, 2, readme.N)
	assert.Equal(t, 1, readme.C)
	assert.InDelta(t, 1.0, readme.PassAtN, 1e-9)
	assert.Equal(t, 1, s.Tasks[byTask["bump-deps"]].Errors)
	assert.Equal(t, "solved 3 of 7 graded jobs (3 failed, 1 verifier errors; 8 not graded); pass@1 0.500 over 5 tasks; mean reward 0.417 ± 0.201; runs: 11 ok, 4 failed",
		r.Headline())
	for _, j := range r.Jobs {
		if j.ID == "fix-readme" {
			assert.Equal(t, "Fix the README typos", j.Prompt, "the run directory kept the prompt")
			assert.Equal(t, "readme", j.Task)
		}
	}
}

func TestGradedTableAndMarkdown(t *testing.T) {
	_, r := graded(t)
	out := render(t, r, "table")
	assert.True(t, strings.HasPrefix(out, "solved 3 of 7 graded jobs"), out[:80])
	assert.Regexp(t, `(?m)^TASK\s+GRADED\s+PASSED\s+ERRORS\s+PASS@1\s+PASS@N\s+REWARD$`, out)
	assert.Regexp(t, `(?m)^readme\s+2\s+1\s+0\s+0\.500\s+pass@2 1\.000\s+0\.500 ± 0\.500$`, out)
	assert.Regexp(t, `(?m)^TOTAL\s+3 of 7 solved`, out)

	md := render(t, r, "markdown")
	assert.True(t, strings.HasPrefix(md, "## Outpost report\n\n**solved 3 of 7 graded jobs"), md[:80])
	assert.Contains(t, md, "\n### Tasks\n")
	assert.Contains(t, md, "| readme | 2 | 1 | 0 | 0.500 | pass@2 1.000 | 0.500 ± 0.500 |")
	assert.Contains(t, md, "| bump-deps | 0 | 0 | 1 | — | — | — |")
	assert.Contains(t, md, "| add-tests | claude | ❌ fail | 0 |")
	assert.Contains(t, md, "| fix-readme | claude | ✅ pass | 1 |")
	assert.Contains(t, md, "| migrate-db | claude | ➖ not graded | — |")
}

func TestGradedJUnit(t *testing.T) {
	_, r := graded(t)
	var doc junitTestsuites
	dec := xml.NewDecoder(strings.NewReader(render(t, r, "junit")))
	dec.Strict = true
	require.NoError(t, dec.Decode(&doc))
	assert.Equal(t, 3, doc.Failures, "the verifier's fails")
	assert.Equal(t, 4, doc.Errors, "a verifier error and three failed runs without a verdict")
	s := doc.Suites[0]
	require.NotEmpty(t, s.Properties)
	assert.Equal(t, "summary", s.Properties[0].Name)
	assert.True(t, strings.HasPrefix(s.Properties[0].Value, "solved 3 of 7"))
	cases := map[string]int{}
	for i, c := range s.Cases {
		cases[c.Name] = i
	}
	prop := func(name, key string) string {
		for _, p := range s.Cases[cases[name]].Properties {
			if p.Name == key {
				return p.Value
			}
		}
		return ""
	}
	add := s.Cases[cases["add-tests"]]
	require.NotNil(t, add.Failure)
	assert.Equal(t, "verdict", add.Failure.Type)
	assert.Contains(t, add.Failure.Body, "tests/test_parser.py:42: AssertionError")
	assert.Nil(t, add.Error)
	bump := s.Cases[cases["bump-deps"]]
	require.NotNil(t, bump.Error)
	assert.Equal(t, "verifier", bump.Error.Type)
	assert.Contains(t, bump.Error.Message, "no capacity")
	assert.Nil(t, bump.Failure)
	mig := s.Cases[cases["migrate-db"]]
	assert.Nil(t, mig.Failure, "not graded: neither failure")
	assert.Nil(t, mig.Error, "nor error")
	assert.Equal(t, "not graded", prop("migrate-db", "verdict"))
	assert.Equal(t, "pass", prop("fix-readme", "verdict"))
	assert.Equal(t, "1", prop("fix-readme", "reward"))
	assert.Equal(t, "readme", prop("fix-readme", "task"))
	assert.Equal(t, "1", prop("fix-readme", "trial"))
	hung := s.Cases[cases["hung-turn"]]
	require.NotNil(t, hung.Error, "a failed run without a verdict is an error")
	assert.Equal(t, "timeout", hung.Error.Type)
}

func TestGradedGitHubAnnotations(t *testing.T) {
	_, r := graded(t)
	out := render(t, r, "github")
	title := "title=outpost job add-tests (claude)::verdict fail (reward 0)"
	assert.Contains(t, out, "::error file=tests/test_parser.py,line=42,"+title+"; a test failed here\n", "the failing pytest line")
	assert.Contains(t, out, "::error file=parser/parse.py,line=12,"+title+"; this file was changed by the job's patch\n", "the patch's first hunk, new-file line")
	assert.Contains(t, out, "::error file=tests/test_new.py,line=1,"+title)
	assert.Contains(t, out, "::error file=readme_test.go,line=17,title=outpost job retry-overload (claude)::verdict fail", "go test's failing line")
	assert.Contains(t, out, "::error file=README.md,line=9,title=outpost job retry-overload (claude)::")
	assert.Contains(t, out, "::error title=outpost job bump-deps (codex)::verifier error (not graded): acquire the verifier's sandbox: no capacity\n")
	assert.Contains(t, out, "::error title=outpost job bad-login (claude)::verdict fail (reward 0): the attempt's patch does not apply")
	assert.Contains(t, out, "::notice title=outpost report::solved 3 of 7 graded jobs")
	assert.NotContains(t, out, "fix-readme", "a passed job without retries needs no annotation")
}

func TestLocations(t *testing.T) {
	diff := "diff --git a/a.go b/a.go\n--- a/a.go\n+++ b/a.go\n@@ -1,3 +4,5 @@ func\n x\n@@ -20 +30 @@\n" +
		"--- a/gone.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-x\n" +
		"--- a/../../etc/passwd\n+++ b/../../etc/passwd\n@@ -1 +1 @@\n" +
		"--- /dev/null\n+++ b/new/file.py\t2026-01-01\n@@ -0,0 +1,2 @@\n+a\n" +
		"+++ b/bin.dat\nBinary files differ\n"
	assert.Equal(t, []report.Location{{File: "a.go", Line: 4}, {File: "new/file.py", Line: 1}, {File: "bin.dat"}}, report.PatchLocations(diff, 5),
		"first hunk per file; deleted files and paths leaving the repository left out")
	assert.Len(t, report.PatchLocations(diff, 1), 1)

	out := "src/pkg/x_test.py:10: in test_a\n/abs/path.py:3: boom\n../up.py:4: x\nsrc/pkg/x_test.py:99: again\n" +
		"--- FAIL: TestB\n    b_test.go:7: got 1\n    b_test.go:8: got 2\nnot_at_start tests/c.py:5: x\n"
	changed := []report.Location{{File: "pkg/b/b_test.go", Line: 1}}
	assert.Equal(t, []report.Location{{File: "src/pkg/x_test.py", Line: 10, Test: true}, {File: "pkg/b/b_test.go", Line: 7, Test: true}},
		report.TestLocations(out, changed, 5), "first per file; go test base names resolved by the patch; absolute and escaping paths refused")
}
