package report

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"strings"
	"time"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/batch"
	"github.com/outpost-dev/outpost/runrec"
	"github.com/outpost-dev/outpost/usage"
)

var (
	//go:embed html.tmpl
	pageTemplate string
	//go:embed report.css
	pageStyle string
	//go:embed report.js
	pageScript string

	page = template.Must(template.New("report").Parse(pageTemplate))
)

// Bounds on what one conversation item shows.
const (
	maxItemText = 20 << 10
	maxCode     = 8 << 10
)

type htmlPage struct {
	Title, Source, Generated string
	Manifest                 *runrec.Manifest
	CLIVersions              []kv
	Totals                   Totals
	Scores                   batch.Scores
	Headline                 string
	MeanReward               string
	TotalCost                string
	CostShort, TokensShort   string
	SolvedPct, OKPct         int
	Wall                     string
	Charts                   []Chart
	Notes                    []string
	CSP                      string
	Style                    template.CSS
	Script                   template.JS
	// Data is the jobs and tasks as JSON (escaped by json.Marshal: no
	// markup can close its script element); the page's script builds
	// rows from it. Details are the jobs' details, detailChunk jobs to a
	// JSON array, gzipped and base64-encoded (a 10,000-job page parses in
	// a fraction of the time), each inflated and parsed only when one of
	// its jobs is opened.
	Data     template.JS
	Details  []template.JS
	Statuses []kv
	Grades   []kv
}

type kv struct{ K, V string }

// pageData is the page's JSON: a summary per job (what the table, the
// filters and the search need) and the per-task scores. The jobs' details
// are apart (Details, chunks of detailChunk), so the first render parses
// only the summaries.
type pageData struct {
	Jobs   []jobRow  `json:"jobs"`
	Tasks  []taskRow `json:"tasks"`
	Grades []string  `json:"grades"`
	K      int       `json:"k,omitempty"`
	Chunk  int       `json:"chunk"`

	details []json.RawMessage
}

// detailChunk is how many jobs' details one script element holds.
const detailChunk = 500

// jobRow is one job's table row.
type jobRow struct {
	ID       string `json:"id"`
	Task     string `json:"task,omitempty"`
	Trial    int    `json:"trial,omitempty"`
	Agents   string `json:"agents"`
	Model    string `json:"model,omitempty"`
	Status   string `json:"status"`
	Tone     string `json:"tone"`
	Detail   string `json:"detail,omitempty"`
	Grade    string `json:"grade"`
	Reward   string `json:"reward"`
	Duration string `json:"duration"`
	Turns    int    `json:"turns"`
	Retries  int    `json:"retries"`
	Parks    int    `json:"parks"`
	Tokens   string `json:"tokens"`
	Cost     string `json:"cost"`
	CostNote string `json:"cost_note"`
	// Find is the lower-case text the search box matches: id, task,
	// agents, model, status, verdict, the prompt's start.
	Find string `json:"find"`
}

// jobDetail is what an opened job shows.
type jobDetail struct {
	Prompt    string        `json:"prompt,omitempty"`
	PromptCut int64         `json:"prompt_cut,omitempty"`
	Metadata  string        `json:"metadata,omitempty"`
	Verify    *verifyDetail `json:"verify,omitempty"`
	Files     []string      `json:"files,omitempty"`
	Patch     string        `json:"patch,omitempty"`
	Error     string        `json:"error,omitempty"`
	Text      string        `json:"text,omitempty"`
	Attempts  []htmlAttempt `json:"attempts,omitempty"`
	Omitted   string        `json:"omitted,omitempty"`
}

type verifyDetail struct {
	Exit     string `json:"exit,omitempty"`
	Duration string `json:"duration,omitempty"`
	Output   string `json:"output,omitempty"`
	Error    string `json:"error,omitempty"`
}

type taskRow struct {
	Task   string `json:"task"`
	N      int    `json:"n"`
	C      int    `json:"c"`
	Errors int    `json:"errors"`
	Pass1  string `json:"pass1"`
	PassN  string `json:"passn"`
	PassK  string `json:"passk,omitempty"`
	Reward string `json:"reward"`
}

type htmlAttempt struct {
	N          int        `json:"n"`
	Agent      string     `json:"agent,omitempty"`
	Model      string     `json:"model,omitempty"`
	Started    string     `json:"started,omitempty"`
	Duration   string     `json:"duration,omitempty"`
	Status     string     `json:"status"`
	Tone       string     `json:"tone"`
	Detail     string     `json:"detail,omitempty"`
	Error      string     `json:"error,omitempty"`
	Unfinished bool       `json:"unfinished,omitempty"`
	Items      []convItem `json:"items,omitempty"`
	Truncated  string     `json:"truncated,omitempty"`
	Omitted    int        `json:"omitted,omitempty"`
	Stderr     string     `json:"stderr,omitempty"`
	Patch      string     `json:"patch,omitempty"`
	Usage      string     `json:"usage,omitempty"`
}

// convItem is one entry of a trajectory rendered as a conversation.
type convItem struct {
	// Kind selects the look: assistant, user, reasoning, tool, result,
	// error-result, file, retry, quota, warning, failure, stderr, system,
	// usage, finished, raw.
	Kind  string `json:"k"`
	Title string `json:"t"`
	Text  string `json:"x,omitempty"`
	Code  string `json:"c,omitempty"`
	Meta  string `json:"m,omitempty"`
	Final bool   `json:"f,omitempty"`
}

// Bounds on what the page embeds: per job its prompt, patch and metadata,
// and in all the jobs' details (past it, a job's details say to open the
// run directory instead).
const (
	maxPagePrompt   = 32 << 10
	maxPagePatch    = 256 << 10
	maxPageMetadata = 32 << 10
	maxPageDetails  = 96 << 20
	maxFindPrompt   = 300
)

// tone maps a status to one of the page's fixed CSS classes, never to the
// status text itself (a class comes from hostile input).
func tone(status string) string {
	if _, ok := statusColors[status]; ok {
		return "st-" + status
	}
	return "st-failed"
}

func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := n
	for i > 0 && i < len(s) && s[i]&0xC0 == 0x80 {
		i--
	}
	return s[:i] + fmt.Sprintf("\n… (%d more bytes)", len(s)-i)
}

// HTML writes one self-contained page: inline CSS, a small inline script
// (allowed by its hash in the page's Content-Security-Policy, which also
// forbids every network fetch), inline SVG charts, and the jobs as JSON
// data from which the script builds the job table (a page of rows at a
// time, filtered by verdict and outcome and searched) and, when a job is
// opened, its prompt, metadata, verdict, verifier output, coloured patch
// and trajectory as a conversation. The script sets every text as text
// (never as markup).
func (r *Report) HTML(w io.Writer) error {
	sum := sha256.Sum256([]byte(pageScript))
	p := htmlPage{
		Title: "Outpost report", Source: r.Source, Generated: time.Now().UTC().Format("2006-01-02 15:04 UTC"),
		Manifest: r.Manifest, Totals: r.Totals, Scores: r.Scores, Headline: r.Headline(), TotalCost: r.Totals.totalCost(),
		Charts: r.charts(), Notes: r.Notes,
		CSP: "default-src 'none'; style-src 'unsafe-inline'; img-src data:; script-src 'sha256-" +
			base64.StdEncoding.EncodeToString(sum[:]) + "'; base-uri 'none'; form-action 'none'",
		Style: template.CSS(pageStyle), Script: template.JS(pageScript), //nolint:gosec // constants embedded in the binary
	}
	p.MeanReward = r.Scores.RewardStats.String()
	p.TokensShort = formatTokens(r.Totals.Tokens)
	p.CostShort = fmt.Sprintf("$%.4f", r.Totals.CostUSD)
	switch {
	case r.Totals.Jobs > 0 && r.Totals.CostUnknown == r.Totals.Jobs:
		p.CostShort = "unknown"
	case r.Totals.CostUnknown > 0:
		p.CostShort = "≥ " + p.CostShort
	case r.Totals.CostEstimated > 0:
		p.CostShort = "~" + p.CostShort
	}
	if r.Totals.Graded > 0 {
		p.SolvedPct = r.Totals.Solved * 100 / r.Totals.Graded
	}
	if r.Totals.Jobs > 0 {
		p.OKPct = r.Totals.OK * 100 / r.Totals.Jobs
	}
	if r.Totals.WallMS > 0 {
		p.Wall = formatDuration(r.Totals.WallMS)
	}
	if m := r.Manifest; m != nil {
		for _, k := range sortedKeys(m.CLIVersions) {
			p.CLIVersions = append(p.CLIVersions, kv{k, m.CLIVersions[k]})
		}
	}
	seen, grades := map[string]int{}, map[string]int{}
	for i := range r.Jobs {
		seen[r.Jobs[i].Status()]++
		grades[r.Jobs[i].Grade()]++
	}
	for _, s := range orderedStatuses(mapKeys(seen)) {
		p.Statuses = append(p.Statuses, kv{s, fmt.Sprint(seen[s])})
	}
	data := r.pageData()
	for _, g := range data.Grades {
		p.Grades = append(p.Grades, kv{g, fmt.Sprint(grades[g])})
	}
	b, err := json.Marshal(data)
	if err != nil {
		return err
	}
	p.Data = template.JS(b) //nolint:gosec // json.Marshal escapes <, > and &: the data cannot end its script element
	for i := 0; i < len(data.details); i += detailChunk {
		b, err := json.Marshal(data.details[i:min(i+detailChunk, len(data.details))])
		if err != nil {
			return err
		}
		var z bytes.Buffer
		zw := gzip.NewWriter(&z)
		if _, err := zw.Write(b); err != nil {
			return err
		}
		if err := zw.Close(); err != nil {
			return err
		}
		// A JSON string of base64: nothing in it can end its script element.
		p.Details = append(p.Details, template.JS(`"`+base64.StdEncoding.EncodeToString(z.Bytes())+`"`)) //nolint:gosec // base64 only
	}
	var buf bytes.Buffer
	if err := page.Execute(&buf, p); err != nil {
		return err
	}
	_, err = w.Write(buf.Bytes())
	return err
}

// gradeOrder orders the verdict filter's buttons.
var gradeOrder = []string{GradePass, GradeFail, GradeError, GradeNotGraded, GradeUnfinished}

func (r *Report) pageData() pageData {
	d := pageData{Jobs: make([]jobRow, 0, len(r.Jobs)), details: make([]json.RawMessage, 0, len(r.Jobs)), Tasks: []taskRow{}, K: r.Scores.K,
		Chunk: detailChunk}
	present := map[string]bool{}
	budget := maxPageDetails
	for i := range r.Jobs {
		j := &r.Jobs[i]
		present[j.Grade()] = true
		d.Jobs = append(d.Jobs, jobRowOf(j))
		det := jobDetailOf(j)
		b, err := json.Marshal(det)
		if err != nil || len(b) > budget {
			b, _ = json.Marshal(jobDetail{Omitted: "This job's details were not embedded: the page's size bound was reached. The run directory has them; `outpost report` of a smaller run directory shows them."})
		}
		budget -= len(b)
		d.details = append(d.details, b)
	}
	for _, g := range gradeOrder {
		if present[g] {
			d.Grades = append(d.Grades, g)
		}
	}
	for _, ts := range r.Scores.Tasks {
		row := taskRow{Task: ts.Task, N: ts.N, C: ts.C, Errors: ts.Errors, Pass1: passText(ts.N, ts.PassAt1), PassN: passAtN(ts),
			Reward: ts.RewardStats.String()}
		if k := r.Scores.K; k > 1 && ts.N >= k {
			row.PassK = fmt.Sprintf("%.3f", batch.PassAtK(ts.N, ts.C, k))
		}
		d.Tasks = append(d.Tasks, row)
	}
	return d
}

func jobRowOf(j *JobRow) jobRow {
	row := jobRow{ID: j.ID, Task: j.Task, Trial: j.Trial, Agents: agentsOf(j), Model: j.Model, Status: j.Status(), Tone: tone(j.Status()),
		Detail: j.Detail(), Grade: j.Grade(), Reward: rewardText(j.Reward), Duration: formatDuration(j.DurationMS),
		Turns: j.Turns, Retries: j.Retries, Parks: j.Parks, Tokens: formatTokens(j.Usage.Tokens()), Cost: formatCost(j.Usage),
		CostNote: costNote(j.Usage)}
	if row.Task == row.ID {
		row.Task = ""
	}
	prompt := j.Prompt
	if len(prompt) > maxFindPrompt {
		prompt = strings.ToValidUTF8(prompt[:maxFindPrompt], "")
	}
	row.Find = strings.ToLower(strings.Join([]string{j.ID, j.Task, row.Agents, j.Model, row.Status, row.Grade, row.Detail, prompt}, "\n"))
	return row
}

func jobDetailOf(j *JobRow) jobDetail {
	d := jobDetail{Prompt: j.Prompt, PromptCut: j.PromptCut, Error: j.Outcome.Error, Text: cut(j.Outcome.Text, maxItemText)}
	if len(d.Prompt) > maxPagePrompt {
		d.PromptCut += int64(len(d.Prompt) - maxPagePrompt)
		d.Prompt = cut(d.Prompt, maxPagePrompt)
	}
	if len(j.Metadata) > 0 {
		d.Metadata = cut(prettyJSON(j.Metadata), maxPageMetadata)
	}
	if v := j.Verify; v != nil {
		vd := &verifyDetail{Output: cut(v.Output, maxCode*4), Error: v.Error, Duration: formatDuration(v.DurationMS)}
		if v.ExitCode != nil {
			vd.Exit = fmt.Sprint(*v.ExitCode)
		}
		d.Verify = vd
	}
	if j.Patch != nil {
		d.Files = j.Patch.Files
	}
	d.Patch = cut(j.LastPatch(), maxPagePatch)
	for _, a := range j.Attempts {
		ha := htmlAttemptOf(a)
		if len(j.Attempts) == 1 && ha.Error == d.Error {
			ha.Error = "" // the job's outcome box says it already
		}
		if ha.Patch != "" && ha.Patch == j.LastPatch() {
			ha.Patch = "" // shown once, as the job's patch
		} else {
			ha.Patch = cut(ha.Patch, maxPagePatch)
		}
		d.Attempts = append(d.Attempts, ha)
	}
	return d
}

func mapKeys(m map[string]int) map[string]bool {
	out := map[string]bool{}
	for k := range m {
		out[k] = true
	}
	return out
}

func costNote(u usage.Usage) string {
	switch {
	case !u.CostKnown:
		return "the CLI reported no cost and no list price applies"
	case u.CostSource == usage.CostSourceEstimate:
		return "estimated from the token counts at the model's API list price"
	}
	return "reported by the CLI"
}

func htmlAttemptOf(a runrec.AttemptDir) htmlAttempt {
	h := htmlAttempt{N: a.Number, Items: conversation(a.Events), Omitted: a.Omitted, Stderr: a.Stderr, Patch: a.Patch}
	if a.Truncated != nil {
		h.Truncated = fmt.Sprintf("The trajectory reached its %s cap after event %d; later events were not recorded.",
			formatBytes(a.Truncated.LimitBytes), a.Truncated.AfterSeq)
	}
	ar := a.Result
	if ar == nil {
		h.Unfinished, h.Status, h.Tone = true, "unfinished", tone("unfinished")
		return h
	}
	j := JobRow{Finished: true, Outcome: ar.Outcome}
	h.Agent, h.Model, h.Status, h.Tone, h.Detail, h.Error = ar.Agent, ar.Model, j.Status(), tone(j.Status()), j.Detail(), ar.Outcome.Error
	h.Duration = formatDuration(ar.DurationMS)
	if !ar.Started.IsZero() {
		h.Started = ar.Started.UTC().Format("2006-01-02 15:04:05 UTC")
	}
	u := ar.Outcome.Usage
	h.Usage = fmt.Sprintf("%s tokens (in %d, cache read %d, cache write %d, out %d), cost %s", formatTokens(u.Tokens()),
		u.Input, u.Cached, u.CacheCreated, u.Output, formatCost(u))
	if !u.Complete {
		h.Usage += ", counters incomplete"
	}
	return h
}

func formatBytes(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// conversation turns a trajectory into conversation items: deltas and
// stderr lines are merged, a final result that repeats the last answer marks
// it final instead of repeating it, a failure repeated verbatim is shown once.
func conversation(evs []adapters.Event) []convItem {
	var items []convItem
	last := func() *convItem {
		if len(items) == 0 {
			return nil
		}
		return &items[len(items)-1]
	}
	add := func(it convItem) {
		it.Text = cut(it.Text, maxItemText)
		it.Code = cut(it.Code, maxCode)
		items = append(items, it)
	}
	lastFailure := ""
	for _, ev := range evs {
		switch ev.Kind {
		case adapters.KindConversation:
			meta := []string{}
			for _, s := range []string{ev.Model, ev.Version, ev.Cwd} {
				if s != "" {
					meta = append(meta, s)
				}
			}
			if ev.Conversation != "" || len(meta) > 0 {
				add(convItem{Kind: "system", Title: "conversation", Text: ev.Conversation, Meta: strings.Join(meta, " · ")})
			}
		case adapters.KindText:
			add(convItem{Kind: "assistant", Title: "assistant", Text: ev.Text, Meta: subagent(ev)})
		case adapters.KindTextDelta:
			if l := last(); l != nil && l.Kind == "assistant" && l.Title == "assistant (streamed)" {
				l.Text = cut(l.Text+ev.Text, maxItemText)
				continue
			}
			add(convItem{Kind: "assistant", Title: "assistant (streamed)", Text: ev.Text})
		case adapters.KindReasoning:
			add(convItem{Kind: "reasoning", Title: "thinking", Text: ev.Text, Meta: subagent(ev)})
		case adapters.KindInput:
			add(convItem{Kind: "user", Title: "user (live input)", Text: ev.Text})
		case adapters.KindTool:
			if ev.Tool == nil {
				continue
			}
			add(convItem{Kind: "tool", Title: ev.Tool.Name, Code: prettyJSON(ev.Tool.Input), Meta: joinMeta(ev.Tool.CallID, subagent(ev))})
		case adapters.KindToolResult:
			if ev.ToolResult == nil {
				continue
			}
			tr := ev.ToolResult
			it := convItem{Kind: "result", Title: "result", Code: tr.Preview, Meta: fmt.Sprintf("%d characters", tr.Characters)}
			if tr.Name != "" {
				it.Title = tr.Name + " result"
			}
			if tr.IsError {
				it.Kind, it.Title = "error-result", it.Title+" (error)"
			}
			if tr.Characters > len(tr.Preview) {
				it.Meta += ", preview shown"
			}
			add(it)
		case adapters.KindFileChange:
			if ev.FileChange != nil {
				add(convItem{Kind: "file", Title: ev.FileChange.Change, Text: ev.FileChange.Path})
			}
		case adapters.KindRetry:
			t := "the CLI retried a model call"
			if rn := ev.Retry; rn != nil {
				t = fmt.Sprintf("the CLI retried a model call (attempt %d", rn.Attempt)
				if rn.MaxAttempts > 0 {
					t += fmt.Sprintf("/%d", rn.MaxAttempts)
				}
				t += ")"
				if rn.Status != 0 {
					t += fmt.Sprintf(", HTTP %d", rn.Status)
				}
				if rn.Reason != "" {
					t += ": " + rn.Reason
				}
			}
			add(convItem{Kind: "retry", Title: "retry", Text: t})
		case adapters.KindQuota:
			t := ev.Text
			if q := ev.Quota; q != nil {
				parts := []string{q.Status, q.Limit}
				if !q.ResetAt.IsZero() {
					parts = append(parts, "resets "+q.ResetAt.UTC().Format(time.RFC3339))
				}
				t = strings.TrimSpace(strings.Join(append(parts, ev.Text), " "))
			}
			kind := "quota"
			if !ev.Quota.Blocking() {
				kind = "system"
			}
			add(convItem{Kind: kind, Title: "rate limit", Text: t})
		case adapters.KindWarning:
			add(convItem{Kind: "warning", Title: "warning", Text: ev.Text})
		case adapters.KindFailure:
			if ev.Text == lastFailure {
				continue
			}
			lastFailure = ev.Text
			meta := ""
			if f := ev.Failure; f != nil {
				meta = joinMeta(f.Code, statusText(f.Status))
			}
			add(convItem{Kind: "failure", Title: "failure", Text: ev.Text, Meta: meta})
		case adapters.KindResult:
			for k := len(items) - 1; k >= 0; k-- {
				if items[k].Kind == "assistant" {
					if strings.TrimSpace(items[k].Text) == strings.TrimSpace(cut(ev.Text, maxItemText)) {
						items[k].Final = true
						ev.Text = ""
					}
					break
				}
			}
			if ev.Text != "" {
				add(convItem{Kind: "assistant", Title: "final answer", Text: ev.Text, Final: true})
			}
		case adapters.KindFinished:
			if f := ev.Finished; f != nil {
				t := "the CLI finished: ok"
				if !f.OK {
					t = "the CLI finished: failed"
				}
				add(convItem{Kind: "finished", Title: "finished", Text: t, Meta: f.Reason})
			}
		case adapters.KindStderr:
			if l := last(); l != nil && l.Kind == "stderr" {
				l.Code = cut(l.Code+"\n"+ev.Text, maxCode)
				continue
			}
			add(convItem{Kind: "stderr", Title: "stderr", Code: ev.Text})
		case adapters.KindUsage:
			if u := ev.Usage; u != nil && u.Scope != usage.ScopeMessage {
				add(convItem{Kind: "usage", Title: "usage", Text: fmt.Sprintf("%s: in %d, cache read %d, cache write %d, out %d",
					u.Scope, u.Input, u.Cached, u.CacheCreated, u.Output)})
			}
		case adapters.KindRaw:
			add(convItem{Kind: "raw", Title: "unrecognized line", Code: string(ev.Raw)})
		default:
			b, _ := json.Marshal(ev)
			add(convItem{Kind: "raw", Title: "event " + string(ev.Kind), Code: string(b)})
		}
	}
	return items
}

func subagent(ev adapters.Event) string {
	if ev.Subagent != "" {
		return "sub-agent of " + ev.Subagent
	}
	return ""
}

func statusText(s int) string {
	if s == 0 {
		return ""
	}
	return fmt.Sprintf("HTTP %d", s)
}

func joinMeta(parts ...string) string {
	var out []string
	for _, p := range parts {
		if p != "" {
			out = append(out, p)
		}
	}
	return strings.Join(out, " · ")
}

// prettyJSON indents a tool's input for reading; anything else is shown as
// it came.
func prettyJSON(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		return string(raw)
	}
	return b.String()
}
