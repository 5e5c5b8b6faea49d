package cli

import (
	"encoding/json"
	"encoding/xml"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/harness"
	"github.com/outpost-dev/outpost/runrec/runrectest"
)

func TestReportCommand(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	_, err := runrectest.Sample(dir, os.DirFS("../.."), runrectest.Options{})
	require.NoError(t, err)

	out := execute(t, "", nil, "report", dir)
	require.Equal(t, 0, out.code, out.stderr)
	assert.Contains(t, out.stdout, "TOTAL")

	out = execute(t, "", nil, "report", filepath.Join(dir, "results.jsonl"), "--format", "markdown")
	require.Equal(t, 0, out.code, out.stderr)
	assert.Contains(t, out.stdout, "| **total** |")

	junit := filepath.Join(t.TempDir(), "junit.xml")
	out = execute(t, "", nil, "report", dir, "--format", "junit", "-o", junit)
	require.Equal(t, 0, out.code, out.stderr)
	assert.Empty(t, out.stdout)
	b, err := os.ReadFile(junit)
	require.NoError(t, err)
	var doc struct {
		Tests int `xml:"tests,attr"`
	}
	require.NoError(t, xml.Unmarshal(b, &doc))
	assert.Equal(t, 14, doc.Tests)

	out = execute(t, "", nil, "report", dir, "--format", "pdf")
	assert.Equal(t, int(ExitConfiguration), out.code)
	assert.Contains(t, out.stderr, "want one of table, markdown, html, junit, github")

	bad := filepath.Join(t.TempDir(), "r.jsonl")
	require.NoError(t, os.WriteFile(bad, []byte("{\"job\":\"a\"}\nnope\n{\"job\":\"b\"}\n"), 0o600))
	out = execute(t, "", nil, "report", bad)
	assert.Equal(t, int(ExitConfiguration), out.code)
	assert.True(t, strings.Contains(out.stderr, "line 2"), out.stderr)

	out = execute(t, "", nil, "report")
	assert.Equal(t, int(ExitConfiguration), out.code)
}

// TestReportATIF: report --atif writes one ATIF v1.7 trajectory per
// attempt of a run directory, and refuses a results file or a report flag.
func TestReportATIF(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	_, err := runrectest.Sample(dir, os.DirFS("../.."), runrectest.Options{})
	require.NoError(t, err)
	outDir := filepath.Join(t.TempDir(), "atif")
	out := execute(t, "", nil, "report", dir, "--atif", outDir)
	require.Equal(t, 0, out.code, out.stderr)
	assert.Empty(t, out.stdout)
	assert.Contains(t, out.stderr, "trajectories (ATIF-v1.7) of 14 jobs to "+outDir)
	files, err := filepath.Glob(filepath.Join(outDir, "*", "*", "trajectory.json"))
	require.NoError(t, err)
	assert.Contains(t, out.stderr, "wrote "+strconv.Itoa(len(files))+" trajectories")
	assert.Greater(t, len(files), 14, "every attempt, retries and parks included")
	b, err := os.ReadFile(filepath.Join(outDir, "add-tests", "1", "trajectory.json"))
	require.NoError(t, err)
	var doc struct {
		SchemaVersion string `json:"schema_version"`
		Agent         struct{ Name string }
		Steps         []struct {
			Source    string
			Message   string
			ToolCalls []json.RawMessage `json:"tool_calls"`
		}
	}
	require.NoError(t, json.Unmarshal(b, &doc))
	assert.Equal(t, "ATIF-v1.7", doc.SchemaVersion)
	assert.Equal(t, "claude", doc.Agent.Name)
	require.NotEmpty(t, doc.Steps)
	assert.Equal(t, "user", doc.Steps[0].Source, "the prompt comes first")
	assert.Equal(t, "Add tests for the parser", doc.Steps[0].Message)

	out = execute(t, "", nil, "report", filepath.Join(dir, "results.jsonl"), "--atif", outDir)
	assert.Equal(t, int(ExitConfiguration), out.code)
	assert.Contains(t, out.stderr, "not a run directory")
	out = execute(t, "", nil, "report", dir, "--atif", outDir, "--format", "html")
	assert.Equal(t, int(ExitConfiguration), out.code)
	assert.Contains(t, out.stderr, "--atif exports trajectories, not a report")
}

func TestReportCompare(t *testing.T) {
	a, b := filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
	require.NoError(t, runrectest.Write(a, []runrectest.Job{runrectest.GradedJob("t1", 1, harness.VerdictFail, 0.1),
		runrectest.GradedJob("t2", 1, harness.VerdictPass, 0.1)}))
	require.NoError(t, runrectest.Write(b, []runrectest.Job{runrectest.GradedJob("t1", 1, harness.VerdictPass, 0.2),
		runrectest.GradedJob("t2", 1, harness.VerdictPass, 0.2)}))

	out := execute(t, "", nil, "report", "--compare", a, b)
	require.Equal(t, 0, out.code, out.stderr)
	assert.Contains(t, out.stdout, "Δ solved 1 → 2 (+1); pass@1 0.500 → 1.000 (+0.500); cost $0.2000 → $0.4000 (+$0.2000, +100%)")
	assert.Contains(t, out.stdout, "tasks: 1 fixed, 1 same")

	page := filepath.Join(t.TempDir(), "compare.html")
	out = execute(t, "", nil, "report", "--compare", a, b, "--format", "html", "-o", page)
	require.Equal(t, 0, out.code, out.stderr)
	html, err := os.ReadFile(page)
	require.NoError(t, err)
	assert.Contains(t, string(html), `<tr data-change="fixed"><td>t1</td>`)

	out = execute(t, "", nil, "report", "--compare", a, b, "--format", "markdown")
	require.Equal(t, 0, out.code, out.stderr)
	assert.Contains(t, out.stdout, "| t1 | 🟢 fixed |")

	out = execute(t, "", nil, "report", "--compare", a)
	assert.Equal(t, int(ExitConfiguration), out.code)
	assert.Contains(t, out.stderr, "--compare takes two runs")
	out = execute(t, "", nil, "report", "--compare", a, b, "--format", "junit")
	assert.Equal(t, int(ExitConfiguration), out.code)
	assert.Contains(t, out.stderr, "want one of table, markdown, html")
	out = execute(t, "", nil, "report", a, b)
	assert.Equal(t, int(ExitConfiguration), out.code, "two runs need --compare")
}
