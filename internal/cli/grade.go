package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/outpost-dev/outpost/batch"
	"github.com/outpost-dev/outpost/harness"
	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/runrec"
)

// GradeOptions are the flags of `outpost grade`.
type GradeOptions struct {
	Run         RunOptions
	Predictions string
	Tasks       string
	Concurrency int
	AllowPaths  []string
}

// NewCmdGrade builds `outpost grade`.
func NewCmdGrade(f *Factory) *cobra.Command {
	o := &GradeOptions{Run: RunOptions{IO: f.IO}}
	cmd := &cobra.Command{
		Use:   "grade PREDICTIONS.jsonl|- --tasks TASKS.jsonl|DIR [--out DIR] [--concurrency N]",
		Short: "Grade an existing predictions file (SWE-bench format) with the tasks' verifiers, resumable",
		Long: `grade runs the verifier of each prediction's task on the prediction's patch, each in a
fresh lease of its own, as outpost batch grades its attempts: the task's source at its
commit, the patch applied with git apply, the verifier's test files copied over it, then
its command. The predictions may come from Outpost (batch --predictions) or any other
harness.

PREDICTIONS is SWE-bench predictions JSON lines: "instance_id", "model_name_or_path" and
"model_patch" (other fields are ignored; a line longer than 64 MiB, a line that is not a
JSON object, or one without an instance_id or model_patch is a configuration error
naming its line number). An empty or null model_patch grades the source unchanged, which
usually fails. Several lines of one instance are several attempts, each graded: job ids
ID#1…ID#K, and pass@k over them.

TASKS is an outpost jobs file (the one outpost batch takes) whose jobs carry a git source
and a verifier; agent and prompt may be left out, env is ignored (a verifier gets no
variable), and so is attempts (the predictions are the attempts). TASKS may also be a
task directory, or a directory of them, as outpost batch takes it. A task's environment
is built (or reused) as in batch and is its verifier's image. A prediction matches the task whose metadata.instance_id is its instance_id,
else the task whose id is. The jobs file's path rules apply as in batch (--allow-path).
A prediction without a task, or whose task has no verifier, is a configuration error
before anything runs (exit 2); tasks without a prediction are not graded.

The run directory (--out, default PREDICTIONS.grade) gets results.jsonl (batch's result
lines without agent, turns or usage: job, task, trial, attempt, metadata with the
prediction's model_name_or_path, source, patch, verdict, reward and verify), each
attempt's patch, a manifest, and results.jsonl.scores.json; outpost report renders it.
The summary leads with solved, then pass@1 and pass@k. Running again with the same --out
continues: attempts already graded are skipped.

Exit codes as batch: 0 when every prediction has a result line, whatever its verdict;
2 configuration; 130 (128 + the signal) when interrupted, which removes the running
verifiers' leases and prints the command that continues.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Predictions = args[0]
			if o.Tasks == "" {
				return &flagError{errors.New("--tasks TASKS.jsonl is required: the jobs file whose verifiers grade the predictions")}
			}
			if o.Predictions == "-" && o.Tasks == "-" {
				return &flagError{errors.New("predictions and tasks cannot both be read from standard input (-)")}
			}
			if o.Run.Output.Out == "" {
				if o.Predictions == "-" {
					return &flagError{errors.New("predictions read from standard input (-) need --out DIR")}
				}
				o.Run.Output.Out = o.Predictions + ".grade"
			}
			if o.Concurrency <= 0 {
				return &flagError{fmt.Errorf("--concurrency must be positive, not %d", o.Concurrency)}
			}
			return runGrade(cmd.Context(), cmd, f, o)
		},
	}
	addSandboxFlags(f, cmd, &o.Run.Sandbox)
	fl := cmd.Flags()
	fl.StringVar(&o.Tasks, "tasks", "", "the jobs file or task directory of the tasks (git source and verify), matched by metadata.instance_id, else id")
	fl.StringVar(&o.Run.Output.Out, "out", "", "the run directory (default PREDICTIONS.grade); an earlier one is continued")
	fl.IntVar(&o.Concurrency, "concurrency", 4, "verifiers running at once")
	fl.BoolVar(&o.Run.Output.JSON, "json", false, "print each result line on standard output as well")
	fl.BoolVarP(&o.Run.Output.Verbose, "verbose", "v", false, "debug logs on stderr")
	fl.StringArrayVar(&o.AllowPaths, "allow-path", nil, "a directory (links resolved) task paths may name besides the tasks file's own (repeatable)")
	fl.BoolVar(&o.Run.SSHIdentity, "allow-ssh-identity", false, "fetch tasks' ssh:// sources with your SSH keys and configuration (off: without them)")
	return cmd
}

// Placeholders for a task read without an agent or prompt: grading runs
// neither.
const (
	gradeAgent  = "none"
	gradePrompt = "(graded only)"
)

// gradingTask fills what a task to grade may leave out and drops its env.
func gradingTask(j *batch.Job) {
	if j.Agent == "" {
		j.Agent = gradeAgent
	}
	if strings.TrimSpace(j.Prompt) == "" {
		j.Prompt = gradePrompt
	}
	j.Env = nil
}

// maxPredictionLine bounds one line of a predictions file.
const maxPredictionLine = 64 << 20

// gradePrediction is one line of a predictions file.
type gradePrediction struct {
	line     int
	instance string
	model    string
	patch    string
}

// readPredictions reads SWE-bench predictions JSON lines; blank lines are
// skipped, anything else that is not a prediction is an error naming its
// line.
func readPredictions(path string, stdin io.Reader) ([]gradePrediction, error) {
	in, name := stdin, "standard input"
	if path != "-" {
		fh, err := os.Open(path)
		if err != nil {
			return nil, outposterr.Wrap(outposterr.Configuration, err, "read predictions")
		}
		defer fh.Close()
		in, name = fh, path
	}
	var out []gradePrediction
	err := eachInputLine(in, name, "prediction", maxPredictionLine, func(n int, _ int64, _, line []byte) error {
		bad := func(format string, args ...any) error {
			return outposterr.New(outposterr.Configuration, "%s line %d: "+format+" (a prediction is {\"instance_id\", \"model_name_or_path\", \"model_patch\"})",
				append([]any{name, n}, args...)...)
		}
		var p struct {
			InstanceID      json.RawMessage `json:"instance_id"`
			ModelNameOrPath json.RawMessage `json:"model_name_or_path"`
			ModelPatch      json.RawMessage `json:"model_patch"`
		}
		if line[0] != '{' || json.Unmarshal(line, &p) != nil {
			return bad("not a JSON object")
		}
		gp := gradePrediction{line: n}
		if json.Unmarshal(p.InstanceID, &gp.instance) != nil || strings.TrimSpace(gp.instance) == "" {
			return bad("no instance_id (a non-empty string)")
		}
		if p.ModelPatch == nil {
			return bad("instance %q has no model_patch (give \"\" or null for no change)", gp.instance)
		}
		if string(p.ModelPatch) != "null" && json.Unmarshal(p.ModelPatch, &gp.patch) != nil {
			return bad("instance %q: model_patch is not a string", gp.instance)
		}
		if p.ModelNameOrPath != nil && string(p.ModelNameOrPath) != "null" && json.Unmarshal(p.ModelNameOrPath, &gp.model) != nil {
			return bad("instance %q: model_name_or_path is not a string", gp.instance)
		}
		out = append(out, gp)
		return nil
	})
	return nonEmpty(out, err, name, "predictions")
}

// gradeJobs matches predictions to tasks and returns one job per
// prediction (ids ID, or ID#K when an instance has several), with the
// patch of each job, and the number of tasks no prediction names.
func gradeJobs(preds []gradePrediction, tasks []batch.Job, predsName, tasksName string) ([]batch.Job, map[string]string, int, error) {
	byKey := map[string]int{}
	for i := range tasks {
		j := &tasks[i]
		if j.Load != nil {
			// A long line was read without its metadata: the match needs it.
			_, md, err := j.Load()
			if err != nil {
				return nil, nil, 0, outposterr.Wrap(outposterr.Configuration, err, "read tasks")
			}
			j.Metadata, j.Load, j.Prompt = md, nil, gradePrompt
		}
		key := j.ID
		var meta struct {
			InstanceID string `json:"instance_id"`
		}
		if len(j.Metadata) > 0 && json.Unmarshal(j.Metadata, &meta) == nil && meta.InstanceID != "" {
			key = meta.InstanceID
		}
		if other, ok := byKey[key]; ok {
			return nil, nil, 0, outposterr.New(outposterr.Configuration, "%s: tasks %q and %q both match instance %q: give each task its own metadata.instance_id",
				tasksName, tasks[other].ID, j.ID, key)
		}
		byKey[key] = i
	}
	var unknown, unverified []string
	count := map[string]int{}
	for _, p := range preds {
		i, ok := byKey[p.instance]
		switch {
		case !ok:
			unknown = append(unknown, fmt.Sprintf("%q (line %d)", p.instance, p.line))
		case tasks[i].Verify == nil:
			unverified = append(unverified, fmt.Sprintf("%q (task %s)", p.instance, tasks[i].ID))
		}
		count[p.instance]++
	}
	if len(unknown) > 0 {
		return nil, nil, 0, outposterr.New(outposterr.Configuration,
			"%s: %d predictions name an instance no task of %s has (by metadata.instance_id or id): %s; add their tasks, or grade a predictions file without them",
			predsName, len(unknown), tasksName, listSome(unknown))
	}
	if len(unverified) > 0 {
		return nil, nil, 0, outposterr.New(outposterr.Configuration,
			"%s: the tasks of %d predictions have no verifier: %s; give those tasks a \"verify\" block",
			tasksName, len(unverified), listSome(unverified))
	}
	jobs := make([]batch.Job, 0, len(preds))
	patches := make(map[string]string, len(preds))
	trial := map[string]int{}
	for _, p := range preds {
		j := tasks[byKey[p.instance]]
		j.Attempts, j.Fallback, j.Conversation = 0, nil, ""
		if count[p.instance] > 1 {
			trial[p.instance]++
			j.Task, j.Trial = j.ID, trial[p.instance]
			j.ID += "#" + strconv.Itoa(j.Trial)
		}
		if p.model != "" {
			md, err := withMetadata(j.Metadata, "model_name_or_path", p.model)
			if err != nil {
				return nil, nil, 0, outposterr.Wrap(outposterr.Configuration, err, "task %s: metadata", j.ID)
			}
			j.Metadata = md
		}
		jobs = append(jobs, j)
		patches[j.ID] = p.patch
	}
	return jobs, patches, len(tasks) - len(count), nil
}

// withMetadata sets key in a metadata object unless it is set already.
func withMetadata(md json.RawMessage, key, value string) (json.RawMessage, error) {
	m := map[string]json.RawMessage{}
	if len(md) > 0 {
		if err := json.Unmarshal(md, &m); err != nil {
			return nil, err
		}
	}
	if _, ok := m[key]; ok {
		return md, nil
	}
	v, _ := json.Marshal(value)
	m[key] = v
	return json.Marshal(m)
}

// listSome joins up to ten items.
func listSome(items []string) string {
	if len(items) > 10 {
		items = append(items[:10:10], fmt.Sprintf("… %d more", len(items)-10))
	}
	return strings.Join(items, ", ")
}

// patchFiles lists the paths a unified diff changes, from its "diff --git"
// lines (else its +++/--- lines).
func patchFiles(diff string) []string {
	seen := map[string]bool{}
	files := []string{}
	add := func(p string) {
		p = strings.TrimSpace(p)
		if i := strings.IndexByte(p, '\t'); i >= 0 {
			p = p[:i]
		}
		if p == "" || p == "/dev/null" {
			return
		}
		if len(p) > 2 && (p[:2] == "a/" || p[:2] == "b/") {
			p = p[2:]
		}
		if !seen[p] {
			seen[p] = true
			files = append(files, p)
		}
	}
	for _, l := range strings.Split(diff, "\n") {
		switch {
		case strings.HasPrefix(l, "+++ "):
			add(l[4:])
		case strings.HasPrefix(l, "--- "):
			add(l[4:])
		}
	}
	sort.Strings(files)
	return files
}

func runGrade(ctx context.Context, cmd *cobra.Command, f *Factory, o *GradeOptions) error {
	preds, err := readPredictions(o.Predictions, f.IO.In)
	if err != nil {
		return err
	}
	bo := &BatchOptions{Run: o.Run, AllowPaths: o.AllowPaths, grading: true}
	tasks, err := readJobsOrTasks(o.Tasks, f.IO.In, bo)
	if err != nil {
		return err
	}
	predsName := o.Predictions
	if predsName == "-" {
		predsName = "standard input"
	}
	jobs, patches, ungraded, err := gradeJobs(preds, tasks, predsName, o.Tasks)
	if err != nil {
		return err
	}
	if _, err := batch.Expand(jobs); err != nil {
		return err
	}
	resultsPath := filepath.Join(o.Run.Output.Out, runrec.ResultsFile)
	prev, err := readResults(resultsPath)
	if err != nil {
		return err
	}
	done := map[string]bool{}
	for _, j := range jobs {
		if _, ok := prev.latest[j.ID]; ok {
			done[j.ID] = true
		}
	}
	if prev.exists {
		fmt.Fprintf(f.IO.ErrOut, "continuing the grading in %s: %d of %d attempts already graded; grading %d\n",
			o.Run.Output.Out, len(done), len(jobs), len(jobs)-len(done))
	}
	if ungraded > 0 {
		fmt.Fprintf(f.IO.ErrOut, "%d tasks of %s have no prediction: not graded\n", ungraded, o.Tasks)
	}
	finished := 0
	if len(done) < len(jobs) {
		// A task's environment is the verifier's image, as in batch.
		if err := buildEnvironments(ctx, f, bo, jobs, done); err != nil {
			return err
		}
		if finished, err = gradePending(ctx, cmd, f, o, jobs, patches, batch.Options{
			Concurrency: o.Concurrency, Done: done, Attempts: prev.count, MaxRetries: -1, MaxParks: -1,
		}); err != nil {
			return err
		}
	}
	all, err := readResults(resultsPath)
	if err != nil {
		return err
	}
	if err := reportScores(f.IO.ErrOut, resultsPath, jobs, all); err != nil {
		return err
	}
	return verdict(f.IO.ErrOut, jobs, all, finished)
}

// gradePending grades the jobs not in opts.Done: batch.Run with a turn
// that runs no agent but hands over the prediction's patch, which the
// batch then grades with the runner's verifier.
func gradePending(ctx context.Context, cmd *cobra.Command, f *Factory, o *GradeOptions, jobs []batch.Job, patches map[string]string, opts batch.Options) (int, error) {
	run := o.Run
	// No agent runs: no credential, no conversation to keep.
	run.Credentials.Auth, run.Store.NoStore = "none", true
	run.Turn.Timeout, run.Turn.IdleTimeout = harness.DefaultDeadline, harness.DefaultIdleTimeout
	table, err := loadAgents(f)
	if err != nil {
		return 0, err
	}
	s, err := newSession(ctx, f, &run, table)
	if err != nil {
		return 0, err
	}
	defer s.close()
	// Lines are appended after whole lines only, never glued to a torn one.
	if err := mendResultsTail(f.IO.ErrOut, filepath.Join(run.Output.Out, runrec.ResultsFile)); err != nil {
		return 0, err
	}
	rec, err := openRecord(cmd, &run, io.Discard) // grade says itself that it continues
	if err != nil {
		return 0, err
	}
	defer rec.Close()
	p := newPendingRun(f.IO.ErrOut) // p.mu also guards patches and patchAt
	patchAt := map[string]string{}  // job id → its patch.diff, relative to the run directory
	turn := func(_ context.Context, t batch.TurnRequest) (*harness.Result, error) {
		p.mu.Lock()
		diff := patches[t.Job.ID]
		delete(patches, t.Job.ID) // graded once: memory holds what is left
		p.mu.Unlock()
		res := &harness.Result{Started: time.Now()}
		if diff != "" {
			res.Patch = &harness.Patch{Base: t.Job.Source.Commit, Diff: []byte(diff), Bytes: len(diff), Files: patchFiles(diff)}
		}
		a := rec.Job(t.Job.ID, 0)
		if a.Finish(res) == nil && res.Patch != nil {
			if rel, err := filepath.Rel(rec.Dir(), filepath.Join(a.Dir(), runrec.PatchFile)); err == nil {
				if _, err := os.Lstat(filepath.Join(a.Dir(), runrec.PatchFile)); err == nil {
					p.mu.Lock()
					patchAt[t.Job.ID] = filepath.ToSlash(rel)
					p.mu.Unlock()
				}
			}
		}
		return res, nil
	}
	opts.DiscardRecords = true
	opts.Verify = s.r.Verify
	opts.SavePatch = func(r batch.Record, _ []byte) (string, error) {
		p.mu.Lock()
		defer p.mu.Unlock()
		rel, ok := patchAt[r.Job]
		if !ok {
			return "", errors.New("not kept in the run directory")
		}
		return rel, nil
	}
	opts.OnRecord = func(r batch.Record) {
		// No agent ran: the record keeps what grading said.
		r.Agent, r.Agents, r.Turns, r.Conversation, r.CLIVersion = "", nil, 0, "", ""
		r.Outcome.Agent = ""
		b, _ := json.Marshal(r)
		p.mu.Lock()
		defer p.mu.Unlock()
		p.finished++
		_ = rec.Record(r)
		if run.Output.JSON {
			fmt.Fprintf(f.IO.Out, "%s\n", b)
		}
		line := "graded " + r.Job + ": "
		if r.Verdict == "" {
			line += "not graded: " + r.Outcome.Error
		} else {
			line += "verdict " + string(r.Verdict)
			if r.Reward != nil {
				line += fmt.Sprintf(" (reward %g)", *r.Reward)
			}
			if r.Verify != nil && r.Verify.Error != "" {
				line += ": " + r.Verify.Error
			}
		}
		p.prog.line.Logf("%s", line)
	}
	opts.OnStatus = func(st batch.Status) {
		p.prog.line.Set(fmt.Sprintf("graded, %d solved", st.Solved), st.Done, st.Total)
	}
	_, err = batch.Run(ctx, jobs, turn, opts)
	return p.end(ctx, f.IO.ErrOut, err, "attempts graded", "grading", gradeResumeCommand(cmd, o))
}

// gradeResumeCommand is the command that continues an interrupted grading:
// the same arguments and flags, with --out naming the run directory.
func gradeResumeCommand(cmd *cobra.Command, o *GradeOptions) string {
	words := []string{selfName(), "grade", o.Predictions}
	cmd.Flags().Visit(func(fl *pflag.Flag) {
		if fl.Name != "out" {
			words = append(words, flagWords(fl)...)
		}
	})
	words = append(words, "--out="+o.Run.Output.Out)
	return shellJoin(words)
}
