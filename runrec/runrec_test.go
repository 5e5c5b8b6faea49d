package runrec_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/adapters"
	"github.com/outpost-dev/outpost/batch"
	"github.com/outpost-dev/outpost/harness"
	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/runrec"
	"github.com/outpost-dev/outpost/runrec/runrectest"
	"github.com/outpost-dev/outpost/usage"
)

var t0 = time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)

func textEvent(seq int64, text string) adapters.Event {
	return adapters.Event{Seq: seq, Time: t0, Kind: adapters.KindText, Text: text}
}

func TestRoundTrip(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	rec, err := runrec.Create(dir, runrec.Manifest{Command: "batch", OutpostVersion: "v1.2.3",
		CLIVersions: map[string]string{"claude": "2.1.328"}, Flags: []string{"--concurrency", "2"}, Host: runrec.HostInfo()},
		runrec.WithClock(func() time.Time { return t0 }))
	require.NoError(t, err)

	id := "group/job #1"
	a := rec.Job(id, 0)
	assert.Equal(t, 1, a.Number())
	a.Event(adapters.Event{Seq: 1, Kind: adapters.KindConversation, Conversation: "c1", Model: "claude-opus-5-5"})
	a.Event(textEvent(2, "hello"))
	require.NoError(t, a.Patch([]byte("--- a/x\n+++ b/x\n")))
	res := &harness.Result{Agent: "claude", Model: "claude-opus-5-5", Conversation: "c1", Text: "hello", Started: t0, Duration: 1500 * time.Millisecond,
		Usage:      usage.Usage{Input: 3, Output: 4, Complete: true, CostUSD: 0.01, CostKnown: true, CostSource: usage.CostSourceCLI},
		StderrTail: "warning: something\n", Counts: map[adapters.Kind]int{adapters.KindText: 1}}
	require.NoError(t, a.Finish(res))
	require.NoError(t, a.Finish(res), "idempotent")
	a.Event(textEvent(3, "after finish")) // ignored

	b := rec.Job(id, 0)
	assert.Equal(t, 2, b.Number(), "attempts are numbered in order")
	require.NoError(t, b.Finish(&harness.Result{Agent: "claude", Err: outposterr.New(outposterr.Quota, "limit")}))

	require.NoError(t, rec.Record(batch.Record{Job: id, Agent: "claude", Turns: 2, Parks: 1}))
	require.NoError(t, rec.Park(id, t0, t0.Add(time.Hour)))
	require.NoError(t, rec.Close())
	require.NoError(t, rec.Close(), "idempotent")

	run, err := runrec.Read(dir, runrec.ReadOptions{Events: true})
	require.NoError(t, err)
	assert.Equal(t, "v1.2.3", run.Manifest.OutpostVersion)
	assert.Equal(t, runrec.Format, run.Manifest.Format)
	assert.Equal(t, t0, run.Manifest.Started)
	assert.Equal(t, t0, run.Manifest.Ended)
	require.Len(t, run.Records, 1)
	assert.Equal(t, 2, run.Records[0].Turns)
	require.Len(t, run.Parks, 1)
	assert.Equal(t, t0.Add(time.Hour), run.Parks[0].Until)
	require.Len(t, run.Jobs, 1)
	j := run.Jobs[0]
	assert.Equal(t, id, j.ID)
	require.Len(t, j.Attempts, 2)
	first := j.Attempts[0]
	require.NotNil(t, first.Result)
	assert.Equal(t, "claude-opus-5-5", first.Result.Model)
	assert.True(t, first.Result.Outcome.OK)
	assert.True(t, first.Result.Outcome.Usage.CostKnown)
	assert.Equal(t, int64(1500), first.Result.DurationMS)
	assert.Equal(t, 2, first.Result.Trajectory.Events)
	require.Len(t, first.Events, 2)
	assert.Equal(t, "hello", first.Events[1].Text)
	assert.Equal(t, "warning: something\n", first.Stderr)
	assert.Equal(t, "--- a/x\n+++ b/x\n", first.Patch)
	assert.Equal(t, "quota", j.Attempts[1].Result.Outcome.Class)
	assert.Empty(t, j.Attempts[1].Events, "an attempt without events has an empty trajectory")

	// The trajectory lines are the objects `outpost run --json` prints.
	name, err := runrec.SafeName(id)
	require.NoError(t, err)
	b1, err := os.ReadFile(filepath.Join(dir, runrec.JobsDir, name, "1", runrec.EventsFile))
	require.NoError(t, err)
	want, _ := json.Marshal(textEvent(2, "hello"))
	assert.Contains(t, string(b1), string(want)+"\n")

	// Files are private.
	for _, p := range []string{runrec.ManifestFile, runrec.ResultsFile, filepath.Join(runrec.JobsDir, name, "1", runrec.ResultFile)} {
		st, err := os.Stat(filepath.Join(dir, p))
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o600), st.Mode().Perm(), p)
	}
}

func TestTrajectoryCap(t *testing.T) {
	dir := t.TempDir()
	const limit = 4096
	rec, err := runrec.Create(dir, runrec.Manifest{}, runrec.WithMaxTrajectoryBytes(limit))
	require.NoError(t, err)
	a := rec.Job("big", 0)
	for i := range 500 {
		a.Event(textEvent(int64(i+1), strings.Repeat("x", 50)))
	}
	require.NoError(t, a.Finish(&harness.Result{Agent: "claude"}))
	require.NoError(t, rec.Close())

	path := filepath.Join(a.Dir(), runrec.EventsFile)
	st, err := os.Stat(path)
	require.NoError(t, err)
	assert.LessOrEqual(t, st.Size(), int64(limit), "never over the cap")
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var last string
	n := 0
	for sc := bufio.NewScanner(f); sc.Scan(); n++ {
		last = sc.Text()
	}
	var m runrec.Truncated
	require.NoError(t, json.Unmarshal([]byte(last), &m))
	assert.Equal(t, runrec.TruncatedType, m.Type, "the last line is the marker")
	assert.Equal(t, int64(n-1), m.AfterSeq)
	assert.Equal(t, int64(limit), m.LimitBytes)

	run, err := runrec.Read(dir, runrec.ReadOptions{Events: true})
	require.NoError(t, err)
	att := run.Jobs[0].Attempts[0]
	require.NotNil(t, att.Truncated)
	assert.Len(t, att.Events, n-1)
	assert.True(t, att.Result.Trajectory.Truncated)
	assert.Equal(t, 500-(n-1), att.Result.Trajectory.Dropped)
	assert.Equal(t, n-1, att.Result.Trajectory.Events)
}

func TestSafeName(t *testing.T) {
	cases := map[string]string{
		"plain-id_1.2": "plain-id_1.2",
		"a/b":          "a%2Fb",
		"a#b":          "a%23b",
		"100%":         "100%25",
		".":            "%2E",
		"..":           "%2E.",
		".hidden":      "%2Ehidden",
		"tab\there":    "tab%09here",
		"nl\n":         "nl%0A",
		"é":            "%C3%A9",
		"~x":           "%7Ex",
	}
	for id, want := range cases {
		got, err := runrec.SafeName(id)
		require.NoError(t, err, id)
		assert.Equal(t, want, got, "%q", id)
	}
	_, err := runrec.SafeName("")
	assert.True(t, outposterr.Is(err, outposterr.Configuration))
	_, err = runrec.SafeName(strings.Repeat("x", runrec.MaxIDBytes+1))
	assert.True(t, outposterr.Is(err, outposterr.Configuration))

	long1, _ := runrec.SafeName(strings.Repeat("/", 200) + "a")
	long2, _ := runrec.SafeName(strings.Repeat("/", 200) + "b")
	assert.NotEqual(t, long1, long2, "cut names keep the whole id's hash")
	assert.LessOrEqual(t, len(long1), 96)
	assert.NotContains(t, long1[:len(long1)-13], "~")
	for _, n := range []string{long1, long2} {
		assert.NotContains(t, n, "/")
		assert.False(t, strings.HasSuffix(n[:len(n)-13], "%") || strings.HasSuffix(n[:len(n)-13], "%2"), "never cut inside an escape: %s", n)
	}
}

func TestJobDirectoryTakenByAnotherID(t *testing.T) {
	dir := t.TempDir()
	rec, err := runrec.Create(dir, runrec.Manifest{})
	require.NoError(t, err)
	// As on a case-insensitive file system, where "Job" already holds "job".
	other := filepath.Join(dir, runrec.JobsDir, "job")
	require.NoError(t, os.Mkdir(other, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(other, runrec.JobFile), []byte(`{"id":"Job"}`), 0o600))
	a := rec.Job("job", 0)
	require.NoError(t, a.Finish(&harness.Result{Agent: "x"}))
	assert.True(t, strings.HasPrefix(filepath.Base(filepath.Dir(a.Dir())), "job~"), a.Dir())
	require.NoError(t, rec.Close())
}

func TestConcurrentJobs(t *testing.T) {
	dir := t.TempDir()
	rec, err := runrec.Create(dir, runrec.Manifest{})
	require.NoError(t, err)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			id := fmt.Sprintf("job-%d", i%4) // two writers per job
			for range 3 {
				a := rec.Job(id, 0)
				for s := range 20 {
					a.Event(textEvent(int64(s+1), "x"))
				}
				assert.NoError(t, a.Finish(&harness.Result{Agent: "a"}))
			}
			assert.NoError(t, rec.Record(batch.Record{Job: id}))
			assert.NoError(t, rec.Park(id, t0, t0))
		})
	}
	wg.Wait()
	require.NoError(t, rec.Close())
	run, err := runrec.Read(dir, runrec.ReadOptions{Events: true})
	require.NoError(t, err)
	require.Len(t, run.Jobs, 4)
	for _, j := range run.Jobs {
		require.Len(t, j.Attempts, 6)
		for i, a := range j.Attempts {
			assert.Equal(t, i+1, a.Number)
			assert.Len(t, a.Events, 20)
		}
	}
	assert.Len(t, run.Records, 8)
	assert.Len(t, run.Parks, 8)
}

func TestContinueRunDirectory(t *testing.T) {
	dir := t.TempDir()
	rec, err := runrec.Create(dir, runrec.Manifest{OutpostVersion: "first"})
	require.NoError(t, err)
	_, n := rec.Continues()
	assert.Zero(t, n, "a new run directory continues nothing")
	require.NoError(t, rec.Job("j", 0).Finish(&harness.Result{Agent: "a"}))
	require.NoError(t, rec.Record(batch.Record{Job: "j"}))
	// An attempt the run never finished (interrupted) keeps its events.
	open := rec.Job("k", 0)
	open.Event(textEvent(1, "partial"))
	require.NoError(t, rec.Close())
	assert.Error(t, rec.Job("late", 0).Finish(nil), "no attempt after Close")

	rec, err = runrec.Create(dir, runrec.Manifest{OutpostVersion: "second"})
	require.NoError(t, err)
	prev, n := rec.Continues()
	assert.Equal(t, 1, n)
	assert.Equal(t, "first", prev.OutpostVersion)
	a := rec.Job("j", 0)
	assert.Equal(t, 2, a.Number(), "a resumed run numbers attempts after the recorded ones")
	require.NoError(t, a.Finish(&harness.Result{Agent: "a"}))
	require.NoError(t, rec.Record(batch.Record{Job: "k"}))
	require.NoError(t, rec.Close())

	run, err := runrec.Read(dir, runrec.ReadOptions{Events: true})
	require.NoError(t, err)
	assert.Equal(t, "second", run.Manifest.OutpostVersion)
	require.Len(t, run.Manifest.Previous, 1)
	assert.Equal(t, "first", run.Manifest.Previous[0].OutpostVersion)
	assert.Len(t, run.Records, 2)
	require.Len(t, run.Jobs, 2)
	k := run.Jobs[1]
	require.Len(t, k.Attempts, 1)
	assert.Nil(t, k.Attempts[0].Result, "never finished")
	require.Len(t, k.Attempts[0].Events, 1)

	other := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(other, "notes.txt"), nil, 0o600))
	_, err = runrec.Create(other, runrec.Manifest{})
	assert.True(t, outposterr.Is(err, outposterr.Configuration), "a non-empty directory that is not a run directory: %v", err)
}

func TestReadHostileDirectory(t *testing.T) {
	dir := t.TempDir()
	rec, err := runrec.Create(dir, runrec.Manifest{})
	require.NoError(t, err)
	a := rec.Job("j", 0)
	a.Event(textEvent(1, "ok"))
	require.NoError(t, a.Finish(&harness.Result{Agent: "a"}))
	require.NoError(t, rec.Close())

	secret := filepath.Join(t.TempDir(), "secret")
	require.NoError(t, os.WriteFile(secret, []byte(`{"seq":1,"kind":"text","text":"SECRET-OUTSIDE"}`+"\n"), 0o600))
	// A link where a trajectory should be, a linked job directory, and a
	// linked stderr file.
	events := filepath.Join(a.Dir(), runrec.EventsFile)
	require.NoError(t, os.Remove(events))
	require.NoError(t, os.Symlink(secret, events))
	require.NoError(t, os.Symlink(filepath.Dir(secret), filepath.Join(dir, runrec.JobsDir, "linked")))
	require.NoError(t, os.Symlink(secret, filepath.Join(a.Dir(), runrec.StderrFile)))

	run, err := runrec.Read(dir, runrec.ReadOptions{Events: true})
	require.NoError(t, err)
	require.Len(t, run.Jobs, 1)
	assert.Empty(t, run.Jobs[0].Attempts[0].Events, "a linked trajectory is not followed")
	assert.Empty(t, run.Jobs[0].Attempts[0].Stderr)
	notes := strings.Join(run.Notes, "\n")
	assert.Contains(t, notes, "not a regular file")
	assert.Contains(t, notes, "a link; skipped")
	b, _ := json.Marshal(run)
	assert.NotContains(t, string(b), "SECRET-OUTSIDE")

	// Malformed lines: a configuration error naming the file and lines;
	// a torn last line only a note.
	require.NoError(t, os.Remove(events))
	require.NoError(t, os.WriteFile(events, []byte("{\"seq\":1,\"kind\":\"text\",\"text\":\"a\"}\nnot json\n{\"type\":\"nope\"}\n{\"seq\":4,\"kind\":\"te"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, runrec.ResultsFile), []byte("{\"job\":\"j\"}\n{\"job\":\"k\""), 0o600))
	_, err = runrec.Read(dir, runrec.ReadOptions{Events: true})
	require.Error(t, err)
	assert.True(t, outposterr.Is(err, outposterr.Configuration))
	assert.Contains(t, err.Error(), "events.jsonl: 2 malformed lines (line 2:")
	assert.Contains(t, err.Error(), "line 3: unknown line type")

	require.NoError(t, os.WriteFile(events, []byte("{\"seq\":1,\"kind\":\"text\",\"text\":\"a\"}\n"+strings.Repeat("x", 17<<20)+"\n"), 0o600))
	_, err = runrec.Read(dir, runrec.ReadOptions{Events: true})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "line 2: longer than")

	_, err = runrec.Read(t.TempDir(), runrec.ReadOptions{})
	assert.True(t, outposterr.Is(err, outposterr.Configuration), "no manifest: not a run directory")
}

func TestSampleBatch(t *testing.T) {
	dir := t.TempDir()
	recs, err := runrectest.Sample(dir, os.DirFS(".."), runrectest.Options{Hostile: true})
	require.NoError(t, err)
	require.Len(t, recs, 15)
	run, err := runrec.Read(dir, runrec.ReadOptions{Events: true})
	require.NoError(t, err)
	assert.Empty(t, run.Notes)
	assert.Len(t, run.Records, 15)
	assert.Len(t, run.Jobs, 15)
	assert.NotEmpty(t, run.Parks)
	attempts := 0
	for _, j := range run.Jobs {
		for _, a := range j.Attempts {
			attempts++
			require.NotNil(t, a.Result, "%s/%d", j.ID, a.Number)
			assert.Equal(t, a.Result.Trajectory.Events, len(a.Events), "%s/%d: every event recorded", j.ID, a.Number)
		}
	}
	assert.Greater(t, attempts, 15, "retries, parks and fallbacks make more attempts than jobs")
	classes := map[string]int{}
	for _, r := range run.Records {
		classes[r.Outcome.Class]++
	}
	assert.Equal(t, map[string]int{"": 11, "process": 2, "timeout": 1, "quota": 1}, classes)
}

func TestFinishKeepsTheResultsPatch(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	rec, err := runrec.Create(dir, runrec.Manifest{Command: "batch"}, runrec.WithMaxPatchBytes(64))
	require.NoError(t, err)
	diff := "diff --git a/f b/f\n+x\n"
	require.NoError(t, rec.Job("with", 0).Finish(&harness.Result{Agent: "claude", Patch: &harness.Patch{Diff: []byte(diff), Bytes: len(diff), Files: []string{"f"}}}))
	require.NoError(t, rec.Job("omitted", 0).Finish(&harness.Result{Agent: "claude", Patch: &harness.Patch{Bytes: 1 << 20, Omitted: true}}))
	require.NoError(t, rec.Job("over", 0).Finish(&harness.Result{Agent: "claude", Patch: &harness.Patch{Diff: make([]byte, 100), Bytes: 100}}))
	require.NoError(t, rec.Close())
	run, err := runrec.Read(dir, runrec.ReadOptions{})
	require.NoError(t, err)
	got := map[string]runrec.AttemptResult{}
	for _, j := range run.Jobs {
		require.Len(t, j.Attempts, 1)
		require.NotNil(t, j.Attempts[0].Result)
		got[j.ID] = *j.Attempts[0].Result
	}
	assert.Equal(t, runrec.PatchFile, got["with"].Patch)
	b, err := os.ReadFile(filepath.Join(dir, "jobs", "with", "1", runrec.PatchFile))
	require.NoError(t, err)
	assert.Equal(t, diff, string(b))
	assert.Equal(t, 1<<20, got["omitted"].PatchOmitted)
	assert.Equal(t, 100, got["over"].PatchOmitted)
	assert.Empty(t, got["over"].Patch)
}

func TestInputKeptOnceAndBounded(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	rec, err := runrec.Create(dir, runrec.Manifest{Command: "batch"})
	require.NoError(t, err)
	require.NoError(t, rec.Input("a", "Fix the bug", json.RawMessage(`{"instance_id":"x-1"}`)))
	require.NoError(t, rec.Input("a", "Continue where you left off", nil), "a later attempt keeps the first input")
	long := strings.Repeat("é", runrec.DefaultMaxPromptBytes) // two bytes each
	require.NoError(t, rec.Input("b", long, json.RawMessage(`{"big":"`+strings.Repeat("x", 600<<10)+`"}`)))
	require.NoError(t, rec.Input("c", "no metadata", json.RawMessage(`not json`)))
	require.NoError(t, rec.Job("d", 0).Finish(nil), "a job whose input was not kept")
	require.NoError(t, rec.Close())

	run, err := runrec.Read(dir, runrec.ReadOptions{})
	require.NoError(t, err)
	require.Len(t, run.Jobs, 4)
	a, b, c, d := run.Jobs[0], run.Jobs[1], run.Jobs[2], run.Jobs[3]
	assert.True(t, a.HasInput && b.HasInput && c.HasInput)
	assert.False(t, d.HasInput, "no input.json")
	assert.Empty(t, d.Prompt)
	assert.Equal(t, "Fix the bug", a.Prompt)
	assert.JSONEq(t, `{"instance_id":"x-1"}`, string(a.Metadata))
	assert.Zero(t, a.PromptCut)
	assert.Len(t, b.Prompt, runrec.DefaultMaxPromptBytes, "cut to the bound")
	assert.True(t, utf8.ValidString(b.Prompt), "on a character boundary")
	assert.Equal(t, int64(len(long)-runrec.DefaultMaxPromptBytes), b.PromptCut)
	assert.Empty(t, b.Metadata, "metadata over its bound is not kept")
	assert.Empty(t, c.Metadata, "invalid metadata is not kept")
	st, err := os.Stat(filepath.Join(dir, runrec.JobsDir, "a", runrec.InputFile))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), st.Mode().Perm())
}
