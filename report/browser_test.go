package report_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/internal/testenv"
	"github.com/outpost-dev/outpost/report"
	"github.com/outpost-dev/outpost/runrec/runrectest"
)

// browser is a headless Chromium tab that records console problems and
// network requests.
type browser struct {
	ctx      context.Context
	mu       sync.Mutex
	problems []string
	requests []string
}

// newBrowser starts headless Chromium (skipped without it unless
// OUTPOST_REQUIRE_CHROMIUM=1); it is stopped when the test ends.
func newBrowser(t testing.TB) *browser {
	t.Helper()
	bin := testenv.Chromium(t)
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(bin), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck, chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 900),
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-default-apps", true), chromedp.Flag("mute-audio", true),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(cancel)
	// A bound on a hung browser, not a timing assertion.
	ctx, cancelTimeout := context.WithTimeout(ctx, 5*time.Minute)
	t.Cleanup(cancelTimeout)
	b := &browser{ctx: ctx}
	require.NoError(t, chromedp.Listen(ctx, func(ev any) {
		b.mu.Lock()
		defer b.mu.Unlock()
		switch e := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			switch e.Type {
			case runtime.ConsoleAPICalledTypeError, runtime.ConsoleAPICalledTypeWarning, runtime.ConsoleAPICalledTypeAssert:
				b.problems = append(b.problems, "console "+string(e.Type))
			}
		case *runtime.EventExceptionThrown:
			b.problems = append(b.problems, "exception: "+e.ExceptionDetails.Text+" "+exceptionText(e))
		case *cdplog.EventEntryAdded:
			if e.Entry.Level == cdplog.EntryLevelError || e.Entry.Level == cdplog.EntryLevelWarning {
				b.problems = append(b.problems, "log: "+e.Entry.Text)
			}
		case *network.EventRequestWillBeSent:
			if !strings.HasPrefix(e.Request.URL, "file://") && !strings.HasPrefix(e.Request.URL, "data:") {
				b.requests = append(b.requests, e.Request.URL)
			}
		case *network.EventLoadingFailed:
			b.problems = append(b.problems, "loading failed: "+e.ErrorText)
		}
	}))
	return b
}

func exceptionText(e *runtime.EventExceptionThrown) string {
	if x := e.ExceptionDetails.Exception; x != nil {
		return x.Description
	}
	return ""
}

// open loads a page and waits until its script says the first render is
// done; it returns that render's time in milliseconds since navigation.
func (b *browser) open(t testing.TB, page string) string {
	t.Helper()
	require.NoError(t, chromedp.Do(b.ctx, chromedp.Navigate("file://"+page), chromedp.WaitReady("body[data-rendered]")))
	ms, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](`document.body.getAttribute("data-rendered")`))
	require.NoError(t, err)
	return ms
}

func (b *browser) eval(t testing.TB, expr string) string {
	t.Helper()
	s, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](expr))
	require.NoError(t, err, expr)
	return s
}

// visibleRows lists the ids of the job table's rows, in order.
const visibleRows = `Array.from(document.querySelectorAll("#job-rows tr.row a.jobid")).map(function(a){return a.textContent}).join("|")`

// TestHTMLInChromium opens the HTML report in headless Chromium: it renders
// with no console error and no exception, its charts are drawn, a job opens
// to show its prompt, metadata, verdict, verifier output, coloured patch
// and conversation, the verdict filter and the search select rows, hostile
// content stays text, and the page makes no network request.
// OUTPOST_REPORT_SCREENSHOT=FILE keeps a full-page screenshot (PNG). Skips
// without Chromium unless OUTPOST_REQUIRE_CHROMIUM=1.
func TestHTMLInChromium(t *testing.T) {
	_, r := graded(t)
	page := filepath.Join(t.TempDir(), "report.html")
	require.NoError(t, os.WriteFile(page, []byte(render(t, r, "html")), 0o600))
	b := newBrowser(t)
	b.open(t, page)

	title, err := chromedp.Run(b.ctx, chromedp.Title())
	require.NoError(t, err)
	assert.Equal(t, "Outpost report", title)
	assert.Equal(t, "5 5", b.eval(t, `document.querySelectorAll("figure.chart").length + " " + document.querySelectorAll("figure.chart .svg > svg").length`),
		"five charts, every one drawn")
	assert.Equal(t, "1", b.eval(t, `String(document.querySelectorAll("script:not([type])").length)`), "hostile content added no script element")
	assert.True(t, strings.HasPrefix(b.eval(t, `document.getElementById("headline").textContent`), "solved 3 of 7 graded jobs"))
	assert.Equal(t, "15", b.eval(t, `String(document.querySelectorAll("#job-rows tr.row").length)`))
	assert.Equal(t, "5", b.eval(t, `String(document.querySelectorAll("#task-rows tr").length)`), "pass@k per task")
	assert.Contains(t, b.eval(t, `document.getElementById("task-rows").textContent`), "pass@2 1.000")
	hostile := b.eval(t, `Array.from(document.querySelectorAll("#job-rows a.jobid")).map(function(a){return a.textContent}).find(function(s){return s.indexOf("evil/")===0}) || ""`)
	assert.True(t, strings.HasPrefix(hostile, "evil/<script>"), "a hostile id is shown as text: %q", hostile)

	// Open a job: its prompt, verdict, verifier output, patch and conversation.
	require.NoError(t, chromedp.Do(b.ctx, chromedp.Click(`#job-rows tr.row a.jobid[href="#job-2"]`),
		chromedp.WaitVisible(`#job-2 .prompt-text`)))
	assert.Equal(t, "add-tests", b.eval(t, `document.querySelector('#job-rows a.jobid[href="#job-2"]').textContent`))
	assert.Equal(t, "Add tests for the parser", b.eval(t, `document.querySelector("#job-2 .prompt-text").textContent`), "the prompt shows")
	assert.Equal(t, "fail", b.eval(t, `document.querySelector("#job-2 .verdict .pill").textContent`))
	assert.Contains(t, b.eval(t, `document.querySelector("#job-2 .verify-output").textContent`), "tests/test_parser.py:42: AssertionError")
	assert.Equal(t, "+    y = 2\n", b.eval(t, `document.querySelector("#job-2 pre.diff span.d-add").textContent`), "the patch is a coloured diff")
	assert.Equal(t, "rgb(218, 251, 225)", b.eval(t, `getComputedStyle(document.querySelector("#job-2 pre.diff span.d-add")).backgroundColor`))
	assert.NotEqual(t, "0", b.eval(t, `String(document.querySelectorAll("#job-2 ol.conversation li.msg.k-tool").length)`), "the conversation shows its tool calls")

	// The hostile job's details stay text.
	i := b.eval(t, `String(Array.from(document.querySelectorAll("#job-rows a.jobid")).findIndex(function(a){return a.textContent.indexOf("evil/")===0}))`)
	require.NotEqual(t, "-1", i)
	require.NoError(t, chromedp.Do(b.ctx, chromedp.Evaluate[chromedp.Void](`document.querySelectorAll("#job-rows a.jobid")[`+i+`].click()`)))
	n, err := strconv.Atoi(i)
	require.NoError(t, err)
	require.NoError(t, chromedp.Do(b.ctx, chromedp.WaitVisible(fmt.Sprintf("#job-%d .prompt-text", n+1))))
	assert.Contains(t, b.eval(t, fmt.Sprintf(`document.querySelector("#job-%d .verify-output, #job-%d .answer").textContent`, n+1, n+1)), "<script>alert('pwned')</script>",
		"the hostile job's texts are shown as text")
	assert.Equal(t, "1", b.eval(t, `String(document.querySelectorAll("script:not([type])").length)`), "opening the hostile job added no script")
	assert.Equal(t, "0", b.eval(t, `String(document.querySelectorAll("#job-rows img").length)`), "nor an image")

	// The verdict filter.
	require.NoError(t, chromedp.Do(b.ctx, chromedp.Click(`#grade-filter button[data-grade="fail"]`)))
	assert.Equal(t, "retry-overload|add-tests|bad-login", sortedRows(b.eval(t, visibleRows), "retry-overload|add-tests|bad-login"), "the fail filter shows the failed verdicts")
	assert.Contains(t, b.eval(t, `document.getElementById("shown").textContent`), "3 of 15 jobs match")
	require.NoError(t, chromedp.Do(b.ctx, chromedp.Click(`#grade-filter button[data-grade="not graded"]`)))
	assert.Equal(t, "8", b.eval(t, `String(document.querySelectorAll("#job-rows tr.row").length)`))
	require.NoError(t, chromedp.Do(b.ctx, chromedp.Click(`#grade-filter button[data-grade="all"]`)))

	// The search: task, id, prompt text.
	require.NoError(t, chromedp.Do(b.ctx, chromedp.SendKeys("#search", "parser"),
		chromedp.WaitReady(`#shown`)))
	waitRows(t, b, "add-tests|lint-fixes")
	require.NoError(t, chromedp.Do(b.ctx, chromedp.Evaluate[chromedp.Void](`document.getElementById("search").value = ""`),
		chromedp.SendKeys("#search", "changelog")))
	waitRows(t, b, "bad-login")

	shot, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	require.NoError(t, err)
	if p := os.Getenv("OUTPOST_REPORT_SCREENSHOT"); p != "" {
		require.NoError(t, os.WriteFile(p, shot, 0o600))
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	assert.Empty(t, b.problems, "no console errors, exceptions or failed loads")
	assert.Empty(t, b.requests, "the page works offline: no network request")
}

// waitRows waits until the job table shows exactly want (ids joined by |).
func waitRows(t *testing.T, b *browser, want string) {
	t.Helper()
	_, err := chromedp.Run(b.ctx, chromedp.Poll[bool](`(`+visibleRows+`) === `+jsString(want),
		chromedp.WithPollingInterval(20*time.Millisecond), chromedp.WithPollingTimeout(2*time.Minute)))
	require.NoError(t, err, "rows %q; have %q", want, b.eval(t, visibleRows))
}

func jsString(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}

// sortedRows returns got when it holds the same ids as want in any order.
func sortedRows(got, want string) string {
	g, w := strings.Split(got, "|"), strings.Split(want, "|")
	if len(g) != len(w) {
		return got
	}
	for _, id := range w {
		found := false
		for _, x := range g {
			found = found || x == id
		}
		if !found {
			return got
		}
	}
	return want
}

// TestHTMLManyJobsInChromium: a run of 600 jobs shows its first 200 rows,
// "show more jobs" adds the next page, and a job past the first chunk of
// details (found by the search) opens with its own prompt.
func TestHTMLManyJobsInChromium(t *testing.T) {
	testenv.Chromium(t)
	dir := filepath.Join(t.TempDir(), "run")
	require.NoError(t, runrectest.Write(dir, runrectest.Many(600)))
	r, err := report.Load(dir)
	require.NoError(t, err)
	page := filepath.Join(t.TempDir(), "report.html")
	require.NoError(t, os.WriteFile(page, []byte(render(t, r, "html")), 0o600))
	b := newBrowser(t)
	b.open(t, page)
	assert.Equal(t, "200", b.eval(t, `String(document.querySelectorAll("#job-rows tr.row").length)`), "one page of rows at first")
	require.NoError(t, chromedp.Do(b.ctx, chromedp.Click(`#job-more-button`)))
	assert.Equal(t, "400", b.eval(t, `String(document.querySelectorAll("#job-rows tr.row").length)`))
	id := r.Jobs[555].ID
	require.NoError(t, chromedp.Do(b.ctx, chromedp.SendKeys("#search", "issue 555 in")))
	waitRows(t, b, id)
	require.NoError(t, chromedp.Do(b.ctx, chromedp.Click(`#job-rows a.jobid`), chromedp.WaitVisible(`#job-556 .prompt-text`)))
	assert.True(t, strings.HasPrefix(b.eval(t, `document.querySelector("#job-556 .prompt-text").textContent`), "Issue 555 in repo-070"))
	b.mu.Lock()
	defer b.mu.Unlock()
	assert.Empty(t, b.problems)
}

// BenchmarkHTMLFirstRender10k measures the HTML report of a 10,000-job
// graded run directory (runrectest.Many: prompt, metadata, trajectory,
// patch and verifier output per job): generate-ms is report.Load and HTML
// once; first-render-ms is what the page's script records when its first
// rows are laid out and painted, in milliseconds since navigation started
// (file read, HTML and JSON parsed, script run), averaged over b.N loads in
// headless Chromium, dom-interactive-ms the part until the HTML was parsed
// and its inline script had run (the navigation timing's domInteractive);
// page-MiB the file's size. Needs Chromium (skips
// without it unless OUTPOST_REQUIRE_CHROMIUM=1).
func BenchmarkHTMLFirstRender10k(b *testing.B) {
	dir := filepath.Join(b.TempDir(), "run")
	require.NoError(b, runrectest.Write(dir, runrectest.Many(10_000)))
	start := time.Now()
	r, err := report.Load(dir)
	require.NoError(b, err)
	require.Len(b, r.Jobs, 10_000)
	var page strings.Builder
	require.NoError(b, r.HTML(&page))
	generate := time.Since(start)
	file := filepath.Join(b.TempDir(), "report.html")
	require.NoError(b, os.WriteFile(file, []byte(page.String()), 0o600))
	br := newBrowser(b)
	br.open(b, file) // warm the browser once
	total, parsed := 0.0, 0.0
	b.ResetTimer()
	for b.Loop() {
		ms, err := strconv.ParseFloat(br.open(b, file), 64)
		require.NoError(b, err)
		total += ms
		p, err := strconv.ParseFloat(br.eval(b, `String(performance.getEntriesByType("navigation")[0].domInteractive)`), 64)
		require.NoError(b, err)
		parsed += p
	}
	b.StopTimer()
	b.ReportMetric(parsed/float64(b.N), "dom-interactive-ms")
	assert.Equal(b, "200", br.eval(b, `String(document.querySelectorAll("#job-rows tr.row").length)`), "the first page of rows")
	b.ReportMetric(total/float64(b.N), "first-render-ms")
	b.ReportMetric(float64(generate.Milliseconds()), "generate-ms")
	b.ReportMetric(float64(len(page.String()))/(1<<20), "page-MiB")
}
