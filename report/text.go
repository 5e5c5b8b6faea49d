package report

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"unicode"
	"unicode/utf8"

	"github.com/outpost-dev/outpost/batch"
)

// clean makes s safe for one terminal or table cell: control characters
// (escape sequences included) and invalid UTF-8 become U+FFFD, runs of
// white space one space, and it is cut to n runes.
func clean(s string, n int) string {
	var b strings.Builder
	space := false
	count := 0
	for i, w := 0, 0; i < len(s); i += w {
		r, size := utf8.DecodeRuneInString(s[i:])
		w = size
		switch {
		case r == utf8.RuneError && size <= 1:
			r = '\uFFFD'
		case r == '\n' || r == '\t' || r == '\r' || unicode.IsSpace(r):
			if !space && b.Len() > 0 {
				b.WriteByte(' ')
				count++
			}
			space = true
			continue
		case unicode.IsControl(r) || r == '\u2028' || r == '\u2029' || unicode.Is(unicode.Bidi_Control, r):
			r = '\uFFFD'
		}
		space = false
		if count >= n {
			b.WriteString("…")
			break
		}
		b.WriteRune(r)
		count++
	}
	return strings.TrimRight(b.String(), " ")
}

func agentsOf(j *JobRow) string {
	if len(j.Agents) > 1 {
		return strings.Join(j.Agents, "→")
	}
	if j.Agent == "" && len(j.Agents) == 1 {
		return j.Agents[0]
	}
	return j.Agent
}

// Table writes the headline (solved first), a terminal table with a totals
// line, and the per-task scores when jobs were graded.
func (r *Report) Table(w io.Writer) error {
	fmt.Fprintln(w, clean(r.Headline(), 1000))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "JOB\tAGENT\tVERDICT\tREWARD\tOUTCOME\tDURATION\tTURNS\tRETRIES\tPARKS\tTOKENS\tCOST")
	for i := range r.Jobs {
		j := &r.Jobs[i]
		out := j.Status()
		if d := j.Detail(); d != "" {
			out = d
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%s\t%s\n", clean(j.ID, 40), clean(agentsOf(j), 30), j.Grade(), rewardText(j.Reward),
			clean(out, 60), formatDuration(j.DurationMS), j.Turns, j.Retries, j.Parks, formatTokens(j.Usage.Tokens()), formatCost(j.Usage))
	}
	t := r.Totals
	fmt.Fprintf(tw, "TOTAL\t\t%s\t\t%s\t%s\t%d\t%d\t%d\t%s\t%s\n", solvedShort(t), summary(t), formatDuration(t.DurationMS), t.Turns, t.Retries, t.Parks,
		formatTokens(t.Tokens), t.totalCost())
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(r.Scores.Tasks) > 0 {
		fmt.Fprintln(w)
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "TASK\tGRADED\tPASSED\tERRORS\tPASS@1\tPASS@N\tREWARD")
		for i, ts := range r.Scores.Tasks {
			if i == maxTaskRows {
				fmt.Fprintf(tw, "… %d more tasks\n", len(r.Scores.Tasks)-i)
				break
			}
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t%s\t%s\n", clean(ts.Task, 40), ts.N, ts.C, ts.Errors, passText(ts.N, ts.PassAt1),
				passAtN(ts), ts.RewardStats)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	for _, n := range r.Notes {
		fmt.Fprintln(w, "note:", clean(n, 300))
	}
	return nil
}

// maxTaskRows bounds the per-task rows of the table and Markdown formats.
const maxTaskRows = 500

// Bounds on the Markdown's size: GitHub drops a step summary over 1 MiB
// whole. The job rows stop at maxMarkdownJobBytes (the totals row and the
// tasks follow), the task rows and notes at maxMarkdownBytes.
const (
	maxMarkdownJobBytes = 512 << 10
	maxMarkdownBytes    = 1000 << 10
)

// summary is "11 ok, 4 failed" (and unfinished ones): how the runs ended.
func summary(t Totals) string {
	s := fmt.Sprintf("%d ok, %d failed", t.OK, t.Failed)
	if t.Unfinished > 0 {
		s += fmt.Sprintf(", %d unfinished", t.Unfinished)
	}
	return s
}

// solvedShort is the totals row's verdict cell: "3 of 6 solved" or "not graded".
func solvedShort(t Totals) string {
	if t.Graded == 0 {
		return GradeNotGraded
	}
	return fmt.Sprintf("%d of %d solved", t.Solved, t.Graded)
}

// Headline leads with what was solved: "solved 3 of 6 graded jobs (2
// failed, 1 verifier error; 9 not graded); pass@1 0.500, pass@2 0.750 over
// 4 tasks; mean reward 0.583 ± 0.201; runs: 11 ok, 4 failed". Without a
// verifier it says the jobs are not graded; it never calls a job that only
// ran to its end "succeeded".
func (r *Report) Headline() string {
	t, s := r.Totals, r.Scores
	var b strings.Builder
	if t.Graded == 0 {
		fmt.Fprintf(&b, "%d jobs, not graded (no verifier)", t.Jobs)
	} else {
		fmt.Fprintf(&b, "solved %d of %d graded jobs (%d failed, %d verifier errors", t.Solved, t.Graded, t.VerdictFail, t.VerdictError)
		if t.NotGraded > 0 {
			fmt.Fprintf(&b, "; %d not graded", t.NotGraded)
		}
		fmt.Fprintf(&b, "); pass@1 %.3f", s.PassAt1)
		if s.K > 1 {
			fmt.Fprintf(&b, ", pass@%d %.3f", s.K, s.PassAtK)
		}
		fmt.Fprintf(&b, " over %d tasks", len(s.Tasks))
		if s.MeanReward != nil {
			fmt.Fprintf(&b, "; mean reward %s", s.RewardStats)
		}
	}
	fmt.Fprintf(&b, "; runs: %s", summary(t))
	return b.String()
}

func rewardText(r *float64) string {
	if r == nil {
		return "—"
	}
	return fmt.Sprintf("%.3g", *r)
}

func passText(n int, p float64) string {
	if n == 0 {
		return "—"
	}
	return fmt.Sprintf("%.3f", p)
}

// passAtN is a task's pass@n over its n graded attempts: "pass@3 0.900".
func passAtN(ts batch.TaskScore) string {
	if ts.N == 0 {
		return "—"
	}
	return fmt.Sprintf("pass@%d %.3f", ts.N, ts.PassAtN)
}

// mdEscaper escapes text for a GitHub-flavoured Markdown table cell: HTML
// markup becomes entities (the step summary renders HTML), Markdown
// punctuation is backslash-escaped, and the cell stays on one line.
var mdEscaper = strings.NewReplacer(
	"&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;",
	`\`, `\\`, "|", `\|`, "`", "\\`", "*", `\*`, "_", `\_`, "[", `\[`, "]", `\]`,
	"#", `\#`, "~", `\~`, "!", `\!`, "$", `\$`, ":", "&#58;",
)

func md(s string, n int) string { return mdEscaper.Replace(inertMentions(clean(s, n))) }

// inertMentions puts a zero-width space after an @ that starts a word (a
// mention: "@octocat", "@org/team"): GitHub finds mentions in the rendered
// text, after "&#64;" or "\@" have become "@" again, so only a character
// between @ and the name keeps it from pinging anyone. An @ inside a word
// ("pass@1", an e-mail address) mentions no one and is kept as it is.
func inertMentions(s string) string {
	if !strings.Contains(s, "@") {
		return s
	}
	var b strings.Builder
	prev := ' '
	for _, r := range s {
		b.WriteRune(r)
		if r == '@' && !unicode.IsLetter(prev) && !unicode.IsDigit(prev) && prev != '_' {
			b.WriteRune('\u200b')
		}
		prev = r
	}
	return b.String()
}

var statusIcon = map[string]string{"ok": "✅", "unfinished": "⏸️"}

func icon(status string) string {
	if i, ok := statusIcon[status]; ok {
		return i
	}
	return "❌"
}

// Markdown writes the headline (solved first), a job table ending with a
// totals row, and the per-task scores; it fits $GITHUB_STEP_SUMMARY.
func (r *Report) Markdown(w io.Writer) error {
	t := r.Totals
	var b strings.Builder
	moreJobs := 0
	b.WriteString("## Outpost report\n\n")
	fmt.Fprintf(&b, "**%s**\n\n", md(r.Headline(), 1000))
	fmt.Fprintf(&b, "%d jobs · %s tokens · cost %s", t.Jobs, formatTokens(t.Tokens), md(t.totalCost(), 60))
	if t.WallMS > 0 {
		fmt.Fprintf(&b, " · %s wall time", formatDuration(t.WallMS))
	}
	b.WriteString("\n\n")
	b.WriteString("| job | agent | verdict | reward | outcome | duration | turns | retries | parks | tokens | cost |\n")
	b.WriteString("|---|---|---|---:|---|---:|---:|---:|---:|---:|---:|\n")
	for i := range r.Jobs {
		j := &r.Jobs[i]
		out := j.Status()
		if d := j.Detail(); d != "" {
			out = d
		}
		row := fmt.Sprintf("| %s | %s | %s %s | %s | %s %s | %s | %d | %d | %d | %s | %s |\n", md(j.ID, 80), md(agentsOf(j), 40),
			gradeIcon(j.Grade()), j.Grade(), rewardText(j.Reward), icon(j.Status()), md(out, 120),
			formatDuration(j.DurationMS), j.Turns, j.Retries, j.Parks, formatTokens(j.Usage.Tokens()), md(formatCost(j.Usage), 30))
		if b.Len()+len(row) > maxMarkdownJobBytes {
			moreJobs = len(r.Jobs) - i
			break
		}
		b.WriteString(row)
	}
	fmt.Fprintf(&b, "| **total** | | **%s** | | **%s** | **%s** | **%d** | **%d** | **%d** | **%s** | **%s** |\n", solvedShort(t), summary(t),
		formatDuration(t.DurationMS), t.Turns, t.Retries, t.Parks, formatTokens(t.Tokens), md(t.totalCost(), 60))
	if moreJobs > 0 {
		fmt.Fprintf(&b, "\n%d more jobs are in the HTML report.\n", moreJobs)
	}
	if t.CostEstimated > 0 || t.CostUnknown > 0 {
		b.WriteString("\n~ marks a cost estimated from token counts at API list prices; unknown costs are not counted.\n")
	}
	if len(r.Scores.Tasks) > 0 {
		b.WriteString("\n### Tasks\n\npass@1 and pass@n are unbiased estimates over each task's n attempts graded pass or fail (verifier errors count in neither); reward is the mean ± its standard error.\n\n")
		b.WriteString("| task | graded | passed | errors | pass@1 | pass@n | reward |\n|---|---:|---:|---:|---:|---:|---:|\n")
		for i, ts := range r.Scores.Tasks {
			row := fmt.Sprintf("| %s | %d | %d | %d | %s | %s | %s |\n", md(ts.Task, 80), ts.N, ts.C, ts.Errors, passText(ts.N, ts.PassAt1),
				passAtN(ts), ts.RewardStats)
			if i == maxTaskRows || b.Len()+len(row) > maxMarkdownBytes {
				fmt.Fprintf(&b, "\n%d more tasks are in the HTML report.\n", len(r.Scores.Tasks)-i)
				break
			}
			b.WriteString(row)
		}
	}
	for i, n := range r.Notes {
		note := fmt.Sprintf("\n> note: %s\n", md(n, 300))
		if b.Len()+len(note) > maxMarkdownBytes {
			fmt.Fprintf(&b, "\n> %d more notes are in the HTML report.\n", len(r.Notes)-i)
			break
		}
		b.WriteString(note)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

var gradeIcons = map[string]string{GradePass: "✅", GradeFail: "❌", GradeError: "⚠️", GradeNotGraded: "➖", GradeUnfinished: "⏸️"}

func gradeIcon(g string) string { return gradeIcons[g] }

// ghData escapes a workflow command's message; ghProp a property value.
var (
	ghData = strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A")
	ghProp = strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A", ":", "%3A", ",", "%2C")
)

// GitHub writes GitHub Actions workflow commands: an ::error per job whose
// verifier failed it (at its failing tests' files and lines and its patch's
// changed files, when known), per verifier error, per failed job without a
// verdict and per unfinished job; a ::warning per job that finished only
// after retries, parks or a fallback, or that passed its verifier although
// its run failed; and a ::notice with the headline (solved first).
func (r *Report) GitHub(w io.Writer) error {
	var b strings.Builder
	for i := range r.Jobs {
		j := &r.Jobs[i]
		title := "title=" + ghProp.Replace(clean("outpost job "+j.ID+" ("+agentsOf(j)+")", 200))
		runErr := j.Detail()
		if e := j.Outcome.Error; e != "" {
			runErr += ": " + strings.TrimPrefix(e, j.Outcome.Class+": ")
		}
		switch g := j.Grade(); {
		case g == GradeUnfinished:
			fmt.Fprintf(&b, "::error %s::%s\n", title, ghData.Replace("the run stopped before this job finished"))
		case g == GradeFail:
			msg := "verdict fail"
			if j.Reward != nil {
				msg += fmt.Sprintf(" (reward %s)", rewardText(j.Reward))
			}
			if v := j.Verify; v != nil && v.Error != "" {
				msg += ": " + v.Error
			}
			if !j.Outcome.OK {
				msg += "; the run ended " + runErr
			}
			locs := j.Locations()
			if len(locs) == 0 {
				fmt.Fprintf(&b, "::error %s::%s\n", title, ghData.Replace(clean(msg, 1000)))
			}
			for _, l := range locs {
				m := msg + "; this file was changed by the job's patch"
				if l.Test {
					m = msg + "; a test failed here"
				}
				fmt.Fprintf(&b, "::error %s,%s::%s\n", ghLocation(l), title, ghData.Replace(clean(m, 1000)))
			}
		case g == GradeError:
			msg := "verifier error (not graded)"
			if v := j.Verify; v != nil && v.Error != "" {
				msg += ": " + v.Error
			}
			fmt.Fprintf(&b, "::error %s::%s\n", title, ghData.Replace(clean(msg, 1000)))
		case !j.Outcome.OK && g == GradePass:
			fmt.Fprintf(&b, "::warning %s::%s\n", title, ghData.Replace(clean("the verifier passed it although the run ended "+runErr, 1000)))
		case !j.Outcome.OK:
			fmt.Fprintf(&b, "::error %s::%s\n", title, ghData.Replace(clean(runErr, 1000)))
		default:
			var why []string
			if j.Retries > 0 {
				why = append(why, fmt.Sprintf("%d outage retries", j.Retries))
			}
			if j.Parks > 0 {
				why = append(why, fmt.Sprintf("%d quota parks", j.Parks))
			}
			if len(j.Agents) > 1 {
				why = append(why, "fallback "+strings.Join(j.Agents, "→"))
			}
			if len(why) > 0 {
				what := "finished (not graded)"
				if g == GradePass {
					what = "solved"
				}
				fmt.Fprintf(&b, "::warning %s::%s\n", title, ghData.Replace(clean(what+" after "+strings.Join(why, ", "), 500)))
			}
		}
		if j.Outcome.SecretPrinted {
			fmt.Fprintf(&b, "::warning %s::%s\n", title, ghData.Replace(
				"the agent printed a secret its lease holds, or wrote one into its changes (replaced by [REDACTED]); it may follow instructions planted in its task"))
		}
	}
	t := r.Totals
	fmt.Fprintf(&b, "::notice title=outpost report::%s\n", ghData.Replace(clean(fmt.Sprintf("%s; %s tokens; cost %s",
		r.Headline(), formatTokens(t.Tokens), t.totalCost()), 2000)))
	_, err := io.WriteString(w, b.String())
	return err
}

// ghLocation is an annotation's "file=…,line=…" properties.
func ghLocation(l Location) string {
	s := "file=" + ghProp.Replace(l.File)
	if l.Line > 0 {
		s += fmt.Sprintf(",line=%d", l.Line)
	}
	return s
}
