package report

import (
	"fmt"
	"html/template"
	"math"
	"sort"
	"time"

	charts "github.com/go-analyze/charts"

	"github.com/outpost-dev/outpost/usage"
)

// Charts are drawn server-side by github.com/go-analyze/charts as inline
// SVG: no script, font or stylesheet is fetched when the page is viewed.
// The library escapes every text it draws (job ids and agent names are
// hostile input); the SVG is then trusted as template.HTML.

// Chart is one drawn chart.
type Chart struct {
	ID, Title, Caption string
	SVG                template.HTML
	// Empty says why there is nothing to draw.
	Empty string
}

// statusColors are the outcome colours, shared with the page's CSS.
var statusColors = map[string]string{
	"ok": "#2da44e", "quota": "#d29922", "process": "#cf222e", "timeout": "#8250df", "session": "#0969da",
	"protocol": "#bf3989", "sandbox": "#953800", "bootstrap": "#6e7781", "configuration": "#57606a",
	"aborted": "#8c959f", "unfinished": "#afb8c1", "failed": "#cf222e",
}

// statusOrder orders statuses in legends: success first, then by weight.
var statusOrder = []string{"ok", "quota", "process", "timeout", "session", "protocol", "sandbox", "bootstrap",
	"configuration", "aborted", "failed", "unfinished"}

func statusColor(s string) string {
	if c, ok := statusColors[s]; ok {
		return c
	}
	return "#6e7781"
}

const (
	chartWidth  = 560
	chartHeight = 300
)

var (
	labelFont = charts.FontStyle{FontSize: 11, FontColor: charts.ColorFromHex("#57606a")}
	axisColor = charts.ColorFromHex("#d0d7de")
)

func theme(series ...string) charts.ColorPalette {
	colors := make([]charts.Color, len(series))
	for i, c := range series {
		colors[i] = charts.ColorFromHex(c)
	}
	return charts.MakeTheme(charts.ThemeOption{
		AxisStrokeColor: axisColor, AxisSplitLineColor: charts.ColorFromHex("#eaeef2"),
		BackgroundColor: charts.ColorFromHex("#ffffff"), TextColor: charts.ColorFromHex("#57606a"),
		SeriesColors: colors,
	})
}

func render(height int, draw func(p *charts.Painter) error) (template.HTML, error) {
	p := charts.NewPainter(charts.PainterOptions{OutputFormat: charts.ChartOutputSVG, Width: chartWidth, Height: height})
	if err := draw(p); err != nil {
		return "", err
	}
	b, err := p.Bytes()
	if err != nil {
		return "", err
	}
	return template.HTML(b), nil //nolint:gosec // the library escapes the texts it draws
}

func legend(names []string) charts.LegendOption {
	return charts.LegendOption{SeriesNames: names, FontStyle: labelFont, Symbol: charts.SymbolSquare}
}

func integer(v float64) string { return fmt.Sprintf("%.0f", v) }

// stackedBars is one stacked bar chart: a row of values a series, a value a
// bar.
type stackedBars struct {
	values     [][]float64
	colors     []string // one a series
	legend     []string // one a series
	labels     []string // one a bar
	horizontal bool
	bottom     int                    // the padding below the plot
	axis       charts.ValueAxisOption // the value axis; it starts at zero, in the label font
}

func (b stackedBars) draw(height int) (template.HTML, error) {
	return render(height, func(p *charts.Painter) error {
		opt := charts.NewBarChartOptionWithData(b.values)
		opt.Horizontal = b.horizontal
		opt.Theme = theme(b.colors...)
		opt.StackSeries = charts.Ptr(true)
		opt.CategoryAxis.Labels = b.labels
		opt.CategoryAxis.LabelFontStyle = labelFont
		axis := b.axis
		axis.Min = charts.Ptr(0.0)
		axis.LabelFontStyle = labelFont
		opt.ValueAxis = []charts.ValueAxisOption{axis}
		opt.Legend = legend(b.legend)
		opt.Padding = charts.NewBox(12, 36, b.bottom, 8)
		return p.BarChart(opt)
	})
}

// drawn is c with the drawing's SVG, or the reason it failed.
func (c Chart) drawn(svg template.HTML, err error) Chart {
	if err != nil {
		c.Empty = "chart failed: " + err.Error()
	}
	c.SVG = svg
	return c
}

// charts draws the report's charts. A chart that cannot be drawn says so
// instead of failing the page.
func (r *Report) charts() []Chart {
	out := []Chart{r.outcomeChart(), r.durationChart(), r.tokenChart(), r.costChart(), r.parkChart()}
	for i := range out {
		if out[i].SVG == "" && out[i].Empty == "" {
			out[i].Empty = "nothing to draw"
		}
	}
	return out
}

// outcomeChart stacks the jobs of each agent by status.
func (r *Report) outcomeChart() Chart {
	c := Chart{ID: "chart-outcomes", Title: "Outcomes by agent", Caption: "jobs per final agent, by outcome class"}
	if len(r.Jobs) == 0 {
		c.Empty = "no jobs"
		return c
	}
	counts := map[string]map[string]float64{}
	seen := map[string]bool{}
	for i := range r.Jobs {
		j := &r.Jobs[i]
		a := clean(j.Agent, 20)
		if a == "" {
			a = "?"
		}
		if counts[a] == nil {
			counts[a] = map[string]float64{}
		}
		counts[a][j.Status()]++
		seen[j.Status()] = true
	}
	agents := make([]string, 0, len(counts))
	for a := range counts {
		agents = append(agents, a)
	}
	sort.Strings(agents)
	var names, colors []string
	var values [][]float64
	for _, s := range orderedStatuses(seen) {
		row := make([]float64, len(agents))
		for i, a := range agents {
			row[i] = counts[a][s]
		}
		names, colors, values = append(names, s), append(colors, statusColor(s)), append(values, row)
	}
	return c.drawn(stackedBars{values: values, colors: colors, legend: names, labels: agents, bottom: 16,
		axis: charts.ValueAxisOption{ValueFormatter: integer, Unit: 1, PreferNiceIntervals: charts.Ptr(true)}}.draw(chartHeight))
}

func orderedStatuses(seen map[string]bool) []string {
	var out []string
	for _, s := range statusOrder {
		if seen[s] {
			out = append(out, s)
			delete(seen, s)
		}
	}
	var rest []string
	for s := range seen {
		rest = append(rest, s)
	}
	sort.Strings(rest)
	return append(out, rest...)
}

// durationBuckets are the histogram's upper bounds.
var durationBuckets = []struct {
	label string
	max   time.Duration
}{
	{"<15s", 15 * time.Second}, {"<30s", 30 * time.Second}, {"<1m", time.Minute}, {"<2m", 2 * time.Minute},
	{"<5m", 5 * time.Minute}, {"<15m", 15 * time.Minute}, {"<1h", time.Hour}, {"≥1h", math.MaxInt64},
}

// durationChart is a histogram of job durations, successes and failures
// stacked.
func (r *Report) durationChart() Chart {
	c := Chart{ID: "chart-durations", Title: "Duration distribution", Caption: "jobs by wall time, parks and retries included"}
	if len(r.Jobs) == 0 {
		c.Empty = "no jobs"
		return c
	}
	okRow := make([]float64, len(durationBuckets))
	badRow := make([]float64, len(durationBuckets))
	for i := range r.Jobs {
		d := time.Duration(r.Jobs[i].DurationMS) * time.Millisecond
		for b, bucket := range durationBuckets {
			if d < bucket.max {
				if r.Jobs[i].Status() == "ok" {
					okRow[b]++
				} else {
					badRow[b]++
				}
				break
			}
		}
	}
	labels := make([]string, len(durationBuckets))
	for i, b := range durationBuckets {
		labels[i] = b.label
	}
	return c.drawn(stackedBars{values: [][]float64{okRow, badRow}, colors: []string{statusColor("ok"), statusColor("process")},
		legend: []string{"ok", "failed"}, labels: labels, bottom: 16,
		axis: charts.ValueAxisOption{ValueFormatter: integer, Unit: 1}}.draw(chartHeight))
}

// maxBars bounds the per-job charts; the largest jobs are drawn.
const maxBars = 20

// topJobs returns up to maxBars job indexes with the largest value, in job
// order, and how many were left out.
func (r *Report) topJobs(value func(*JobRow) float64) ([]int, int) {
	var idx []int
	for i := range r.Jobs {
		if value(&r.Jobs[i]) > 0 {
			idx = append(idx, i)
		}
	}
	left := 0
	if len(idx) > maxBars {
		sort.SliceStable(idx, func(a, b int) bool { return value(&r.Jobs[idx[a]]) > value(&r.Jobs[idx[b]]) })
		left = len(idx) - maxBars
		idx = idx[:maxBars]
		sort.Ints(idx)
	}
	return idx, left
}

func barHeight(n int) int { return max(200, 100+n*30) }

// tokenChart stacks each job's tokens by kind.
func (r *Report) tokenChart() Chart {
	c := Chart{ID: "chart-tokens", Title: "Tokens per job", Caption: "input, cache reads, cache writes and output, every turn of the job"}
	idx, left := r.topJobs(func(j *JobRow) float64 { return float64(j.Usage.Tokens()) })
	if len(idx) == 0 {
		c.Empty = "no token usage reported"
		return c
	}
	if left > 0 {
		c.Caption += fmt.Sprintf(" (the %d largest; %d more not drawn)", len(idx), left)
	}
	labels := make([]string, len(idx))
	rows := make([][]float64, 4)
	for k := range rows {
		rows[k] = make([]float64, len(idx))
	}
	for n, i := range idx {
		j := &r.Jobs[i]
		labels[n] = clean(j.ID, 22)
		u := j.Usage
		rows[0][n], rows[1][n], rows[2][n], rows[3][n] = float64(u.Input), float64(u.Cached), float64(u.CacheCreated), float64(u.Output)
	}
	return c.drawn(stackedBars{values: rows, colors: []string{"#0969da", "#54aeff", "#b6e3ff", "#8250df"},
		legend: []string{"input", "cache read", "cache write", "output"}, labels: labels, horizontal: true, bottom: 24}.draw(barHeight(len(idx))))
}

// costChart draws each job's known cost, reported and estimated apart.
func (r *Report) costChart() Chart {
	c := Chart{ID: "chart-cost", Title: "Cost per job (USD)", Caption: "as the CLI reported it, or estimated at API list prices; unknown costs are not drawn"}
	idx, left := r.topJobs(func(j *JobRow) float64 {
		if !j.Usage.CostKnown {
			return 0
		}
		return j.Usage.CostUSD
	})
	if r.Totals.CostUnknown > 0 {
		c.Caption += fmt.Sprintf(" (%d jobs of unknown cost)", r.Totals.CostUnknown)
	}
	if len(idx) == 0 {
		c.Empty = "no known cost"
		return c
	}
	if left > 0 {
		c.Caption += fmt.Sprintf("; the %d most expensive drawn", len(idx))
	}
	labels := make([]string, len(idx))
	rep, est := make([]float64, len(idx)), make([]float64, len(idx))
	for n, i := range idx {
		j := &r.Jobs[i]
		labels[n] = clean(j.ID, 22)
		if j.Usage.CostSource == usage.CostSourceEstimate {
			est[n] = j.Usage.CostUSD
		} else {
			rep[n] = j.Usage.CostUSD
		}
	}
	return c.drawn(stackedBars{values: [][]float64{rep, est}, colors: []string{"#1a7f37", "#aceebb"},
		legend: []string{"reported by the CLI", "list-price estimate"}, labels: labels, horizontal: true, bottom: 24,
		axis: charts.ValueAxisOption{ValueFormatter: func(v float64) string { return fmt.Sprintf("$%.3g", v) }}}.draw(barHeight(len(idx))))
}

// parkChart plots how many jobs were parked on a quota over the run.
func (r *Report) parkChart() Chart {
	c := Chart{ID: "chart-parks", Title: "Quota parks over time", Caption: "jobs waiting for a quota reset"}
	if len(r.Parks) == 0 {
		if r.Totals.Parks > 0 {
			c.Empty = fmt.Sprintf("%d parks; the results file has no times (a run directory does)", r.Totals.Parks)
		} else {
			c.Empty = "no job waited for a quota"
		}
		return c
	}
	start, end := r.Parks[0].At, r.Parks[0].Until
	if m := r.Manifest; m != nil && !m.Started.IsZero() {
		start = m.Started
		if !m.Ended.IsZero() {
			end = m.Ended
		}
	}
	for _, p := range r.Parks {
		if p.At.Before(start) {
			start = p.At
		}
		if p.Until.After(end) {
			end = p.Until
		}
	}
	span := end.Sub(start)
	if span <= 0 {
		span = time.Minute
	}
	const points = 48
	values := make([]float64, points+1)
	labels := make([]string, points+1)
	for i := 0; i <= points; i++ {
		at := start.Add(time.Duration(float64(span) * float64(i) / points))
		for _, p := range r.Parks {
			if !at.Before(p.At) && at.Before(p.Until) {
				values[i]++
			}
		}
		labels[i] = "+" + formatDuration(at.Sub(start).Milliseconds())
	}
	peak := 0
	for _, v := range values {
		peak = max(peak, int(v))
	}
	c.Caption += fmt.Sprintf(", from %s (UTC) over %s", start.UTC().Format("2006-01-02 15:04"), formatDuration(span.Milliseconds()))
	svg, err := render(chartHeight, func(p *charts.Painter) error {
		opt := charts.NewLineChartOptionWithData([][]float64{values})
		opt.Theme = theme(statusColor("quota"))
		opt.FillArea = charts.Ptr(true)
		opt.Symbol = charts.Symbol{Shape: charts.SymbolNone}
		opt.XAxis.Labels = labels
		opt.XAxis.LabelFontStyle = labelFont
		opt.XAxis.LabelCount = 5
		opt.YAxis = []charts.YAxisOption{{Min: charts.Ptr(0.0), Max: charts.Ptr(float64(peak + 1)), LabelCount: min(peak+2, 6),
			ValueFormatter: integer, LabelFontStyle: labelFont}}
		opt.Legend = legend([]string{"parked jobs"})
		opt.Padding = charts.NewBox(12, 36, 24, 8)
		return p.LineChart(opt)
	})
	return c.drawn(svg, err)
}
