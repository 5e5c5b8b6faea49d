package report

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"unicode"
	"unicode/utf8"
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

func agentsOf(j *Job) string {
	if len(j.Agents) > 1 {
		return strings.Join(j.Agents, "→")
	}
	if j.Agent == "" && len(j.Agents) == 1 {
		return j.Agents[0]
	}
	return j.Agent
}

// Table writes a terminal table and a totals line.
func (r *Report) Table(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "JOB\tAGENT\tOUTCOME\tDURATION\tTURNS\tRETRIES\tPARKS\tTOKENS\tCOST")
	for i := range r.Jobs {
		j := &r.Jobs[i]
		out := j.Status()
		if d := j.Detail(); d != "" {
			out = d
		}
		if v := j.VerdictText(); v != "" {
			out += "; " + v
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%d\t%s\t%s\n", clean(j.ID, 40), clean(agentsOf(j), 30), clean(out, 60),
			formatDuration(j.DurationMS), j.Turns, j.Retries, j.Parks, formatTokens(j.Usage.Tokens()), formatCost(j.Usage))
	}
	t := r.Totals
	fmt.Fprintf(tw, "TOTAL\t\t%s\t%s\t%d\t%d\t%d\t%s\t%s\n", summary(t), formatDuration(t.DurationMS), t.Turns, t.Retries, t.Parks,
		formatTokens(t.Tokens), t.totalCost())
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, n := range r.Notes {
		fmt.Fprintln(w, "note:", clean(n, 300))
	}
	return nil
}

// summary is "11 ok, 4 failed" (and unfinished ones).
func summary(t Totals) string {
	s := fmt.Sprintf("%d ok, %d failed", t.OK, t.Failed)
	if t.Unfinished > 0 {
		s += fmt.Sprintf(", %d unfinished", t.Unfinished)
	}
	if t.Graded > 0 {
		s += fmt.Sprintf("; solved %d of %d graded", t.Solved, t.Graded)
	}
	return s
}

// mdEscaper escapes text for a GitHub-flavoured Markdown table cell: HTML
// markup becomes entities (the step summary renders HTML), Markdown
// punctuation is backslash-escaped, and the cell stays on one line.
var mdEscaper = strings.NewReplacer(
	"&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;",
	`\`, `\\`, "|", `\|`, "`", "\\`", "*", `\*`, "_", `\_`, "[", `\[`, "]", `\]`,
	"#", `\#`, "~", `\~`, "!", `\!`, "$", `\$`, ":", "&#58;", "@", "&#64;",
)

func md(s string, n int) string { return mdEscaper.Replace(clean(s, n)) }

var statusIcon = map[string]string{"ok": "✅", "unfinished": "⏸️"}

func icon(status string) string {
	if i, ok := statusIcon[status]; ok {
		return i
	}
	return "❌"
}

// Markdown writes a summary line and a job table ending with a totals row;
// it fits $GITHUB_STEP_SUMMARY.
func (r *Report) Markdown(w io.Writer) error {
	t := r.Totals
	var b strings.Builder
	b.WriteString("## Outpost report\n\n")
	fmt.Fprintf(&b, "**%d jobs**: %d ok, %d failed", t.Jobs, t.OK, t.Failed)
	if t.Unfinished > 0 {
		fmt.Fprintf(&b, ", %d unfinished", t.Unfinished)
	}
	if t.Graded > 0 {
		fmt.Fprintf(&b, " · solved %d of %d graded", t.Solved, t.Graded)
	}
	fmt.Fprintf(&b, " · %s tokens · cost %s", formatTokens(t.Tokens), md(t.totalCost(), 60))
	if t.WallMS > 0 {
		fmt.Fprintf(&b, " · %s wall time", formatDuration(t.WallMS))
	}
	b.WriteString("\n\n")
	b.WriteString("| job | agent | outcome | duration | turns | retries | parks | tokens | cost |\n")
	b.WriteString("|---|---|---|---:|---:|---:|---:|---:|---:|\n")
	for i := range r.Jobs {
		j := &r.Jobs[i]
		out := j.Status()
		if d := j.Detail(); d != "" {
			out = d
		}
		if v := j.VerdictText(); v != "" {
			out += "; " + v
		}
		fmt.Fprintf(&b, "| %s | %s | %s %s | %s | %d | %d | %d | %s | %s |\n", md(j.ID, 80), md(agentsOf(j), 40), icon(j.Status()), md(out, 120),
			formatDuration(j.DurationMS), j.Turns, j.Retries, j.Parks, formatTokens(j.Usage.Tokens()), md(formatCost(j.Usage), 30))
	}
	fmt.Fprintf(&b, "| **total** | | **%s** | **%s** | **%d** | **%d** | **%d** | **%s** | **%s** |\n", summary(t),
		formatDuration(t.DurationMS), t.Turns, t.Retries, t.Parks, formatTokens(t.Tokens), md(t.totalCost(), 60))
	if t.CostEstimated > 0 || t.CostUnknown > 0 {
		b.WriteString("\n~ marks a cost estimated from token counts at API list prices; unknown costs are not counted.\n")
	}
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "\n> note: %s\n", md(n, 300))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// ghData escapes a workflow command's message; ghProp a property value.
var (
	ghData = strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A")
	ghProp = strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A", ":", "%3A", ",", "%2C")
)

// GitHub writes GitHub Actions workflow commands: an ::error per failed or
// unfinished job, a ::warning per job that succeeded only after retries,
// parks or a fallback, and a ::notice with the totals.
func (r *Report) GitHub(w io.Writer) error {
	var b strings.Builder
	for i := range r.Jobs {
		j := &r.Jobs[i]
		title := ghProp.Replace(clean("outpost job "+j.ID+" ("+agentsOf(j)+")", 200))
		switch j.Status() {
		case "ok":
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
				fmt.Fprintf(&b, "::warning title=%s::%s\n", title, ghData.Replace(clean("succeeded after "+strings.Join(why, ", "), 500)))
			}
		case "unfinished":
			fmt.Fprintf(&b, "::error title=%s::%s\n", title, ghData.Replace("the run stopped before this job finished"))
		default:
			msg := j.Detail()
			if e := j.Outcome.Error; e != "" {
				msg += ": " + strings.TrimPrefix(e, j.Outcome.Class+": ")
			}
			fmt.Fprintf(&b, "::error title=%s::%s\n", title, ghData.Replace(clean(msg, 1000)))
		}
	}
	t := r.Totals
	fmt.Fprintf(&b, "::notice title=outpost report::%s\n", ghData.Replace(fmt.Sprintf("%d jobs: %s; %s tokens; cost %s",
		t.Jobs, summary(t), formatTokens(t.Tokens), t.totalCost())))
	_, err := io.WriteString(w, b.String())
	return err
}
