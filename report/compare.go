package report

import (
	"bytes"
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"math"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/outpost-dev/outpost/batch"
	"github.com/outpost-dev/outpost/outposterr"
)

// Changes of a task between two runs.
const (
	// ChangeFixed: solved (an attempt passed) in B, not in A.
	ChangeFixed = "fixed"
	// ChangeBroke: solved in A, not in B.
	ChangeBroke = "broke"
	// ChangeSame: solved in both, or in neither.
	ChangeSame = "same"
	// ChangeNew and ChangeGone: graded in one run only.
	ChangeNew  = "new"
	ChangeGone = "gone"
	// ChangeNotGraded: graded in neither run.
	ChangeNotGraded = "not graded"
)

// Comparison is two runs side by side, task by task.
type Comparison struct {
	A, B *Report
	// Tasks are every task of either run: changes first (broke, fixed,
	// new, gone), then the rest, each by task.
	Tasks []TaskChange
	// Counts counts the tasks per change.
	Counts map[string]int
	// K is the pass@k both runs can be compared at (the fewer of their
	// K; 0 when either has a single attempt per task); PassAtKA and
	// PassAtKB are their pass@K over their own tasks.
	K                  int
	PassAtKA, PassAtKB float64
}

// TaskChange is one task in both runs.
type TaskChange struct {
	Task   string
	Change string
	// A and B are the task's scores (nil: not graded in that run).
	A, B *batch.TaskScore
	// CostA and CostB sum the known costs of the task's jobs; JobsA and
	// JobsB count them.
	CostA, CostB float64
	JobsA, JobsB int
}

// solved says a task had a passing attempt.
func solved(ts *batch.TaskScore) bool { return ts != nil && ts.C > 0 }

// Compare compares run a (before) with run b (after).
func Compare(a, b *Report) *Comparison {
	c := &Comparison{A: a, B: b, Counts: map[string]int{}}
	type side struct {
		score *batch.TaskScore
		cost  float64
		jobs  int
	}
	tasks := map[string]*[2]side{}
	get := func(task string) *[2]side {
		if tasks[task] == nil {
			tasks[task] = &[2]side{}
		}
		return tasks[task]
	}
	for k, r := range []*Report{a, b} {
		for i := range r.Scores.Tasks {
			ts := r.Scores.Tasks[i]
			get(ts.Task)[k].score = &ts
		}
		for i := range r.Jobs {
			j := &r.Jobs[i]
			s := &get(j.Task)[k]
			s.jobs++
			if j.Usage.CostKnown {
				s.cost += j.Usage.CostUSD
			}
		}
	}
	for task, s := range tasks {
		tc := TaskChange{Task: task, A: s[0].score, B: s[1].score, CostA: s[0].cost, CostB: s[1].cost, JobsA: s[0].jobs, JobsB: s[1].jobs}
		switch {
		case tc.A == nil && tc.B == nil:
			tc.Change = ChangeNotGraded
		case tc.A == nil:
			tc.Change = ChangeNew
		case tc.B == nil:
			tc.Change = ChangeGone
		case !solved(tc.A) && solved(tc.B):
			tc.Change = ChangeFixed
		case solved(tc.A) && !solved(tc.B):
			tc.Change = ChangeBroke
		default:
			tc.Change = ChangeSame
		}
		c.Counts[tc.Change]++
		c.Tasks = append(c.Tasks, tc)
	}
	rank := map[string]int{ChangeBroke: 0, ChangeFixed: 1, ChangeNew: 2, ChangeGone: 3, ChangeSame: 4, ChangeNotGraded: 5}
	sort.Slice(c.Tasks, func(i, j int) bool {
		x, y := c.Tasks[i], c.Tasks[j]
		if rank[x.Change] != rank[y.Change] {
			return rank[x.Change] < rank[y.Change]
		}
		return x.Task < y.Task
	})
	if ka, kb := a.Scores.K, b.Scores.K; ka > 1 && kb > 1 {
		c.K = min(ka, kb)
		c.PassAtKA, c.PassAtKB = passAtK(a.Scores, c.K), passAtK(b.Scores, c.K)
	}
	return c
}

// passAtK is the mean pass@k of the tasks with a graded attempt.
func passAtK(s batch.Scores, k int) float64 {
	sum, n := 0.0, 0
	for _, t := range s.Tasks {
		if t.N > 0 {
			sum += batch.PassAtK(t.N, t.C, k)
			n++
		}
	}
	if n == 0 {
		return 0
	}
	return sum / float64(n)
}

// CompareFormats lists the formats a comparison renders in.
var CompareFormats = []string{"table", "markdown", "html"}

// Render writes c in format (table, markdown or html).
func (c *Comparison) Render(w io.Writer, format string) error {
	write := writerOf(format, map[string]func(io.Writer) error{"table": c.Table, "markdown": c.Markdown, "html": c.HTML})
	if write == nil {
		return outposterr.Wrap(outposterr.Configuration, errFormat, "%q: --compare renders one of %v", format, CompareFormats)
	}
	return write(w)
}

func signed(v float64, format string) string {
	if math.Abs(v) < 5e-7 {
		v = 0
	}
	s := fmt.Sprintf(format, v)
	if v >= 0 {
		s = "+" + s
	}
	return s
}

// signedUSD is "+$0.1200" or "-$0.1200".
func signedUSD(v float64) string {
	if v < -5e-5 {
		return fmt.Sprintf("-$%.4f", -v)
	}
	return fmt.Sprintf("+$%.4f", math.Abs(v))
}

// Summary is the comparison's lines: each run's headline, then the pass@1,
// pass@k, solved and cost deltas, and the task changes.
func (c *Comparison) Summary() []string {
	a, b := c.A, c.B
	lines := []string{"A " + a.Source + ": " + a.Headline(), "B " + b.Source + ": " + b.Headline()}
	var d []string
	if a.Totals.Graded > 0 || b.Totals.Graded > 0 {
		d = append(d, fmt.Sprintf("solved %d → %d (%s)", a.Totals.Solved, b.Totals.Solved, signed(float64(b.Totals.Solved-a.Totals.Solved), "%.0f")),
			fmt.Sprintf("pass@1 %.3f → %.3f (%s)", a.Scores.PassAt1, b.Scores.PassAt1, signed(b.Scores.PassAt1-a.Scores.PassAt1, "%.3f")))
		if c.K > 1 {
			d = append(d, fmt.Sprintf("pass@%d %.3f → %.3f (%s)", c.K, c.PassAtKA, c.PassAtKB, signed(c.PassAtKB-c.PassAtKA, "%.3f")))
		}
	}
	d = append(d, "cost "+costDelta(a.Totals, b.Totals))
	lines = append(lines, "Δ "+strings.Join(d, "; "))
	var ch []string
	for _, k := range []string{ChangeFixed, ChangeBroke, ChangeSame, ChangeNew, ChangeGone, ChangeNotGraded} {
		if n := c.Counts[k]; n > 0 {
			ch = append(ch, fmt.Sprintf("%d %s", n, k))
		}
	}
	if len(ch) == 0 {
		ch = []string{"no tasks"}
	}
	return append(lines, "tasks: "+strings.Join(ch, ", "))
}

// costDelta is "$1.2000 → $1.5000 (+$0.3000, +25%)", with the runs' unknown
// costs said.
func costDelta(a, b Totals) string {
	s := fmt.Sprintf("%s → %s (%s", a.totalCost(), b.totalCost(), signedUSD(b.CostUSD-a.CostUSD))
	if a.CostUSD > 0 {
		s += ", " + signed((b.CostUSD-a.CostUSD)/a.CostUSD*100, "%.0f") + "%"
	}
	s += ")"
	if a.CostUnknown > 0 || b.CostUnknown > 0 {
		s += " (known costs only)"
	}
	return s
}

func scoreCell(ts *batch.TaskScore) string {
	if ts == nil {
		return "—"
	}
	return fmt.Sprintf("%d/%d", ts.C, ts.N)
}

func pass1Delta(tc TaskChange) string {
	switch {
	case tc.A == nil || tc.B == nil || tc.A.N == 0 || tc.B.N == 0:
		return "—"
	}
	return fmt.Sprintf("%.3f → %.3f (%s)", tc.A.PassAt1, tc.B.PassAt1, signed(tc.B.PassAt1-tc.A.PassAt1, "%.3f"))
}

func taskCost(tc TaskChange) string {
	return fmt.Sprintf("$%.4f → $%.4f (%s)", tc.CostA, tc.CostB, signedUSD(tc.CostB-tc.CostA))
}

// maxCompareRows bounds the task rows of the table and Markdown formats.
const maxCompareRows = 1000

// Table writes the summary and a row per task.
func (c *Comparison) Table(w io.Writer) error {
	for _, l := range c.Summary() {
		fmt.Fprintln(w, clean(l, 2000))
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TASK\tCHANGE\tA PASSED\tB PASSED\tPASS@1 A → B\tCOST A → B")
	for i, tc := range c.Tasks {
		if i == maxCompareRows {
			fmt.Fprintf(tw, "… %d more tasks (the HTML format shows them all)\n", len(c.Tasks)-i)
			break
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", clean(tc.Task, 50), tc.Change, scoreCell(tc.A), scoreCell(tc.B), pass1Delta(tc), taskCost(tc))
	}
	return tw.Flush()
}

var changeIcons = map[string]string{ChangeFixed: "🟢", ChangeBroke: "🔴", ChangeSame: "⚪", ChangeNew: "🆕", ChangeGone: "➖", ChangeNotGraded: "➖"}

// Markdown writes the summary and a table of the tasks.
func (c *Comparison) Markdown(w io.Writer) error {
	var b strings.Builder
	b.WriteString("## Outpost comparison\n\n")
	for _, l := range c.Summary() {
		fmt.Fprintf(&b, "- %s\n", md(l, 2000))
	}
	b.WriteString("\n| task | change | A passed | B passed | pass@1 A → B | cost A → B |\n|---|---|---:|---:|---:|---:|\n")
	for i, tc := range c.Tasks {
		if i == maxCompareRows {
			fmt.Fprintf(&b, "\n%d more tasks are in the HTML format.\n", len(c.Tasks)-i)
			break
		}
		fmt.Fprintf(&b, "| %s | %s %s | %s | %s | %s | %s |\n", md(tc.Task, 80), changeIcons[tc.Change], tc.Change, scoreCell(tc.A), scoreCell(tc.B),
			pass1Delta(tc), md(taskCost(tc), 80))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

var (
	//go:embed compare.tmpl
	compareTemplate string

	comparePage = template.Must(template.New("compare").Parse(compareTemplate))
)

type compareRow struct {
	TaskChange
	AScore, BScore, Pass1, Cost string
}

// HTML writes one self-contained page (no script: the policy allows none)
// with the summary and a row per task.
func (c *Comparison) HTML(w io.Writer) error {
	p := struct {
		Summary   []string
		Generated string
		CSP       string
		Style     template.CSS
		Rows      []compareRow
		Counts    map[string]int
	}{Summary: c.Summary(), Generated: time.Now().UTC().Format("2006-01-02 15:04 UTC"),
		CSP:   "default-src 'none'; style-src 'unsafe-inline'; script-src 'none'; base-uri 'none'; form-action 'none'",
		Style: template.CSS(pageStyle), Counts: c.Counts} //nolint:gosec // a constant embedded in the binary
	for _, tc := range c.Tasks {
		p.Rows = append(p.Rows, compareRow{TaskChange: tc, AScore: scoreCell(tc.A), BScore: scoreCell(tc.B), Pass1: pass1Delta(tc), Cost: taskCost(tc)})
	}
	var buf bytes.Buffer
	if err := comparePage.Execute(&buf, p); err != nil {
		return err
	}
	_, err := w.Write(buf.Bytes())
	return err
}
