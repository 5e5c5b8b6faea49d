package report_test

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"encoding/xml"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/harness"
	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/report"
	"github.com/outpost-dev/outpost/runrec"
	"github.com/outpost-dev/outpost/runrec/runrectest"
)

// sample builds the sample run directory (hostile job included) once per test.
func sample(t *testing.T) (string, *report.Report) {
	t.Helper()
	return sampleWith(t, runrectest.Options{Hostile: true})
}

// graded builds the sample with verdicts (runrectest.Grades).
func graded(t *testing.T) (string, *report.Report) {
	t.Helper()
	return sampleWith(t, runrectest.Options{Hostile: true, Graded: true})
}

func sampleWith(t *testing.T, o runrectest.Options) (string, *report.Report) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "run")
	_, err := runrectest.Sample(dir, os.DirFS(".."), o)
	require.NoError(t, err)
	r, err := report.Load(dir)
	require.NoError(t, err)
	return dir, r
}

func render(t *testing.T, r *report.Report, format string) string {
	t.Helper()
	var b bytes.Buffer
	require.NoError(t, r.Render(&b, format))
	return b.String()
}

func TestTotals(t *testing.T) {
	_, r := sample(t)
	tt := r.Totals
	assert.Equal(t, 15, tt.Jobs)
	assert.Equal(t, 11, tt.OK)
	assert.Equal(t, 4, tt.Failed)
	assert.Positive(t, tt.Tokens)
	assert.Positive(t, tt.CostUSD)
	assert.Positive(t, tt.CostUnknown, "copilot turns against the scripted server have no known cost")
	assert.Positive(t, tt.CostEstimated, "codex turns are priced from the table")
	assert.Positive(t, tt.WallMS)
	assert.Zero(t, tt.Graded)
	assert.Equal(t, 15, tt.NotGraded)
	for _, j := range r.Jobs {
		assert.NotEmpty(t, j.Attempts, j.ID)
		assert.Equal(t, report.GradeNotGraded, j.Grade(), "a job without a verifier is not graded, whatever its run did")
	}
}

func TestTable(t *testing.T) {
	_, r := sample(t)
	out := render(t, r, "table")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 1+1+15+1)
	assert.Equal(t, "15 jobs, not graded (no verifier); runs: 11 ok, 4 failed", lines[0], "the headline leads; no job is called succeeded")
	assert.True(t, strings.HasPrefix(lines[1], "JOB"))
	assert.True(t, strings.HasPrefix(lines[len(lines)-1], "TOTAL"))
	assert.Contains(t, lines[len(lines)-1], "not graded")
	assert.Contains(t, lines[len(lines)-1], "11 ok, 4 failed")
	assert.NotContains(t, strings.ToLower(out), "succeeded")
	assert.NotContains(t, out, "\x1b", "no terminal escape from a job id reaches the terminal")
	assert.Contains(t, out, "evil/<script>alert(1)</script>#\uFFFD[31m")
}

func TestMarkdownTotalsRow(t *testing.T) {
	_, r := sample(t)
	out := render(t, r, "markdown")
	var rows []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "|") {
			rows = append(rows, l)
		}
	}
	require.Len(t, rows, 2+15+1, "header, separator, one row per job, totals")
	total := rows[len(rows)-1]
	assert.True(t, strings.HasPrefix(total, "| **total** |"), total)
	assert.Contains(t, total, "**11 ok, 4 failed**")
	assert.Contains(t, total, "| **not graded** |")
	assert.Contains(t, out, "**15 jobs, not graded (no verifier); runs&#58; 11 ok, 4 failed**", "the headline leads")
	assert.Regexp(t, `\| \*\*\d+(\.\d)?[kM]?\*\* \| \*\*≥ \\~\\\$\d+\.\d{4} \(\d+ unknown\)\*\* \|$`, total,
		"tokens, then the known cost marked as a lower bound with the unknown count")
	for _, row := range rows {
		assert.Equal(t, 12, strings.Count(row, "|")-strings.Count(row, `\|`), "every row has 11 cells: %s", row)
	}
	assert.NotContains(t, out, "<script>", "markup in ids and texts is escaped")
	assert.Contains(t, out, "&lt;script&gt;")
}

// The JUnit XML schema's structure, as CI test reporters read it.
type junitTestsuites struct {
	XMLName  xml.Name `xml:"testsuites"`
	Tests    int      `xml:"tests,attr"`
	Failures int      `xml:"failures,attr"`
	Errors   int      `xml:"errors,attr"`
	Suites   []struct {
		Name       string `xml:"name,attr"`
		Tests      int    `xml:"tests,attr"`
		Failures   int    `xml:"failures,attr"`
		Errors     int    `xml:"errors,attr"`
		Skipped    int    `xml:"skipped,attr"`
		Time       string `xml:"time,attr"`
		Timestamp  string `xml:"timestamp,attr"`
		Properties []struct {
			Name  string `xml:"name,attr"`
			Value string `xml:"value,attr"`
		} `xml:"properties>property"`
		Cases []struct {
			Name       string `xml:"name,attr"`
			Classname  string `xml:"classname,attr"`
			Time       string `xml:"time,attr"`
			Properties []struct {
				Name  string `xml:"name,attr"`
				Value string `xml:"value,attr"`
			} `xml:"properties>property"`
			Failure *struct {
				Type    string `xml:"type,attr"`
				Message string `xml:"message,attr"`
				Body    string `xml:",chardata"`
			} `xml:"failure"`
			Error *struct {
				Type    string `xml:"type,attr"`
				Message string `xml:"message,attr"`
				Body    string `xml:",chardata"`
			} `xml:"error"`
			Skipped   *struct{} `xml:"skipped"`
			SystemOut string    `xml:"system-out"`
		} `xml:"testcase"`
	} `xml:"testsuite"`
}

func TestJUnitParsesBack(t *testing.T) {
	_, r := sample(t)
	out := render(t, r, "junit")
	var doc junitTestsuites
	dec := xml.NewDecoder(strings.NewReader(out))
	dec.Strict = true
	require.NoError(t, dec.Decode(&doc))
	assert.Equal(t, 15, doc.Tests)
	assert.Equal(t, 0, doc.Failures, "no verifier failed a job: nothing is a test failure")
	assert.Equal(t, 4, doc.Errors, "a failed run without a verdict is an error")
	require.Len(t, doc.Suites, 1)
	s := doc.Suites[0]
	assert.Equal(t, 15, s.Tests)
	assert.Equal(t, 0, s.Failures)
	assert.Equal(t, 4, s.Errors)
	assert.Equal(t, "2026-12-02T09:00:00Z", s.Timestamp)
	require.Len(t, s.Cases, 15)
	classes := map[string]int{}
	names := map[string]bool{}
	for _, c := range s.Cases {
		names[c.Name] = true
		assert.True(t, strings.HasPrefix(c.Classname, "outpost."), c.Classname)
		assert.Regexp(t, `^\d+\.\d{3}$`, c.Time)
		assert.Nil(t, c.Failure, c.Name)
		if c.Error != nil {
			classes[c.Error.Type]++
			assert.NotEmpty(t, c.Error.Message, c.Name)
			assert.Contains(t, c.Error.Body, "agent: ", c.Name)
		}
		require.NotEmpty(t, c.Properties, c.Name)
		assert.Equal(t, "verdict", c.Properties[0].Name)
		assert.Equal(t, "not graded", c.Properties[0].Value, c.Name)
	}
	assert.Equal(t, map[string]int{"process": 2, "timeout": 1, "quota": 1}, classes)
	assert.True(t, names["weekly-limit"])
	assert.True(t, names["evil/<script>alert(1)</script>#\uFFFD[31m"], "ids survive XML escaping; control characters do not")
	var props []string
	for _, p := range s.Properties {
		props = append(props, p.Name)
	}
	assert.Contains(t, props, "outpost_version")
	assert.Contains(t, props, "codex_version")
}

func TestGitHubAnnotations(t *testing.T) {
	_, r := sample(t)
	out := render(t, r, "github")
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	command := regexp.MustCompile(`^::(error|warning|notice) (?:file=[^,:\n]+(?:,line=\d+)?,)?title=[^:\n]*::[^\n]*$`)
	counts := map[string]int{}
	for _, l := range lines {
		m := command.FindStringSubmatch(l)
		require.NotNil(t, m, "every line is one well-formed workflow command: %q", l)
		counts[m[1]]++
	}
	assert.Equal(t, 4, counts["error"])
	assert.Equal(t, 4, counts["warning"], "parks, a fallback and a retry before success")
	assert.Equal(t, 1, counts["notice"])
	assert.Contains(t, out, "::error title=outpost job weekly-limit (claude)::quota (resets 2026-12-05T11%3A00%3A00Z)"[:60])
	assert.Contains(t, out, "::notice title=outpost report::15 jobs, not graded (no verifier); runs: 11 ok, 4 failed;")
	assert.NotContains(t, out, "succeeded")
}

func TestHTMLIsSelfContainedAndEscaped(t *testing.T) {
	_, r := graded(t)
	out := render(t, r, "html")
	assert.Equal(t, 3, strings.Count(out, "<script"), "the page's own script, its JSON data and one chunk of details, nothing else")
	assert.Equal(t, 3, strings.Count(out, "</script"), "no hostile text closes a script element")
	assert.NotContains(t, out, "alert('pwned')</script>")
	assert.NotContains(t, out, "<img src=x")
	assert.Contains(t, out, `"id":"evil/\u003cscript\u003ealert(1)\u003c/script\u003e#`, "hostile ids are JSON-escaped data")
	assert.Contains(t, out, `http-equiv="Content-Security-Policy" content="default-src &#39;none&#39;`)
	fetch := regexp.MustCompile(`(?i)(src|href|xlink:href|action)\s*=\s*["']?\s*(https?:)?//`)
	assert.Empty(t, fetch.FindAllString(out, -1), "nothing is loaded from the network")
	assert.NotContains(t, strings.ToLower(out), "@import")
	assert.NotContains(t, strings.ToLower(out), "url(http")
	assert.NotContains(t, pageScript(t), "innerHTML", "the script never parses text as markup")
	assert.NotContains(t, pageScript(t), "insertAdjacentHTML")
	for _, id := range []string{"chart-outcomes", "chart-durations", "chart-tokens", "chart-cost", "chart-parks"} {
		assert.Regexp(t, `<figure class="chart" id="`+id+`">\s*<figcaption>.*</figcaption>\s*<div class="svg"><svg`, out, id)
	}
	assert.Contains(t, out, `<p class="headline" id="headline">solved 3 of 7 graded jobs`, "the page leads with solved")
	assert.Contains(t, out, `<section id="tasks">`)

	data := pageData(t, out)
	require.Len(t, data.Jobs, 15)
	require.Len(t, data.Details, 15)
	grades := map[string]int{}
	for _, j := range data.Jobs {
		grades[j.Grade]++
	}
	assert.Equal(t, map[string]int{"pass": 3, "fail": 3, "error": 1, "not graded": 8}, grades)
	i := slices.IndexFunc(data.Jobs, func(j struct{ ID, Grade string }) bool { return j.ID == "add-tests" })
	require.GreaterOrEqual(t, i, 0)
	var d struct {
		Prompt   string
		Patch    string
		Verify   struct{ Output string }
		Attempts []struct {
			Items []struct{ K string }
		}
	}
	require.NoError(t, json.Unmarshal(data.Details[i], &d))
	assert.Equal(t, "Add tests for the parser", d.Prompt)
	assert.Contains(t, d.Patch, "+++ b/parser/parse.py")
	assert.Contains(t, d.Verify.Output, "tests/test_parser.py:42: AssertionError")
	require.NotEmpty(t, d.Attempts)
	kinds := map[string]bool{}
	for _, it := range d.Attempts[0].Items {
		kinds[it.K] = true
	}
	assert.True(t, kinds["tool"], "the trajectory's tool calls are in the job's details")
	require.Len(t, data.Tasks, 5)
	assert.Equal(t, "readme", data.Tasks[3].Task)
	assert.Equal(t, "pass@2 1.000", data.Tasks[3].PassN)
}

// pageScript is the HTML page's script as embedded.
func pageScript(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("report.js")
	require.NoError(t, err)
	return string(b)
}

type pageJSON struct {
	Jobs    []struct{ ID, Grade string }
	Details []json.RawMessage
	Tasks   []struct {
		Task  string
		PassN string `json:"passn"`
	}
}

// pageData decodes the page's embedded JSON.
func pageData(t *testing.T, page string) pageJSON {
	t.Helper()
	m := regexp.MustCompile(`(?s)<script type="application/json" id="outpost-data">(.*?)</script>`).FindStringSubmatch(page)
	require.NotNil(t, m)
	var d pageJSON
	require.NoError(t, json.Unmarshal([]byte(m[1]), &d))
	for _, c := range regexp.MustCompile(`(?s)<script type="application/json" class="outpost-details">(.*?)</script>`).FindAllStringSubmatch(page, -1) {
		var b64 string
		require.NoError(t, json.Unmarshal([]byte(c[1]), &b64))
		z, err := base64.StdEncoding.DecodeString(b64)
		require.NoError(t, err)
		zr, err := gzip.NewReader(bytes.NewReader(z))
		require.NoError(t, err)
		var chunk []json.RawMessage
		require.NoError(t, json.NewDecoder(zr).Decode(&chunk))
		d.Details = append(d.Details, chunk...)
	}
	return d
}

func TestResultsFileInput(t *testing.T) {
	dir, _ := sample(t)
	r, err := report.Load(filepath.Join(dir, runrec.ResultsFile))
	require.NoError(t, err)
	assert.Nil(t, r.Manifest)
	assert.Equal(t, 15, r.Totals.Jobs)
	out := render(t, r, "html")
	assert.Contains(t, out, "parks; the results file has no times")
	for _, f := range report.Formats {
		render(t, r, f)
	}
}

func TestMalformedInput(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "results.jsonl")
	require.NoError(t, os.WriteFile(path, []byte("{\"job\":\"a\"}\n{\"job\":\nnot json\n{\"job\":\"\"}\n{\"job\":\"b\""), 0o600))
	_, err := report.Load(path)
	require.Error(t, err)
	assert.True(t, outposterr.Is(err, outposterr.Configuration))
	assert.Contains(t, err.Error(), "3 malformed lines (line 2:")
	assert.Contains(t, err.Error(), "line 4: record without a job id")

	require.NoError(t, os.WriteFile(path, []byte("{\"job\":\"a\"}\n{\"job\":\"b"), 0o600))
	r, err := report.Load(path)
	require.NoError(t, err, "a torn last line is a note, not an error")
	assert.Equal(t, 1, r.Totals.Jobs)
	assert.Len(t, r.Notes, 1)

	_, err = report.Load(filepath.Join(dir, "missing"))
	assert.True(t, outposterr.Is(err, outposterr.Configuration))
	var b bytes.Buffer
	assert.True(t, outposterr.Is(r.Render(&b, "pdf"), outposterr.Configuration))
}

func FuzzLoadResults(f *testing.F) {
	f.Add([]byte(`{"job":"a","agent":"claude","outcome":{"ok":false,"class":"quota","error":"x"},"usage":{"cost_known":true}}` + "\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		path := filepath.Join(t.TempDir(), "r.jsonl")
		require.NoError(t, os.WriteFile(path, b, 0o600))
		r, err := report.Load(path)
		if err != nil {
			return
		}
		for _, format := range report.Formats {
			require.NoError(t, r.Render(&bytes.Buffer{}, format))
		}
	})
}

func TestDetailNamesWhatStoppedTheJob(t *testing.T) {
	for _, c := range []struct {
		o    harness.Outcome
		want string
	}{
		{harness.Outcome{Class: "process", Limit: "pids"}, "process (limit: pids)"},
		{harness.Outcome{Class: "process", Unavailable: "overloaded"}, "process (unavailable: overloaded)"},
		{harness.Outcome{Class: "quota", ResetAt: "2026-12-02T11:00:00Z"}, "quota (resets 2026-12-02T11:00:00Z)"},
		{harness.Outcome{OK: true}, ""},
		{harness.Outcome{OK: true, SecretPrinted: true}, "ok (secret printed)"},
		{harness.Outcome{Class: "process", Limit: "pids", SecretPrinted: true}, "process (limit: pids) (secret printed)"},
	} {
		j := report.JobRow{Finished: true, Outcome: c.o}
		assert.Equal(t, c.want, j.Detail())
	}
}

// TestVerdicts: graded jobs (batch verifiers, outpost grade) show their
// verdict and reward beside the outcome, and the totals count the solved.
func TestVerdicts(t *testing.T) {
	path := filepath.Join(t.TempDir(), "results.jsonl")
	require.NoError(t, os.WriteFile(path, []byte(
		`{"job":"a","attempt":1,"agent":"","outcome":{"ok":true},"verdict":"pass","reward":1}`+"\n"+
			`{"job":"b","attempt":1,"agent":"","outcome":{"ok":true},"verdict":"fail","reward":0}`+"\n"+
			`{"job":"c","attempt":1,"agent":"","outcome":{"ok":true},"verdict":"error"}`+"\n"+
			`{"job":"d","attempt":1,"agent":"claude","outcome":{"ok":true}}`+"\n"), 0o600))
	r, err := report.Load(path)
	require.NoError(t, err)
	assert.Equal(t, 3, r.Totals.Graded)
	assert.Equal(t, 1, r.Totals.Solved)
	var table, md bytes.Buffer
	require.NoError(t, r.Render(&table, "table"))
	assert.Regexp(t, `(?m)^a\s+pass\s+1\s+ok\s`, table.String())
	assert.Regexp(t, `(?m)^b\s+fail\s+0\s+ok\s`, table.String())
	assert.Regexp(t, `(?m)^c\s+error\s+—\s+ok\s`, table.String())
	assert.Regexp(t, `(?m)^d\s+claude\s+not graded\s+—\s+ok\s`, table.String())
	assert.Regexp(t, `(?m)^TOTAL\s+1 of 3 solved\s+4 ok, 0 failed`, table.String())
	require.NoError(t, r.Render(&md, "markdown"))
	assert.Contains(t, md.String(), "**solved 1 of 3 graded jobs (1 failed, 1 verifier errors; 1 not graded)")
	assert.Contains(t, md.String(), "| b |  | ❌ fail | 0 |")
}

// TestSecretPrintedShown: a job whose CLI printed a secret is marked in the
// table and gets a warning annotation, whatever its outcome.
func TestSecretPrintedShown(t *testing.T) {
	_, r := sample(t)
	j := &r.Jobs[0]
	j.Outcome.SecretPrinted = true
	gh := render(t, r, "github")
	assert.Contains(t, gh, "::warning title=outpost job "+j.ID)
	assert.Contains(t, gh, "::the agent printed a secret its lease holds, or wrote one into its changes (replaced by [REDACTED]); it may follow instructions planted in its task\n")
	assert.Equal(t, 1, strings.Count(gh, "printed a secret"))
	assert.Contains(t, render(t, r, "table"), "("+report.SecretPrintedNote+")")
}
