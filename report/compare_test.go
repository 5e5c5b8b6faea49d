package report_test

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/harness"
	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/report"
	"github.com/outpost-dev/outpost/runrec/runrectest"
)

const (
	pass = harness.VerdictPass
	fail = harness.VerdictFail
)

// twoRuns writes run A (before) and run B (after): t1 fixed, t2 broke, t3
// the same, t4 only in A, t5 only in B, two attempts each; A's jobs cost
// $0.10, B's $0.15.
func twoRuns(t *testing.T) (string, string) {
	t.Helper()
	write := func(name string, cost float64, verdicts map[string][2]harness.Verdict) string {
		dir := filepath.Join(t.TempDir(), name)
		var jobs []runrectest.Job
		for _, task := range []string{"t1", "t2", "t3", "t4", "t5"} {
			v, ok := verdicts[task]
			if !ok {
				continue
			}
			jobs = append(jobs, runrectest.GradedJob(task, 1, v[0], cost), runrectest.GradedJob(task, 2, v[1], cost))
		}
		require.NoError(t, runrectest.Write(dir, jobs))
		return dir
	}
	a := write("run-a", 0.10, map[string][2]harness.Verdict{"t1": {fail, fail}, "t2": {pass, pass}, "t3": {pass, fail}, "t4": {fail, fail}})
	b := write("run-b", 0.15, map[string][2]harness.Verdict{"t1": {pass, fail}, "t2": {fail, fail}, "t3": {pass, pass}, "t5": {pass, pass}})
	return a, b
}

func compare(t *testing.T) *report.Comparison {
	t.Helper()
	a, b := twoRuns(t)
	ra, err := report.Load(a)
	require.NoError(t, err)
	rb, err := report.Load(b)
	require.NoError(t, err)
	return report.Compare(ra, rb)
}

func TestCompare(t *testing.T) {
	c := compare(t)
	got := map[string]string{}
	var order []string
	for _, tc := range c.Tasks {
		got[tc.Task] = tc.Change
		order = append(order, tc.Task)
	}
	assert.Equal(t, map[string]string{"t1": "fixed", "t2": "broke", "t3": "same", "t4": "gone", "t5": "new"}, got)
	assert.Equal(t, []string{"t2", "t1", "t5", "t4", "t3"}, order, "changes first: broke, fixed, new, gone, then the same")
	assert.Equal(t, 2, c.K)
	assert.InDelta(t, 0.5, c.PassAtKA, 1e-9)
	assert.InDelta(t, 0.75, c.PassAtKB, 1e-9)

	out := render2(t, c, "table")
	assert.Contains(t, out, "Δ solved 3 → 5 (+2); pass@1 0.375 → 0.625 (+0.250); pass@2 0.500 → 0.750 (+0.250); cost $0.8000 → $1.2000 (+$0.4000, +50%)\n")
	assert.Contains(t, out, "tasks: 1 fixed, 1 broke, 1 same, 1 new, 1 gone\n")
	assert.Regexp(t, `(?m)^t2\s+broke\s+2/2\s+0/2\s+1\.000 → 0\.000 \(-1\.000\)\s+\$0\.2000 → \$0\.3000 \(\+\$0\.1000\)$`, out)
	assert.Regexp(t, `(?m)^t1\s+fixed\s+0/2\s+1/2\s+0\.000 → 0\.500 \(\+0\.500\)`, out)
	assert.Regexp(t, `(?m)^t5\s+new\s+—\s+2/2\s+—\s+\$0\.0000 → \$0\.3000`, out)

	md := render2(t, c, "markdown")
	assert.True(t, strings.HasPrefix(md, "## Outpost comparison\n\n- A "), md)
	assert.Contains(t, md, "| t2 | 🔴 broke | 2/2 | 0/2 | 1.000 → 0.000 (-1.000) | \\$0.2000 → \\$0.3000 (+\\$0.1000) |")
	rows := regexp.MustCompile(`(?m)^\| t\d `).FindAllString(md, -1)
	assert.Len(t, rows, 5)

	page := render2(t, c, "html")
	assert.NotContains(t, page, "<script")
	assert.Contains(t, page, "script-src &#39;none&#39;")
	assert.Contains(t, page, `<tr data-change="broke"><td>t2</td>`)
	assert.Contains(t, page, "pass@2 0.500 → 0.750 (&#43;0.250)")

	var b strings.Builder
	require.Error(t, c.Render(&b, "junit"), "junit is no comparison format")
}

func TestCompareCostDecrease(t *testing.T) {
	c := compare(t)
	swapped := report.Compare(c.B, c.A)
	out := render2(t, swapped, "table")
	assert.Contains(t, out, "cost $1.2000 → $0.8000 (-$0.4000, -33%)")
	assert.Contains(t, out, "tasks: 1 fixed, 1 broke, 1 same, 1 new, 1 gone")
}

func render2(t *testing.T, c *report.Comparison, format string) string {
	t.Helper()
	var b strings.Builder
	require.NoError(t, c.Render(&b, format))
	return b.String()
}

// TestRenderFormatNames: a report and a comparison take the same other
// names of their formats ("" is table, md is markdown) and refuse the
// formats they lack as configuration errors.
func TestRenderFormatNames(t *testing.T) {
	_, r := sample(t)
	c := compare(t)
	assert.Equal(t, render(t, r, "table"), render(t, r, ""))
	assert.Equal(t, render(t, r, "markdown"), render(t, r, "md"))
	assert.Equal(t, render2(t, c, "table"), render2(t, c, ""))
	assert.Equal(t, render2(t, c, "markdown"), render2(t, c, "md"))
	assert.NotEqual(t, render(t, r, "table"), render(t, r, "markdown"))
	for _, format := range []string{"pdf", "Table", "MD"} {
		var b strings.Builder
		assert.True(t, outposterr.Is(r.Render(&b, format), outposterr.Configuration), format)
		assert.True(t, outposterr.Is(c.Render(&b, format), outposterr.Configuration), format)
	}
}
