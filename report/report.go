// Package report renders what a run or a batch did — from a run directory
// (package runrec) or a batch results file — for people and for CI: a
// terminal table, Markdown for a CI step summary, one self-contained HTML
// page with charts, a searchable job table and each job's prompt, verdict,
// verifier output, patch and trajectory, JUnit XML, and GitHub Actions
// workflow annotations. Every format leads with what was solved (the
// verifiers' verdicts, pass@1 and pass@k per task, the mean reward and its
// standard error); a job without a verifier is "not graded", never
// "succeeded". [Compare] sets two runs side by side, task by task.
//
// Everything it reads is hostile input: job ids, texts and trajectories are
// escaped for the format they land in (terminal control characters,
// Markdown and HTML markup, XML, workflow-command syntax), and reading is
// bounded (see runrec.Read and internal/jsonl). A malformed line is a
// configuration error that names the file and line.
package report

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/outpost-dev/outpost/batch"
	"github.com/outpost-dev/outpost/harness"
	"github.com/outpost-dev/outpost/internal/jsonl"
	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/runrec"
	"github.com/outpost-dev/outpost/usage"
)

// Report is a run ready to render.
type Report struct {
	// Source is the path it was read from.
	Source string
	// Manifest is the run's manifest (nil for a results file).
	Manifest *runrec.Manifest
	// Jobs in the order they finished (results file order), then jobs that
	// have attempts but no record, by id.
	Jobs  []JobRow
	Parks []runrec.Park
	// Notes say what the reader left out.
	Notes  []string
	Totals Totals
	// Scores are the verdicts scored per task (pass@1, pass@k, mean reward
	// and its standard error); zero when no job was graded.
	Scores batch.Scores
}

// JobRow is one job's row.
type JobRow struct {
	ID    string
	Agent string
	// Agents lists every agent tried, in order.
	Agents     []string
	Model      string
	Outcome    harness.Outcome
	DurationMS int64
	Turns      int
	Retries    int
	Parks      int
	Usage      usage.Usage
	// Started is the first attempt's start, when known.
	Started time.Time
	// Finished is false for a job the run never finished.
	Finished bool
	// Attempts are the recorded turns (run directories only).
	Attempts []runrec.AttemptDir
	// Task is the task the job is an attempt of (the record's task, else
	// the job's id); Trial its trial number (0: the job has one attempt).
	Task  string
	Trial int
	// Verdict is the verifier's ("": not graded), Reward its reward and
	// Verify how it ran (exit code, output tail, error).
	Verdict harness.Verdict
	Reward  *float64
	Verify  *harness.Verification
	// Patch describes what the job changed (files, size).
	Patch *batch.PatchRecord
	// Metadata is the job's metadata as given; Prompt the job's prompt
	// (run directories that kept it; bounded by runrec).
	Metadata json.RawMessage
	Prompt   string
	// PromptCut is how many bytes of the prompt were not kept.
	PromptCut int64
}

// Grades of a job: the verifier's verdicts, "not graded" for a finished job
// without a verifier, "unfinished" for one the run never finished.
const (
	GradePass       = "pass"
	GradeFail       = "fail"
	GradeError      = "error"
	GradeNotGraded  = "not graded"
	GradeUnfinished = "unfinished"
)

// Grade is the job's verdict: pass, fail, error, "not graded" or
// "unfinished". A job without a verifier is never "succeeded".
func (j *JobRow) Grade() string {
	switch {
	case !j.Finished:
		return GradeUnfinished
	case j.Verdict == harness.VerdictPass:
		return GradePass
	case j.Verdict == harness.VerdictFail:
		return GradeFail
	case j.Verdict != "":
		return GradeError
	}
	return GradeNotGraded
}

// LastPatch is the patch text of the job's last attempt that kept one ("":
// none loaded).
func (j *JobRow) LastPatch() string {
	for k := len(j.Attempts) - 1; k >= 0; k-- {
		if j.Attempts[k].Patch != "" {
			return j.Attempts[k].Patch
		}
	}
	return ""
}

// Status is the job's one-word state: "ok", its failure class, or
// "unfinished".
func (j *JobRow) Status() string {
	switch {
	case !j.Finished:
		return "unfinished"
	case j.Outcome.OK:
		return "ok"
	case j.Outcome.Class == "":
		return "failed"
	}
	return j.Outcome.Class
}

// Detail is the failure's short description: class, outage or auth kind,
// reset instant; and, failed or not, "(secret printed)" when the job's CLI
// printed a secret its lease holds (or wrote one into its changes).
func (j *JobRow) Detail() string {
	o := j.Outcome
	s := ""
	if j.Finished && !o.OK {
		s = o.Class
		for _, n := range o.Notes() {
			s += " (" + n + ")"
		}
	}
	if o.SecretPrinted {
		if s == "" {
			s = j.Status()
		}
		s += " (" + SecretPrintedNote + ")"
	}
	return s
}

// SecretPrintedNote marks a job whose CLI printed a secret its lease holds.
const SecretPrintedNote = "secret printed"

// Totals sum the jobs.
type Totals struct {
	Jobs, OK, Failed, Unfinished int
	// Graded counts the jobs a verifier graded: Solved passed, VerdictFail
	// failed, VerdictError could not be graded; NotGraded finished without
	// a verifier.
	Graded, Solved, VerdictFail, VerdictError, NotGraded int
	Turns, Retries, Parks                                int
	// DurationMS sums the jobs' durations; WallMS is the run's span when
	// the manifest says it.
	DurationMS, WallMS int64
	Tokens             int64
	Usage              usage.Usage
	// CostUSD sums the known costs; CostUnknown counts jobs whose cost is
	// unknown (so CostUSD is a lower bound), CostEstimated jobs whose cost
	// is (partly) a list-price estimate.
	CostUSD                    float64
	CostUnknown, CostEstimated int
}

// Load reads a run directory or a batch results file (JSON lines of
// batch.Record).
func Load(path string) (*Report, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, outposterr.Wrap(outposterr.Configuration, err, "read report input")
	}
	if st.IsDir() {
		run, err := runrec.Read(path, runrec.ReadOptions{Events: true})
		if err != nil {
			return nil, err
		}
		return FromRun(run), nil
	}
	return loadResults(path)
}

// loadResults reads a results file.
func loadResults(path string) (*Report, error) {
	st, err := os.Lstat(path)
	if err != nil {
		return nil, outposterr.Wrap(outposterr.Configuration, err, "read report input")
	}
	if !st.Mode().IsRegular() {
		return nil, outposterr.New(outposterr.Configuration, "%s: not a regular file", path)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, outposterr.Wrap(outposterr.Configuration, err, "read report input")
	}
	defer f.Close()
	var recs []batch.Record
	res, err := jsonl.Decode(f, filepath.Base(path), jsonl.Options{MaxLine: 16 << 20}, func(_ int, r batch.Record) error {
		if r.Job == "" {
			return errors.New("record without a job id")
		}
		recs = append(recs, r)
		return nil
	})
	var je *jsonl.Error
	if errors.As(err, &je) {
		return nil, outposterr.Wrap(outposterr.Configuration, err, "read %s", path)
	}
	if err != nil {
		return nil, outposterr.Wrap(outposterr.Configuration, err, "read report input")
	}
	r := &Report{Source: path}
	if res.Torn {
		r.Notes = append(r.Notes, filepath.Base(path)+": the last line is torn (a writer stopped mid-line); ignored")
	}
	r.Jobs = jobsFrom(recs, nil)
	r.total()
	return r, nil
}

// FromRun builds a report from a run directory read back.
func FromRun(run *runrec.Run) *Report {
	m := run.Manifest
	r := &Report{Source: run.Dir, Manifest: &m, Parks: run.Parks, Notes: run.Notes}
	r.Jobs = jobsFrom(run.Records, run.Jobs)
	r.total()
	if !m.Started.IsZero() && !m.Ended.IsZero() {
		r.Totals.WallMS = m.Ended.Sub(m.Started).Milliseconds()
	}
	return r
}

// jobsFrom joins records and job directories. A job with attempts but no
// record (a single `run`, or a batch stopped early) is described by its
// last attempt's result.
func jobsFrom(recs []batch.Record, dirs []runrec.JobDir) []JobRow {
	attempts := map[string][]runrec.AttemptDir{}
	inputs := map[string]runrec.JobDir{}
	for _, d := range dirs {
		attempts[d.ID] = d.Attempts
		inputs[d.ID] = d
	}
	index := map[string]int{}
	var jobs []JobRow
	for _, rec := range recs {
		j := JobRow{ID: rec.Job, Agent: rec.Agent, Agents: rec.Agents, Model: rec.Outcome.Model, Outcome: rec.Outcome,
			DurationMS: rec.DurationMS, Turns: rec.Turns, Retries: rec.Retries, Parks: rec.Parks, Usage: rec.Usage, Finished: true,
			Task: rec.Task, Trial: rec.Trial, Verdict: rec.Verdict, Reward: rec.Reward, Verify: rec.Verify, Patch: rec.Patch,
			Metadata: rec.Metadata}
		if i, ok := index[rec.Job]; ok {
			jobs[i] = j // a later record of the same job wins
			continue
		}
		index[rec.Job] = len(jobs)
		jobs = append(jobs, j)
	}
	for i := range jobs {
		jobs[i].Attempts = attempts[jobs[i].ID]
		delete(attempts, jobs[i].ID)
	}
	var rest []string
	for id := range attempts {
		rest = append(rest, id)
	}
	sort.Strings(rest)
	for _, id := range rest {
		as := attempts[id]
		j := JobRow{ID: id, Attempts: as, Turns: len(as)}
		for k, a := range as {
			if a.Result == nil {
				continue
			}
			ar := a.Result
			j.Agent, j.Model, j.Outcome, j.Finished = ar.Agent, ar.Model, ar.Outcome, true
			j.DurationMS += ar.DurationMS
			if k == 0 || j.Turns == 0 {
				j.Usage = ar.Outcome.Usage
			} else {
				j.Usage = j.Usage.Add(ar.Outcome.Usage)
			}
			if len(j.Agents) == 0 || j.Agents[len(j.Agents)-1] != ar.Agent {
				j.Agents = append(j.Agents, ar.Agent)
			}
		}
		if as[len(as)-1].Result == nil {
			j.Finished = false // the last attempt never ended
		}
		jobs = append(jobs, j)
	}
	for i := range jobs {
		j := &jobs[i]
		if in, ok := inputs[j.ID]; ok {
			j.Prompt, j.PromptCut = in.Prompt, in.PromptCut
			if len(j.Metadata) == 0 {
				j.Metadata = in.Metadata
			}
		}
		if j.Task == "" {
			j.Task = j.ID
		}
		for _, a := range jobs[i].Attempts {
			if a.Result != nil && !a.Result.Started.IsZero() {
				jobs[i].Started = a.Result.Started
				break
			}
		}
		if jobs[i].Model == "" {
			for _, a := range jobs[i].Attempts {
				if a.Result != nil && a.Result.Model != "" {
					jobs[i].Model = a.Result.Model
				}
			}
		}
	}
	return jobs
}

func (r *Report) total() {
	t := &r.Totals
	for i := range r.Jobs {
		j := &r.Jobs[i]
		t.Jobs++
		switch j.Status() {
		case "ok":
			t.OK++
		case "unfinished":
			t.Unfinished++
		default:
			t.Failed++
		}
		switch j.Grade() {
		case GradePass:
			t.Graded++
			t.Solved++
		case GradeFail:
			t.Graded++
			t.VerdictFail++
		case GradeError:
			t.Graded++
			t.VerdictError++
		case GradeNotGraded:
			t.NotGraded++
		}
		t.Turns += j.Turns
		t.Retries += j.Retries
		t.Parks += j.Parks
		t.DurationMS += j.DurationMS
		t.Tokens += j.Usage.Tokens()
		if t.Jobs == 1 {
			t.Usage = j.Usage
		} else {
			t.Usage = t.Usage.Add(j.Usage)
		}
		if j.Usage.CostKnown {
			t.CostUSD += j.Usage.CostUSD
			if j.Usage.CostSource == usage.CostSourceEstimate {
				t.CostEstimated++
			}
		} else {
			t.CostUnknown++
		}
	}
	if t.Graded > 0 {
		grades := make([]batch.Graded, 0, len(r.Jobs))
		for i := range r.Jobs {
			j := &r.Jobs[i]
			if j.Finished {
				grades = append(grades, batch.Graded{Task: j.Task, Verdict: j.Verdict, Reward: j.Reward})
			}
		}
		r.Scores = batch.Score(grades)
	}
}

// Formats lists the output formats.
var Formats = []string{"table", "markdown", "html", "junit", "github"}

// Errors returned for bad arguments.
var errFormat = errors.New("unknown format")

// Render writes r in format.
func (r *Report) Render(w io.Writer, format string) error {
	write := writerOf(format, map[string]func(io.Writer) error{
		"table": r.Table, "markdown": r.Markdown, "html": r.HTML, "junit": r.JUnit, "github": r.GitHub,
	})
	if write == nil {
		return outposterr.Wrap(outposterr.Configuration, errFormat, "%q (one of %v)", format, Formats)
	}
	return write(w)
}

// writerOf returns the writer of format among writers (by format name), its
// other names resolved: "" is table, md is markdown. Nil: no such format.
func writerOf(format string, writers map[string]func(io.Writer) error) func(io.Writer) error {
	switch format {
	case "":
		format = "table"
	case "md":
		format = "markdown"
	}
	return writers[format]
}

// formatDuration renders milliseconds compactly: 850ms, 14s, 3m05s, 1h02m.
func formatDuration(ms int64) string {
	d := time.Duration(ms) * time.Millisecond
	switch {
	case d < time.Second:
		return fmt.Sprintf("%dms", ms)
	case d < time.Minute:
		return fmt.Sprintf("%.0fs", d.Seconds())
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	}
	return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
}

// formatTokens renders a token count: 950, 19.4k, 1.25M.
func formatTokens(n int64) string {
	switch {
	case n < 1000:
		return fmt.Sprintf("%d", n)
	case n < 1_000_000:
		return fmt.Sprintf("%.1fk", float64(n)/1e3)
	}
	return fmt.Sprintf("%.2fM", float64(n)/1e6)
}

// formatCost renders a usage's cost: $0.0948, ~$0.0400 (estimate), or "unknown".
func formatCost(u usage.Usage) string {
	switch {
	case !u.CostKnown:
		return "unknown"
	case u.CostSource == usage.CostSourceEstimate:
		return fmt.Sprintf("~$%.4f", u.CostUSD)
	}
	return fmt.Sprintf("$%.4f", u.CostUSD)
}

// totalCost renders the total: "$1.2345", "≥ $1.2345 (3 unknown)", "~$…".
func (t Totals) totalCost() string {
	s := fmt.Sprintf("$%.4f", t.CostUSD)
	if t.CostEstimated > 0 {
		s = "~" + s
	}
	if t.CostUnknown > 0 {
		if t.CostUnknown == t.Jobs {
			return "unknown"
		}
		s = fmt.Sprintf("≥ %s (%d unknown)", s, t.CostUnknown)
	}
	return s
}
