package report_test

import (
	"context"
	"os"
	"path/filepath"
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
)

// TestHTMLInChromium opens the HTML report in headless Chromium: it renders
// with no console error and no exception, its charts and a job's
// conversation are found by DOM query, hostile content stays text, and the
// page makes no network request. OUTPOST_REPORT_SCREENSHOT=FILE keeps a
// full-page screenshot. Skips without Chromium unless
// OUTPOST_REQUIRE_CHROMIUM=1.
func TestHTMLInChromium(t *testing.T) {
	bin := testenv.Chromium(t)
	_, r := sample(t)
	page := filepath.Join(t.TempDir(), "report.html")
	require.NoError(t, os.WriteFile(page, []byte(render(t, r, "html")), 0o600))

	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(bin), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck, chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 900),
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-default-apps", true), chromedp.Flag("mute-audio", true),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancelTimeout := context.WithTimeout(ctx, 90*time.Second)
	defer cancelTimeout()

	var (
		mu       sync.Mutex
		problems []string
		requests []string
	)
	require.NoError(t, chromedp.Listen(ctx, func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch e := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			switch e.Type {
			case runtime.ConsoleAPICalledTypeError, runtime.ConsoleAPICalledTypeWarning, runtime.ConsoleAPICalledTypeAssert:
				problems = append(problems, "console "+string(e.Type))
			}
		case *runtime.EventExceptionThrown:
			problems = append(problems, "exception: "+e.ExceptionDetails.Text)
		case *cdplog.EventEntryAdded:
			if e.Entry.Level == cdplog.EntryLevelError || e.Entry.Level == cdplog.EntryLevelWarning {
				problems = append(problems, "log: "+e.Entry.Text)
			}
		case *network.EventRequestWillBeSent:
			if !strings.HasPrefix(e.Request.URL, "file://") && !strings.HasPrefix(e.Request.URL, "data:") {
				requests = append(requests, e.Request.URL)
			}
		case *network.EventLoadingFailed:
			problems = append(problems, "loading failed: "+e.ErrorText)
		}
	}))

	eval := func(expr string) int {
		t.Helper()
		n, err := chromedp.Run(ctx, chromedp.Evaluate[int](expr))
		require.NoError(t, err, expr)
		return n
	}
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate("file://"+page), chromedp.WaitVisible("#summary")))
	title, err := chromedp.Run(ctx, chromedp.Title())
	require.NoError(t, err)
	charts := eval(`document.querySelectorAll("figure.chart").length`)
	svgs := eval(`document.querySelectorAll("figure.chart .svg > svg").length`)
	jobs := eval(`document.querySelectorAll("details.job").length`)
	kpis := eval(`document.querySelectorAll(".kpi").length`)
	scripts := eval(`document.querySelectorAll("script").length`)
	// One job's conversation view: follow its link, find its tool calls.
	toolMsgs := eval(`(function(){
		var row = Array.from(document.querySelectorAll("table.jobs a.jobid")).find(function(a){ return a.textContent === "add-tests"; });
		row.click();
		var d = document.getElementById(row.getAttribute("href").slice(1));
		return d.open ? d.querySelectorAll("ol.conversation li.msg.k-tool").length : -1;
	})()`)
	hostileText, err := chromedp.Run(ctx, chromedp.Evaluate[string](`Array.from(document.querySelectorAll("details.job .jobid")).map(function(e){return e.textContent}).find(function(s){return s.indexOf("evil/")===0}) || ""`))
	require.NoError(t, err)
	require.NoError(t, chromedp.Do(ctx, chromedp.Click(`.filters button[data-filter="failed"]`)))
	filtered, err := chromedp.Run(ctx, chromedp.Evaluate[string](`Array.from(document.querySelectorAll("table.jobs tbody tr")).filter(function(r){return r.offsetParent!==null}).length + " visible of " + document.querySelectorAll("table.jobs tbody tr").length`))
	require.NoError(t, err)
	require.NoError(t, chromedp.Do(ctx, chromedp.Click(`.filters button[data-filter="all"]`)))
	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(80))
	require.NoError(t, err)
	if p := os.Getenv("OUTPOST_REPORT_SCREENSHOT"); p != "" {
		require.NoError(t, os.WriteFile(p, shot, 0o600))
	}

	assert.Equal(t, "Outpost report", title)
	assert.Equal(t, 5, charts, "outcomes, durations, tokens, cost, parks")
	assert.Equal(t, 5, svgs, "every chart drawn")
	assert.Equal(t, 15, jobs)
	assert.Equal(t, 7, kpis)
	assert.Equal(t, 1, scripts, "hostile content added no script element")
	assert.Positive(t, toolMsgs, "the job's conversation shows its tool calls")
	assert.True(t, strings.HasPrefix(hostileText, "evil/<script>"), "a hostile id is shown as text: %q", hostileText)
	assert.Equal(t, "4 visible of 15", filtered, "the failed filter shows the failed jobs")
	assert.NotEmpty(t, shot)
	mu.Lock()
	defer mu.Unlock()
	assert.Empty(t, problems, "no console errors, exceptions or failed loads")
	assert.Empty(t, requests, "the page works offline: no network request")
}
