package runrectest

import (
	"fmt"
	"strings"
	"time"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/batch"
	"github.com/outpost-dev/outpost/harness"
	"github.com/outpost-dev/outpost/runrec"
	"github.com/outpost-dev/outpost/usage"
)

// Job is one job of a synthetic run directory ([Write]).
type Job struct {
	// Record is its results.jsonl line.
	Record batch.Record
	// Prompt goes to its input.json; Patch and Events to its one attempt.
	Prompt string
	Patch  string
	Events []adapters.Event
}

// Write writes a run directory at dir holding jobs, as a batch with --out
// records them: each job's input, one attempt (events, patch, result) and
// its results line.
func Write(dir string, jobs []Job) error {
	rec, err := runrec.Create(dir, runrec.Manifest{Command: "batch", OutpostVersion: "v0.0.0-synthetic", Started: Start,
		Host: runrec.Host{Name: "synthetic", OS: "linux", Arch: "amd64"}}, runrec.WithClock(func() time.Time { return Start.Add(time.Hour) }))
	if err != nil {
		return err
	}
	for _, j := range jobs {
		r := j.Record
		if err := rec.Input(r.Job, j.Prompt, r.Metadata); err != nil {
			return err
		}
		a := rec.Job(r.Job, 0)
		for _, ev := range j.Events {
			a.Event(ev)
		}
		if j.Patch != "" {
			if err := a.Patch([]byte(j.Patch)); err != nil {
				return err
			}
		}
		var rerr error
		if !r.Outcome.OK {
			rerr = fmt.Errorf("%s", r.Outcome.Error)
		}
		res := &harness.Result{Agent: r.Agent, Text: r.Outcome.Text, Started: r.Started, Duration: time.Duration(r.DurationMS) * time.Millisecond,
			Usage: r.Usage, Err: rerr}
		if err := a.Finish(res); err != nil {
			return err
		}
		if err := rec.Record(r); err != nil {
			return err
		}
	}
	return rec.Close()
}

// GradedJob is a finished job of task (its trial) graded verdict, with a
// known cost.
func GradedJob(task string, trial int, verdict harness.Verdict, cost float64) Job {
	r := batch.Record{Job: fmt.Sprintf("%s#%d", task, trial), Task: task, Trial: trial, Attempt: 1, Agent: "claude", Agents: []string{"claude"},
		Outcome: harness.Outcome{OK: true, Text: "done"}, Started: Start, DurationMS: 42_000, Turns: 1, Verdict: verdict,
		Usage: usage.Usage{Input: 1000, Output: 200, Complete: true, CostUSD: cost, CostKnown: true, CostSource: usage.CostSourceCLI}}
	exit := 0
	r.Verify = &harness.Verification{ExitCode: &exit, DurationMS: 900, Output: "1 passed\n"}
	if verdict != harness.VerdictError {
		reward := 0.0
		if verdict == harness.VerdictPass {
			reward = 1
		} else {
			exit = 1
			r.Verify.Output = task + "/test_x.py:7: AssertionError\n"
		}
		r.Reward = &reward
	}
	return Job{Record: r, Prompt: "Solve " + task}
}

// Many returns n jobs the size of a real graded batch's: a prompt of a
// few hundred bytes, metadata, a trajectory of a dozen events, a patch of
// two files and a verifier output tail; about a third fail.
func Many(n int) []Job {
	jobs := make([]Job, 0, n)
	for i := range n {
		task := fmt.Sprintf("repo-%03d__issue-%05d", i%97, i/3)
		v := harness.VerdictPass
		switch i % 6 {
		case 1, 4:
			v = harness.VerdictFail
		case 5:
			if i%12 == 5 {
				v = harness.VerdictError
			}
		}
		j := GradedJob(task, i%3+1, v, 0.05+float64(i%17)/100)
		j.Record.Metadata = []byte(fmt.Sprintf(`{"instance_id":%q,"repo":"example/repo-%03d","difficulty":"medium"}`, task, i%97))
		j.Prompt = fmt.Sprintf("Issue %d in repo-%03d: the parser drops the last field when a line ends with a delimiter.\n\n", i, i%97) +
			strings.Repeat("Steps to reproduce: parse \"a,b,\" and compare with the expected three fields. ", 5)
		j.Patch = fmt.Sprintf("diff --git a/src/parser.py b/src/parser.py\n--- a/src/parser.py\n+++ b/src/parser.py\n@@ -%d,6 +%d,7 @@ def split(line):\n", 40+i%50, 40+i%50) +
			"     fields = []\n-    for part in line.split(sep)[:-1]:\n+    for part in line.split(sep):\n         fields.append(part)\n+    # keep a trailing empty field\n" +
			"diff --git a/tests/test_parser.py b/tests/test_parser.py\n--- a/tests/test_parser.py\n+++ b/tests/test_parser.py\n@@ -1,3 +1,6 @@\n+def test_trailing():\n+    assert split(\"a,b,\") == [\"a\", \"b\", \"\"]\n+\n"
		at := Start.Add(time.Duration(i) * time.Second)
		j.Events = []adapters.Event{
			{Seq: 1, Time: at, Kind: adapters.KindConversation, Conversation: fmt.Sprintf("conv-%d", i), Model: "claude-opus-5-5"},
			{Seq: 2, Time: at, Kind: adapters.KindText, Text: "I'll look at the parser first."},
			{Seq: 3, Time: at, Kind: adapters.KindTool, Tool: &adapters.ToolCall{Name: "Read", CallID: "t1", Input: []byte(`{"file_path":"src/parser.py"}`)}},
			{Seq: 4, Time: at, Kind: adapters.KindToolResult, ToolResult: &adapters.ToolResult{CallID: "t1", Name: "Read", Preview: "def split(line):\n    fields = []", Characters: 900}},
			{Seq: 5, Time: at, Kind: adapters.KindTool, Tool: &adapters.ToolCall{Name: "Edit", CallID: "t2", Input: []byte(`{"file_path":"src/parser.py","old":"[:-1]","new":""}`)}},
			{Seq: 6, Time: at, Kind: adapters.KindToolResult, ToolResult: &adapters.ToolResult{CallID: "t2", Name: "Edit", Preview: "ok", Characters: 2}},
			{Seq: 7, Time: at, Kind: adapters.KindText, Text: "Fixed: the trailing field is kept, with a test."},
			{Seq: 8, Time: at, Kind: adapters.KindResult, Text: "Fixed: the trailing field is kept, with a test."},
		}
		jobs = append(jobs, j)
	}
	return jobs
}
