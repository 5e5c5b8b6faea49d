// Package runrectest builds sample run directories from the adapters'
// golden fixtures, for tests of the recorder and of `outpost report`.
//
// [Sample] runs a real batch (package batch, with its parking, retries and
// fallbacks) whose turns replay captured CLI output through harness.Replay,
// and records it with a runrec.Recorder wired as the CLI wires it: every
// turn's events into an attempt, every record into results.jsonl, every
// park into parks.jsonl. Time is virtual, so the directory is the same on
// every call.
package runrectest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/adapters/claude"
	"github.com/outpost-dev/outpost/adapters/codex"
	"github.com/outpost-dev/outpost/adapters/copilot"
	"github.com/outpost-dev/outpost/batch"
	"github.com/outpost-dev/outpost/harness"
	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/runrec"
	"github.com/outpost-dev/outpost/sandbox"
	"github.com/outpost-dev/outpost/usage"
)

// Start is the sample run's (virtual) start.
var Start = time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)

// HostileID is the id of the job Options.Hostile adds; its trajectory
// carries markup, template syntax, terminal escapes and workflow commands.
const HostileID = "evil/<script>alert(1)</script>#\x1b[31m"

// hostileRunID is the hostile job's id while the batch runs: batch refuses
// ids with control characters, so the recording gets HostileID as a results
// file written or edited by another tool would carry it.
const hostileRunID = "evil-job"

// recordedID is the id a job is recorded under.
func recordedID(id string) string {
	if id == hostileRunID {
		return HostileID
	}
	return id
}

// Hostile is the text the hostile job's events carry.
const Hostile = "<script>alert('pwned')</script></details><img src=x onerror=alert(1)> {{.Secret}} \x1b]0;title\x07 \n::error::injected %0A <!-- -->"

// Options choose what the sample holds.
type Options struct {
	// Hostile adds a job whose id and trajectory are hostile content.
	Hostile bool
	// MaxTrajectoryBytes is passed to the recorder (0: its default).
	MaxTrajectoryBytes int64
	// Graded gives the jobs of Grades their verdicts, rewards, verifier
	// outputs, tasks and patches, as a batch with verifiers records them.
	Graded bool
}

// Grade is a sample job's grade (Options.Graded).
type Grade struct {
	Task    string
	Trial   int
	Verdict harness.Verdict
	Reward  float64
	Output  string
	Error   string
	Patch   string
}

// Grades are the sample's grades by job id; jobs not here are not graded.
var Grades = map[string]Grade{
	"fix-readme": {Task: "readme", Trial: 1, Verdict: harness.VerdictPass, Reward: 1, Output: "ok  \texample.com/readme\t0.01s\n",
		Patch: "diff --git a/README.md b/README.md\n--- a/README.md\n+++ b/README.md\n@@ -3,2 +3,2 @@\n-teh\n+the\n"},
	"retry-overload": {Task: "readme", Trial: 2, Verdict: harness.VerdictFail, Reward: 0,
		Output: "--- FAIL: TestReadme (0.00s)\n    readme_test.go:17: got \"teh\", want \"the\"\nFAIL\n",
		Patch:  "diff --git a/README.md b/README.md\n--- a/README.md\n+++ b/README.md\n@@ -9,3 +9,3 @@ intro\n context\n-old\n+new\n"},
	"add-tests": {Task: "parser", Trial: 1, Verdict: harness.VerdictFail, Reward: 0,
		Output: "tests/test_parser.py:42: AssertionError\nFAILED tests/test_parser.py::test_empty - assert 1 == 2\n",
		Patch: "diff --git a/parser/parse.py b/parser/parse.py\nindex 1111111..2222222 100644\n--- a/parser/parse.py\n+++ b/parser/parse.py\n@@ -10,6 +12,8 @@ def parse(s):\n     x = 1\n+    y = 2\n" +
			"diff --git a/tests/test_new.py b/tests/test_new.py\nnew file mode 100644\n--- /dev/null\n+++ b/tests/test_new.py\n@@ -0,0 +1,3 @@\n+def test_new():\n+    pass\n+\n"},
	"lint-fixes":   {Task: "parser", Trial: 2, Verdict: harness.VerdictPass, Reward: 0.5, Output: "1 passed in 0.02s\n"},
	"refactor-api": {Verdict: harness.VerdictPass, Reward: 1},
	"bump-deps":    {Verdict: harness.VerdictError, Error: "acquire the verifier's sandbox: no capacity"},
	"bad-login":    {Verdict: harness.VerdictFail, Reward: 0, Error: "the attempt's patch does not apply to the source: empty patch"},
}

// step is one scripted turn: a fixture to replay, and how long it took.
type step struct {
	agent, fixture string
	secs           int
	err            error // replaces the replayed error (a timeout the fixture cannot show)
}

type job struct {
	batch.Job
	steps []step
}

func jobs(o Options) []job {
	timeout := outposterr.New(outposterr.Timeout, "idle timeout: the CLI printed nothing for 5m0s")
	js := []job{
		{Job: batch.Job{ID: "fix-readme", Agent: "claude", Prompt: "Fix the README typos"}, steps: []step{{"claude", "ok", 14, nil}}},
		{Job: batch.Job{ID: "add-tests", Agent: "claude", Prompt: "Add tests for the parser"}, steps: []step{{"claude", "tool", 52, nil}}},
		{Job: batch.Job{ID: "refactor-api", Agent: "codex", Prompt: "Refactor the API client"}, steps: []step{{"codex", "tool", 73, nil}}},
		{Job: batch.Job{ID: "bump-deps", Agent: "codex", Prompt: "Bump the dependencies"}, steps: []step{{"codex", "ok", 21, nil}}},
		{Job: batch.Job{ID: "docs-typos", Agent: "copilot", Prompt: "Fix typos in docs/"}, steps: []step{{"copilot", "ok", 18, nil}}},
		{Job: batch.Job{ID: "lint-fixes", Agent: "copilot", Prompt: "Fix the linter warnings"}, steps: []step{{"copilot", "tool", 95, nil}}},
		{Job: batch.Job{ID: "migrate-db", Agent: "claude", Prompt: "Write the migration"},
			steps: []step{{"claude", "quota", 6, nil}, {"claude", "resume", 33, nil}}},
		{Job: batch.Job{ID: "codex-quota-fallback", Agent: "codex", Prompt: "Split the module", Fallback: []string{"claude"}},
			steps: []step{{"codex", "quota", 4, nil}, {"claude", "tool", 61, nil}}},
		{Job: batch.Job{ID: "retry-overload", Agent: "claude", Prompt: "Rename the package"},
			steps: []step{{"claude", "overloaded", 9, nil}, {"claude", "ok", 17, nil}}},
		{Job: batch.Job{ID: "outage-exhausted", Agent: "codex", Prompt: "Port the CLI flags"},
			steps: []step{{"codex", "unavailable", 3, nil}, {"codex", "unavailable", 3, nil}, {"codex", "unavailable", 4, nil}}},
		{Job: batch.Job{ID: "hung-turn", Agent: "copilot", Prompt: "Profile the hot loop"},
			steps: []step{{"copilot", "hang_sigterm", 300, timeout}, {"copilot", "hang_sigterm", 300, timeout}, {"copilot", "hang_sigterm", 300, timeout}}},
		{Job: batch.Job{ID: "bad-login", Agent: "claude", Prompt: "Update the changelog"}, steps: []step{{"claude", "unauthorized", 2, nil}}},
		{Job: batch.Job{ID: "weekly-limit", Agent: "claude", Prompt: "Review the open pull requests"},
			steps: []step{{"claude", "quota_weekly", 3, nil}, {"claude", "quota_weekly", 2, nil}, {"claude", "quota_weekly", 2, nil}, {"claude", "quota_weekly", 2, nil}}},
		{Job: batch.Job{ID: "copilot-park", Agent: "copilot", Prompt: "Tidy the imports"},
			steps: []step{{"copilot", "quota", 5, nil}, {"copilot", "resume", 26, nil}}},
	}
	if o.Hostile {
		js = append(js, job{Job: batch.Job{ID: hostileRunID, Agent: "claude", Prompt: "hostile"}, steps: []step{{"claude", "tool", 12, nil}}})
	}
	return js
}

var newAdapter = map[string]func() adapters.Adapter{
	"claude":  func() adapters.Adapter { return claude.New() },
	"codex":   func() adapters.Adapter { return codex.New() },
	"copilot": func() adapters.Adapter { return copilot.New() },
}

// clock is the sample's virtual time.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) advance(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	return c.now
}

// Sample writes a sample run directory at dir. fixtures is a file system
// holding the module's adapters/<cli>/testdata folders (os.DirFS of the
// module root). It returns the records the batch produced.
func Sample(dir string, fixtures fs.FS, o Options) ([]batch.Record, error) {
	clk := &clock{now: Start}
	var ropts []runrec.Option
	if o.MaxTrajectoryBytes > 0 {
		ropts = append(ropts, runrec.WithMaxTrajectoryBytes(o.MaxTrajectoryBytes))
	}
	ropts = append(ropts, runrec.WithClock(clk.Now))
	rec, err := runrec.Create(dir, runrec.Manifest{
		Command: "batch", OutpostVersion: "v0.0.0-sample",
		CLIVersions: map[string]string{"claude": "2.1.328", "codex": "0.169.0", "copilot": "1.0.102"},
		Sandbox:     "docker", Image: "outpost/base:dev",
		ImageDigest: "sha256:4f6b1cde0a6b3e5c5b7f8b9d2c1e0f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e",
		Flags:       []string{"--concurrency", "1", "--max-park", "20m"},
		Host:        runrec.Host{Name: "sample-host", OS: "linux", Arch: "amd64"},
	}, ropts...)
	if err != nil {
		return nil, err
	}
	js := jobs(o)
	byID := map[string]*job{}
	var bjobs []batch.Job
	for i := range js {
		byID[js[i].ID] = &js[i]
		bjobs = append(bjobs, js[i].Job)
	}
	var mu sync.Mutex
	next := map[string]int{}
	turn := func(_ context.Context, t batch.TurnRequest) (*harness.Result, error) {
		mu.Lock()
		j := byID[t.Job.ID]
		i := next[t.Job.ID]
		next[t.Job.ID]++
		mu.Unlock()
		if i >= len(j.steps) {
			return &harness.Result{Agent: t.Agent}, fmt.Errorf("sample job %s: no step %d", t.Job.ID, i+1)
		}
		s := j.steps[i]
		att := rec.Job(recordedID(t.Job.ID), 0)
		if err := rec.Input(recordedID(t.Job.ID), t.Job.Prompt, t.Job.Metadata); err != nil {
			return &harness.Result{Agent: t.Agent}, err
		}
		if t.Prompt != t.Job.Prompt {
			att.Prompt(t.Prompt)
		}
		res, err := replay(fixtures, s, clk, att, t.Job.ID == hostileRunID)
		if err != nil {
			return res, err
		}
		if g, ok := Grades[t.Job.ID]; ok && o.Graded && g.Patch != "" {
			if err := att.Patch([]byte(g.Patch)); err != nil {
				return res, err
			}
		}
		if ferr := att.Finish(res); ferr != nil {
			return res, ferr
		}
		return res, res.Err
	}
	var recErr error
	recs, err := batch.Run(context.Background(), bjobs, turn, batch.Options{
		Concurrency: 1, MaxPark: 20 * time.Minute, MaxRetries: 2, Now: clk.Now, Jitter: func() float64 { return 0.5 },
		Sleep: func(ctx context.Context, d time.Duration) error { clk.advance(d); return ctx.Err() },
		OnRecord: func(r batch.Record) {
			if g, ok := Grades[r.Job]; ok && o.Graded {
				grade(&r, g)
			}
			r.Job = recordedID(r.Job)
			if err := rec.Record(r); err != nil && recErr == nil {
				recErr = err
			}
		},
		OnPark: func(job string, until time.Time) {
			if err := rec.Park(recordedID(job), clk.Now(), until); err != nil && recErr == nil {
				recErr = err
			}
		},
	})
	if cerr := rec.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = recErr
	}
	for i := range recs {
		recs[i].Job = recordedID(recs[i].Job)
	}
	return recs, err
}

// grade puts g into r as a batch with a verifier would.
func grade(r *batch.Record, g Grade) {
	r.Task, r.Trial, r.Verdict = g.Task, g.Trial, g.Verdict
	exit := 0
	if g.Verdict == harness.VerdictFail {
		exit = 1
	}
	r.Verify = &harness.Verification{Output: g.Output, Error: g.Error, DurationMS: 1200}
	if g.Verdict != harness.VerdictError {
		reward := g.Reward
		r.Reward, r.Verify.ExitCode = &reward, &exit
	}
	if g.Patch != "" {
		r.Patch = &batch.PatchRecord{Base: "0123456789abcdef0123456789abcdef01234567", Bytes: len(g.Patch)}
		for _, l := range strings.Split(g.Patch, "\n") {
			if f, ok := strings.CutPrefix(l, "+++ b/"); ok {
				r.Patch.Files = append(r.Patch.Files, f)
			}
		}
	}
}

// replay runs one step: the fixture's output through the harness, its
// events into the attempt, on the virtual clock.
func replay(fixtures fs.FS, s step, clk *clock, att *runrec.Attempt, hostile bool) (*harness.Result, error) {
	dir := path.Join("adapters", s.agent, "testdata", s.fixture)
	stdout, err := fs.ReadFile(fixtures, path.Join(dir, "stdout.jsonl"))
	if err != nil {
		return &harness.Result{Agent: s.agent}, err
	}
	stderr, _ := fs.ReadFile(fixtures, path.Join(dir, "stderr.txt"))
	var meta struct {
		ExitCode int    `json:"exit_code"`
		Signal   string `json:"signal"`
	}
	if b, err := fs.ReadFile(fixtures, path.Join(dir, "meta.json")); err == nil {
		_ = json.Unmarshal(b, &meta)
	}
	started := clk.Now()
	emit := att.Event
	if hostile {
		emit = func(ev adapters.Event) { att.Event(hostileEvent(ev)) }
	}
	res := harness.Replay(context.Background(), newAdapter[s.agent](), harness.Recording{Stdout: bytes.NewReader(stdout), Stderr: bytes.NewReader(stderr),
		Exit: sandbox.ExitStatus{Code: meta.ExitCode, Signal: meta.Signal}, At: started}, emit, false)
	if s.err != nil {
		res.Err = s.err
	}
	res.Started, res.Duration = started, time.Duration(s.secs)*time.Second
	clk.advance(res.Duration)
	if s.agent == "codex" {
		// As a live turn on the vendor's service would be: a new thread's
		// usage is complete, and priced at the default model's list price.
		if res.Usage.Tokens() > 0 {
			res.Usage.Complete = true
			res.Model = codex.DefaultModel
			res.Usage = usage.Priced(res.Model, res.Usage)
		}
	}
	if hostile {
		res.Text, res.StderrTail = Hostile, Hostile
	}
	return res, nil
}

// hostileEvent replaces an event's text payloads with hostile content.
func hostileEvent(ev adapters.Event) adapters.Event {
	switch {
	case ev.Tool != nil:
		t := *ev.Tool
		t.Name, t.Input = Hostile, json.RawMessage(`{"command":"`+jsonEscape(Hostile)+`"}`)
		ev.Tool = &t
	case ev.ToolResult != nil:
		r := *ev.ToolResult
		r.Preview = Hostile
		ev.ToolResult = &r
	case ev.Text != "":
		ev.Text = Hostile
	}
	return ev
}

func jsonEscape(s string) string {
	b, _ := json.Marshal(s)
	return string(b[1 : len(b)-1])
}
