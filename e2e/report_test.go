package e2e

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/batch"
)

// TestBatchOutAndReport: a batch of 13 jobs across the real Claude Code,
// Codex and Copilot CLIs in Docker (ok, tool, quota then ok after a park,
// an outage retried to ok, and a turn that times out) recorded with --out;
// the directory holds a trajectory for every attempt, and outpost report
// renders it in all five formats: the JUnit parses with one testcase per
// job and the timeout as its error (no verifier: a failed run, not a test
// failure), the markdown has its totals row, the
// GitHub format annotates the failure, the HTML is one self-contained file.
func TestBatchOutAndReport(t *testing.T) {
	evalDocker(t)
	outpost := buildOutpost(t)
	ws := workspace(t)
	var jobs strings.Builder
	n := 0
	add := func(id, agent, prompt, extra string) {
		fmt.Fprintf(&jobs, `{"id":%q,"agent":%q,"prompt":%q,"workspace":%q%s}`+"\n", id, agent, prompt, ws, extra)
		n++
	}
	for _, a := range []string{"claude", "codex", "copilot"} {
		add(a+"-ok", a, "say MARK-ok-"+a, "")
		add(a+"-tool", a, "[[outpost:scenario=tool]] MARK-tool-"+a, "")
		add(a+"-quota", a, "[[outpost:scenario=quota;times=1]] MARK-quota-"+a, "")
		add(a+"-outage", a, "[[outpost:scenario=overloaded;times=1]] MARK-outage-"+a, "")
	}
	add("claude-timeout", "claude", "[[outpost:scenario=hang]] MARK-timeout", `,"timeout":"15s"`)
	dir := t.TempDir()
	jobsFile := filepath.Join(dir, "jobs.jsonl")
	require.NoError(t, os.WriteFile(jobsFile, []byte(jobs.String()), 0o600))
	out := filepath.Join(dir, "run")
	cmd := exec.Command(outpost, "batch", jobsFile, "--results", filepath.Join(dir, "results.jsonl"), "--offline",
		"--store", filepath.Join(dir, "store"), "--concurrency", "4", "--stub-quota-reset", "3s", "--max-park", "30s",
		"--max-retries", "1", "--out", out, "--allow-path", ws)
	cmd.Dir = dir
	b, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, string(b))
	assert.Equal(t, 6, exit.ExitCode(), "the one failure is a timeout: %s", b)

	recs := readRecords(t, filepath.Join(out, "results.jsonl"))
	require.Len(t, recs, n)
	attempts := 0
	for _, r := range recs {
		if r.Job == "claude-timeout" {
			assert.Equal(t, "timeout", string(r.Outcome.Class))
		} else {
			assert.True(t, r.Outcome.OK, "%s: %+v", r.Job, r.Outcome)
		}
		attempts += r.Turns
	}
	events, err := filepath.Glob(filepath.Join(out, "jobs", "*", "*", "events.jsonl"))
	require.NoError(t, err)
	assert.Len(t, events, attempts, "a trajectory for every attempt")
	for _, e := range events {
		fi, err := os.Stat(e)
		require.NoError(t, err)
		assert.Positive(t, fi.Size(), e)
	}

	input, err := os.ReadFile(filepath.Join(out, "jobs", "claude-ok", "input.json"))
	require.NoError(t, err)
	assert.Contains(t, string(input), `"prompt": "say MARK-ok-claude"`, "the run directory keeps each job's prompt")

	// The ATIF export begins each trajectory with the prompt its attempt
	// was sent: the job's, or the continue prompt of a turn resumed after
	// its park.
	atifDir := filepath.Join(dir, "atif")
	b, err = exec.Command(outpost, "report", out, "--atif", atifDir).CombinedOutput()
	require.NoError(t, err, string(b))
	firstStep := func(job string, attempt int) (source, message string) {
		t.Helper()
		raw, err := os.ReadFile(filepath.Join(atifDir, job, fmt.Sprint(attempt), "trajectory.json"))
		require.NoError(t, err)
		var doc struct {
			Steps []struct{ Source, Message string }
		}
		require.NoError(t, json.Unmarshal(raw, &doc))
		require.NotEmpty(t, doc.Steps, job)
		return doc.Steps[0].Source, doc.Steps[0].Message
	}
	src, msg := firstStep("claude-ok", 1)
	assert.Equal(t, "user", src)
	assert.Equal(t, "say MARK-ok-claude", msg)
	src, msg = firstStep("claude-quota", 1)
	assert.Equal(t, "user", src)
	assert.Equal(t, "[[outpost:scenario=quota;times=1]] MARK-quota-claude", msg)
	src, msg = firstStep("claude-quota", 2)
	assert.Equal(t, "user", src)
	assert.Equal(t, batch.DefaultContinuePrompt, msg, "the resumed turn was sent the continue prompt")

	report := func(format string) string {
		f := filepath.Join(dir, "report."+format)
		b, err := exec.Command(outpost, "report", out, "--format", format, "-o", f).CombinedOutput()
		require.NoError(t, err, string(b))
		text, err := os.ReadFile(f)
		require.NoError(t, err)
		return string(text)
	}
	table := report("table")
	assert.Contains(t, table, "claude-timeout")
	assert.True(t, strings.HasPrefix(table, "13 jobs, not graded (no verifier); runs: 12 ok, 1 failed"), table)
	assert.Contains(t, report("markdown"), "| **total** |")
	var suites struct {
		Tests  int `xml:"tests,attr"`
		Suites []struct {
			Cases []struct {
				Name    string    `xml:"name,attr"`
				Failure *struct{} `xml:"failure"`
				Error   *struct {
					Type    string `xml:"type,attr"`
					Message string `xml:"message,attr"`
				} `xml:"error"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	require.NoError(t, xml.Unmarshal([]byte(report("junit")), &suites))
	assert.Equal(t, n, suites.Tests)
	var failed []string
	cases := 0
	for _, s := range suites.Suites {
		for _, c := range s.Cases {
			cases++
			assert.Nil(t, c.Failure, "no verifier: nothing failed a test")
			if c.Error != nil {
				failed = append(failed, c.Name+" "+c.Error.Type+" "+c.Error.Message)
			}
		}
	}
	assert.Equal(t, n, cases)
	require.Len(t, failed, 1)
	assert.Contains(t, failed[0], "claude-timeout")
	assert.Contains(t, failed[0], "timeout")
	assert.Contains(t, report("github"), "::error")
	html := report("html")
	// The jobs' details are gzipped and base64-encoded JSON in the page.
	var details strings.Builder
	for _, m := range regexp.MustCompile(`<script type="application/json" class="outpost-details">"([A-Za-z0-9+/=]*)"</script>`).FindAllStringSubmatch(html, -1) {
		z, err := base64.StdEncoding.DecodeString(m[1])
		require.NoError(t, err)
		zr, err := gzip.NewReader(bytes.NewReader(z))
		require.NoError(t, err)
		b, err := io.ReadAll(zr)
		require.NoError(t, err)
		details.Write(b)
	}
	assert.Contains(t, details.String(), "MARK-tool-codex", "a job's conversation is in the page")
	assert.NotContains(t, html, "<script src=", "self-contained")
	raw, err := json.Marshal(recs)
	require.NoError(t, err)
	assert.NotContains(t, string(raw), "sk-ant-", "no credential in the results")
}
