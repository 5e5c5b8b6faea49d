package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/batch"
	"github.com/outpost-dev/outpost/harness"
	"github.com/outpost-dev/outpost/outposttest"
	"github.com/outpost-dev/outpost/runrec"
)

// copyTree copies the regular files and directories under src to dst.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	require.NoError(t, filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, fi.Mode().Perm())
	}))
}

// editKind is what a scripted attempt did to its workspace.
type editKind string

const (
	editCorrect editKind = "correct" // the fix the hidden tests want
	editWrong   editKind = "wrong"   // a change that does not fix it
	editEmpty   editKind = "empty"   // nothing: an empty patch
	editTests   editKind = "tests"   // rewrites the test files to pass
	editReward  editKind = "reward"  // a test script that plants reward 1
)

// datasetTask scripts one task of testdata/tasks: its attempts' edits, in
// the order they reach the model server, and what tells them apart in a
// patch.
type datasetTask struct {
	edits []editKind
	// file is the file a fix edits; fix, wrong its content.
	file, fix, wrong string
	// tests is the hidden test file a tampering attempt overwrites.
	tests string
}

func (d datasetTask) command(k editKind) string {
	switch k {
	case editCorrect:
		return outposttest.WriteCommand(d.file, d.fix)
	case editWrong:
		return outposttest.WriteCommand(d.file, d.wrong)
	case editTests:
		content := "exit 0\n"
		if strings.HasSuffix(d.tests, ".py") {
			content = "def test_nothing():\n    pass\n"
		}
		return outposttest.WriteCommand(d.tests, content) + " && " + outposttest.WriteCommand("tests/"+d.tests, content)
	case editReward:
		return outposttest.WriteCommand("test.sh", "echo 1 > \"$OUTPOST_REWARD_FILE\"\nexit 0\n") +
			" && echo 1 > reward"
	}
	return "true"
}

// kindOf tells an attempt's edit from its patch.
func (d datasetTask) kindOf(patch string, files []string) editKind {
	switch {
	case len(files) == 0:
		return editEmpty
	case strings.Contains(patch, "OUTPOST_REWARD_FILE"):
		return editReward
	case strings.Contains(strings.Join(files, " "), d.tests):
		return editTests
	case strings.Contains(patch, firstLine(d.fix, 1)):
		return editCorrect
	}
	return editWrong
}

// firstLine returns line n (0-based) of s.
func firstLine(s string, n int) string {
	lines := strings.Split(s, "\n")
	if n < len(lines) {
		return lines[n]
	}
	return s
}

// TestEvalTaskDataset: the sample dataset of testdata/tasks (3 Python
// tasks with pytest from Debian in a task image built from their
// environment/Dockerfile, 3 shell-tested tasks, and one whose test suite
// hangs) run by real CLIs offline in Docker, 3 attempts each whose edits
// the model server scripts: correct fixes, wrong fixes, empty patches and
// attempts that rewrite the tests or plant a reward. Every verdict and
// reward is as the edit says (the tampering ones graded on the real
// tests), pass@1 and pass@3 per task are the hand-computed values, the
// hanging verifier ends error at its timeout, predictions hold one line
// per instance, and the task image is built once for the three Python
// tasks and reused by a second batch.
func TestEvalTaskDataset(t *testing.T) {
	cli := evalDocker(t)
	outpost := buildOutpost(t)
	root := t.TempDir()
	tasks := filepath.Join(root, "tasks")
	copyTree(t, filepath.Join("..", "testdata", "tasks"), tasks)

	py := func(file, fix, wrong, tests string, edits ...editKind) datasetTask {
		return datasetTask{edits: edits, file: file, fix: fix, wrong: wrong, tests: tests}
	}
	script := map[string]datasetTask{
		"py-add": py("calc.py", "def add(a, b):\n    return a + b\n", "def add(a, b):\n    return a * b\n",
			"test_calc.py", editCorrect, editWrong, editTests),
		"py-shout": py("text.py", "def shout(text):\n    return text.upper() + \"!\"\n", "def shout(text):\n    return text.upper()\n",
			"test_text.py", editCorrect, editCorrect, editEmpty),
		"py-fizzbuzz": py("fizz.py",
			"def fizzbuzz(n):\n    return \"Fizz\" * (n % 3 == 0) + \"Buzz\" * (n % 5 == 0) or str(n)\n",
			"def fizzbuzz(n):\n    return \"Fizz\" if n % 3 == 0 else str(n)\n",
			"test_fizz.py", editWrong, editEmpty, editReward),
		"sh-sum": py("sum.sh", "#!/bin/sh\necho $(($1 + $2))\n", "#!/bin/sh\necho $(($1 * $2))\n",
			"test.sh", editCorrect, editCorrect, editCorrect),
		"sh-greet": py("greet.sh", "#!/bin/sh\necho \"hello, $1\"\n", "#!/bin/sh\necho \"hello $1\"\n",
			"test.sh", editTests, editWrong, editCorrect),
		"sh-reverse": py("reverse.sh", "#!/bin/sh\necho \"$3 $2 $1\"\n", "#!/bin/sh\necho \"$3 $1\"\n",
			"test.sh", editEmpty, editReward, editWrong),
	}
	// Hand-computed: pass@1 = c/3, pass@3 = 1 when c > 0.
	wantScores := map[string]struct {
		c              int
		pass1, pass3   float64
		errors, graded int
	}{
		"py-add": {1, 1.0 / 3, 1, 0, 3}, "py-shout": {2, 2.0 / 3, 1, 0, 3}, "py-fizzbuzz": {0, 0, 0, 0, 3},
		"sh-sum": {3, 1, 1, 0, 3}, "sh-greet": {1, 1.0 / 3, 1, 0, 3}, "sh-reverse": {0, 0, 0, 0, 3},
		"sh-slow": {0, 0, 0, 1, 0},
	}
	for name, d := range script {
		cmds := make([]string, len(d.edits))
		for i, k := range d.edits {
			cmds[i] = d.command(k)
		}
		appendFile(t, filepath.Join(tasks, name, "instruction.md"), "\nMARK-"+name+" "+outposttest.RunEachDirective(cmds...)+"\n")
	}
	// The hanging task is Codex's: the test suite never ends, its verifier's timeout does.
	appendFile(t, filepath.Join(tasks, "sh-slow", "instruction.md"),
		"\nMARK-sh-slow "+outposttest.WriteDirective("version.sh", "#!/bin/sh\necho 2\n")+"\n")
	require.NoError(t, os.WriteFile(filepath.Join(tasks, "sh-slow", "task.json"),
		[]byte(`{"agent": "codex", "attempts": 1, "verify": {"timeout": "5s"}}`), 0o644))
	entries, err := os.ReadDir(tasks)
	require.NoError(t, err)
	for _, e := range entries {
		ws := filepath.Join(tasks, e.Name(), "workspace")
		gitCmd(t, ws, "init", "-q", "-b", "main")
		gitCmd(t, ws, "add", "-A")
		gitCmd(t, ws, "commit", "-q", "-m", "task")
	}

	results := filepath.Join(root, "results.jsonl")
	preds := filepath.Join(root, "preds.jsonl")
	run := func(target, results string, extra ...string) string {
		args := append([]string{"batch", target, "--agent", "claude", "--attempts", "3", "--results", results,
			"--offline", "--no-store", "--concurrency", "6"}, extra...)
		cmd := exec.Command(outpost, args...)
		cmd.Dir = t.TempDir()
		cmd.Env = append(os.Environ(), "OUTPOST_STATE_DIR="+t.TempDir())
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "verdicts do not change the exit code: %s", out)
		assert.Zero(t, owned(t, cli, cmd.Process.Pid), "no container left, the verifiers' included")
		return string(out)
	}
	out := run(tasks, results, "--predictions", preds)

	// The three Python tasks share one recipe: one image, tagged by its
	// hash, built at most once (a run before this one may have built it).
	tags := map[string]int{}
	built := 0
	for _, l := range strings.Split(out, "\n") {
		if !strings.HasPrefix(l, "environment ") {
			continue
		}
		i := strings.Index(l, "outpost-task:")
		require.GreaterOrEqual(t, i, 0, l)
		tags[l[i:]]++
		if strings.Contains(l, ": built outpost-task:") {
			built++
		}
	}
	require.Len(t, tags, 1, "one image for the three Python tasks: %s", out)
	var tag string
	for k := range tags {
		tag = k
	}
	assert.Equal(t, 3, tags[tag], out)
	assert.LessOrEqual(t, built, 1, out)
	info, err := cli.ImageInspect(context.Background(), tag)
	require.NoError(t, err)
	assert.NotEmpty(t, info.Config.Labels["dev.outpost.task-image"])

	recs := readRecords(t, results)
	require.Len(t, recs, 19, out)
	seen := map[string][]editKind{}
	for _, r := range recs {
		require.True(t, r.Outcome.OK, "%s: %+v", r.Job, r.Outcome)
		require.NotNil(t, r.Patch, r.Job)
		if r.Task == "" {
			r.Task = r.Job
		}
		if r.Task == "sh-slow" {
			assert.Equal(t, harness.VerdictError, r.Verdict, "%+v", r.Verify)
			assert.Nil(t, r.Reward)
			require.NotNil(t, r.Verify)
			assert.Equal(t, "the verifier ran over its timeout of 5s", r.Verify.Error)
			assert.Contains(t, r.Verify.Output, "slow: started")
			assert.Contains(t, r.Patch.Files, "version.sh")
			continue
		}
		d := script[r.Task]
		patch := ""
		if r.Patch.Path != "" {
			b, err := os.ReadFile(filepath.Join(root, r.Patch.Path))
			require.NoError(t, err)
			patch = string(b)
		}
		kind := d.kindOf(patch, r.Patch.Files)
		seen[r.Task] = append(seen[r.Task], kind)
		require.NotNil(t, r.Verify, r.Job)
		require.NotNil(t, r.Reward, "%s: %+v", r.Job, r.Verify)
		if kind == editCorrect {
			assert.Equal(t, harness.VerdictPass, r.Verdict, "%s (%s): %+v", r.Job, kind, r.Verify)
			assert.Equal(t, 1.0, *r.Reward, r.Job)
			continue
		}
		assert.Equal(t, harness.VerdictFail, r.Verdict, "%s (%s): %+v", r.Job, kind, r.Verify)
		assert.Equal(t, 0.0, *r.Reward, "%s (%s): graded on the real tests", r.Job, kind)
		// The real tests said so: pytest's summary, or the shell test's complaint.
		mark := "want "
		if strings.HasSuffix(d.tests, ".py") {
			mark = " failed"
		}
		assert.Contains(t, r.Verify.Output, mark, "%s (%s): the hidden tests ran", r.Job, kind)
	}
	for name, d := range script {
		assert.ElementsMatch(t, d.edits, seen[name], "%s: each scripted edit ran once", name)
	}

	// pass@1 and pass@3 per task, as computed by hand.
	b, err := os.ReadFile(results + ".scores.json")
	require.NoError(t, err)
	var scores batch.Scores
	require.NoError(t, json.Unmarshal(b, &scores))
	require.Len(t, scores.Tasks, len(wantScores))
	for _, ts := range scores.Tasks {
		w, ok := wantScores[ts.Task]
		require.True(t, ok, ts.Task)
		assert.Equal(t, w.c, ts.C, ts.Task)
		assert.Equal(t, w.graded, ts.N, ts.Task)
		assert.Equal(t, w.errors, ts.Errors, ts.Task)
		assert.InDelta(t, w.pass1, ts.PassAt1, 1e-9, "%s pass@1", ts.Task)
		if w.graded == 3 {
			assert.InDelta(t, w.pass3, ts.PassAtN, 1e-9, "%s pass@3", ts.Task)
		}
	}
	assert.Equal(t, 7, scores.Passed)
	assert.Equal(t, 11, scores.Failed)
	assert.Equal(t, 1, scores.Errors)
	assert.Contains(t, out, "solved 7 of 19 graded jobs (11 failed, 1 verifier errors)")

	// Predictions: one line per instance (the task's name), a passing
	// attempt's patch where one passed.
	fh, err := os.Open(preds)
	require.NoError(t, err)
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	got := map[string]string{}
	for sc.Scan() {
		var p map[string]string
		require.NoError(t, json.Unmarshal(sc.Bytes(), &p), sc.Text())
		_, dup := got[p["instance_id"]]
		assert.False(t, dup, "one line per instance: %s", p["instance_id"])
		got[p["instance_id"]] = p["model_patch"]
	}
	require.NoError(t, sc.Err())
	require.Len(t, got, 7)
	for name, w := range wantScores {
		if w.c > 0 {
			assert.Contains(t, got[name], "+"+firstLine(script[name].fix, 1), "%s: the passing attempt", name)
		}
	}

	// The same dataset through outpost grade: every attempt's prediction
	// (preds.all.jsonl, in the batch's order) graded again on the task
	// directories, on the task image the batch built, gets the batch's
	// verdict and reward per attempt and its pass@k per task.
	all := strings.TrimSuffix(preds, ".jsonl") + ".all.jsonl"
	allLines, err := os.ReadFile(all)
	require.NoError(t, err)
	gradedAs := map[string]string{} // grade's job id → the batch's
	perInstance := map[string]int{}
	var instances []string
	for _, l := range strings.Split(strings.TrimSpace(string(allLines)), "\n") {
		var p struct {
			InstanceID string `json:"instance_id"`
			Job        string `json:"job"`
		}
		require.NoError(t, json.Unmarshal([]byte(l), &p), l)
		perInstance[p.InstanceID]++
		instances = append(instances, p.InstanceID)
		gradedAs[p.InstanceID+"#"+strconv.Itoa(perInstance[p.InstanceID])] = p.Job
	}
	require.Len(t, instances, 19, "every attempt's prediction")
	for id, job := range gradedAs {
		if perInstance[strings.Split(id, "#")[0]] == 1 {
			delete(gradedAs, id)
			gradedAs[strings.Split(id, "#")[0]] = job // one prediction: graded under the task's id
		}
	}
	graded := filepath.Join(root, "graded")
	grade := exec.Command(outpost, "grade", all, "--tasks", tasks, "--out", graded, "--concurrency", "6")
	grade.Dir = t.TempDir()
	grade.Env = append(os.Environ(), "OUTPOST_STATE_DIR="+t.TempDir())
	gradeOut, err := grade.CombinedOutput()
	require.NoError(t, err, "verdicts do not change the exit code: %s", gradeOut)
	assert.Zero(t, owned(t, cli, grade.Process.Pid), "no verifier container left")
	assert.Contains(t, string(gradeOut), "reused "+tag, "the task image is built once")
	assert.NotContains(t, string(gradeOut), "built outpost-task:")
	assert.Contains(t, string(gradeOut), "solved 7 of 19 graded jobs (11 failed, 1 verifier errors)")
	byJob := map[string]batch.Record{}
	for _, r := range recs {
		byJob[r.Job] = r
	}
	grecs := readRecords(t, filepath.Join(graded, runrec.ResultsFile))
	require.Len(t, grecs, 19, string(gradeOut))
	for _, g := range grecs {
		b, ok := byJob[gradedAs[g.Job]]
		require.True(t, ok, "graded %s: no batch attempt %q", g.Job, gradedAs[g.Job])
		assert.Equal(t, b.Verdict, g.Verdict, "%s (batch %s): %+v", g.Job, b.Job, g.Verify)
		if b.Reward == nil {
			assert.Nil(t, g.Reward, g.Job)
		} else if assert.NotNil(t, g.Reward, g.Job) {
			assert.Equal(t, *b.Reward, *g.Reward, g.Job)
		}
	}
	gb, err := os.ReadFile(filepath.Join(graded, runrec.ResultsFile+".scores.json"))
	require.NoError(t, err)
	var gscores batch.Scores
	require.NoError(t, json.Unmarshal(gb, &gscores))
	require.Len(t, gscores.Tasks, len(scores.Tasks))
	for i, ts := range gscores.Tasks {
		w := scores.Tasks[i]
		assert.Equal(t, w.Task, ts.Task)
		assert.Equal(t, [3]int{w.N, w.C, w.Errors}, [3]int{ts.N, ts.C, ts.Errors}, ts.Task)
		assert.InDelta(t, w.PassAt1, ts.PassAt1, 1e-9, "%s pass@1", ts.Task)
		assert.InDelta(t, w.PassAtN, ts.PassAtN, 1e-9, "%s pass@n", ts.Task)
	}

	// A second batch finds the image instead of building it; gc --images
	// lists it (a dry run: other tests' images stay).
	out = run(filepath.Join(tasks, "py-shout"), filepath.Join(root, "again.jsonl"), "--attempts", "1")
	assert.Contains(t, out, "reused "+tag)
	assert.NotContains(t, out, "built outpost-task:")
	gc := exec.Command(outpost, "gc", "--images", "--dry-run")
	gc.Env = append(os.Environ(), "OUTPOST_STATE_DIR="+t.TempDir())
	gcOut, err := gc.CombinedOutput()
	require.NoError(t, err, string(gcOut))
	assert.Contains(t, string(gcOut), "left over image "+tag+" (task image)")
	// The second batch's leases are gone or going (an engine may still be
	// removing a container it was told to): the image is removed once no
	// container uses it.
	require.Eventually(t, func() bool {
		list, err := cli.ContainerList(context.Background(), container.ListOptions{All: true,
			Filters: filters.NewArgs(filters.Arg("ancestor", tag))})
		return err == nil && len(list) == 0
	}, 2*time.Minute, 200*time.Millisecond, "a container still uses the task image")
	_, err = cli.ImageRemove(context.Background(), tag, image.RemoveOptions{PruneChildren: true})
	assert.NoError(t, err)
}

// appendFile appends text to the file at path.
func appendFile(t *testing.T, path, text string) {
	t.Helper()
	fh, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = fh.WriteString(text)
	require.NoError(t, err)
	require.NoError(t, fh.Close())
}

// TestEvalSWEBenchImport: outpost dataset import swebench turns the sample
// SWE-bench file of testdata/swebench and a local mirror into jobs (a
// source at the base commit, the task image's recipe, the verifier's
// tests); once batch grades fail_to_pass and pass_to_pass, real CLIs
// offline in Docker make a correct fix, a wrong fix, an empty patch and a
// test-tampering fix whose verdicts, rewards and pass@k are as expected.
func TestEvalSWEBenchImport(t *testing.T) {
	cli := evalDocker(t)
	outpost := buildOutpost(t)
	root := t.TempDir()
	copyTree(t, filepath.Join("..", "testdata", "swebench"), root)
	mirror := filepath.Join(root, "repos", "acme__calc")
	gitCmd(t, mirror, "init", "-q", "-b", "main")
	gitCmd(t, mirror, "add", "-A")
	gitCmd(t, mirror, "commit", "-q", "-m", "task")
	base := gitCmd(t, mirror, "rev-parse", "HEAD")

	// The rows' problem statements script the attempts' edits.
	fix := map[string]string{
		"acme__calc-1": outposttest.WriteCommand("calc.py", "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return a * b\n"),
		"acme__calc-2": outposttest.WriteCommand("calc.py", "def add(a, b, c=0):\n    return a + b + c\n\n\ndef mul(a, b):\n    return a + b\n"),
	}
	wrong := outposttest.WriteCommand("calc.py", "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return a - b\n")
	tamper := outposttest.WriteCommand("tests/test_calc.py", "def test_add():\n    pass\n")
	edits := map[string][]string{
		"acme__calc-1": {fix["acme__calc-1"], wrong, tamper},
		"acme__calc-2": {"true", fix["acme__calc-2"], fix["acme__calc-2"]},
	}
	b, err := os.ReadFile(filepath.Join(root, "instances.jsonl"))
	require.NoError(t, err)
	var rows strings.Builder
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var row map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &row))
		assert.Equal(t, base, row["base_commit"], "the sample's base commit is the mirror's")
		id := row["instance_id"].(string)
		row["problem_statement"] = row["problem_statement"].(string) + "\nMARK-" + id + " " + outposttest.RunEachDirective(edits[id]...)
		out, err := json.Marshal(row)
		require.NoError(t, err)
		rows.Write(append(out, '\n'))
	}
	dataset := filepath.Join(root, "scripted.jsonl")
	require.NoError(t, os.WriteFile(dataset, []byte(rows.String()), 0o644))

	jobs := filepath.Join(root, "jobs.jsonl")
	cmd := exec.Command(outpost, "dataset", "import", "swebench", dataset, "--repos", filepath.Join(root, "repos"),
		"--environment", filepath.Join(root, "environment"), "--attempts", "3", "-o", jobs)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, string(out))
	b, err = os.ReadFile(jobs)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	require.Len(t, lines, 2)
	for _, l := range lines {
		var j struct {
			ID          string
			Source      map[string]string
			Environment map[string]string
			Attempts    int
			Verify      struct {
				FailToPass []string `json:"fail_to_pass"`
				PassToPass []string `json:"pass_to_pass"`
				Parser     string
				TestPatch  string `json:"test_patch"`
			}
		}
		require.NoError(t, json.Unmarshal([]byte(l), &j))
		assert.Equal(t, map[string]string{"repo": "repos/acme__calc", "commit": base}, j.Source)
		assert.Equal(t, map[string]string{"context": "environment"}, j.Environment)
		assert.Equal(t, 3, j.Attempts)
		assert.Equal(t, "pytest", j.Verify.Parser)
		assert.Equal(t, []string{"tests/test_calc.py::test_add"}, j.Verify.PassToPass)
		assert.Len(t, j.Verify.FailToPass, 1)
		assert.Contains(t, j.Verify.TestPatch, "+++ b/tests/test_")
	}

	results := filepath.Join(root, "results.jsonl")
	cmd = exec.Command(outpost, "batch", jobs, "--results", results, "--offline", "--no-store", "--concurrency", "6",
		"--predictions", filepath.Join(root, "preds.jsonl"))
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "OUTPOST_STATE_DIR="+t.TempDir())
	out, err = cmd.CombinedOutput()
	require.NoError(t, err, string(out))
	assert.Zero(t, owned(t, cli, cmd.Process.Pid))
	recs := readRecords(t, results)
	require.Len(t, recs, 6, string(out))
	passed := map[string]int{}
	for _, r := range recs {
		require.True(t, r.Outcome.OK, "%s: %+v", r.Job, r.Outcome)
		require.NotNil(t, r.Patch, r.Job)
		patch := ""
		if r.Patch.Path != "" {
			b, err := os.ReadFile(filepath.Join(root, r.Patch.Path))
			require.NoError(t, err)
			patch = string(b)
		}
		correct := r.Task == "acme__calc-1" && strings.Contains(patch, "+    return a * b") ||
			r.Task == "acme__calc-2" && strings.Contains(patch, "+    return a + b + c")
		want := harness.VerdictFail
		if correct {
			want = harness.VerdictPass
			passed[r.Task]++
		}
		assert.Equal(t, want, r.Verdict, "%s: %+v", r.Job, r.Verify)
	}
	assert.Equal(t, map[string]int{"acme__calc-1": 1, "acme__calc-2": 2}, passed)
	assert.Contains(t, string(out), "solved 3 of 6 graded jobs (3 failed, 0 verifier errors); pass@1 0.500, pass@3 1.000 over 2 tasks")
}

// TestEvalTaskEnvironmentFails: a task whose environment's recipe fails
// stops the batch before any turn: a configuration error (exit 2) that
// ends with the failing step's output, no result line, no container.
func TestEvalTaskEnvironmentFails(t *testing.T) {
	cli := evalDocker(t)
	outpost := buildOutpost(t)
	root := t.TempDir()
	task := filepath.Join(root, "tasks", "broken")
	copyTree(t, filepath.Join("..", "testdata", "tasks", "sh-sum"), task)
	gitCmd(t, filepath.Join(task, "workspace"), "init", "-q", "-b", "main")
	gitCmd(t, filepath.Join(task, "workspace"), "add", "-A")
	gitCmd(t, filepath.Join(task, "workspace"), "commit", "-q", "-m", "task")
	require.NoError(t, os.MkdirAll(filepath.Join(task, "environment"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(task, "environment", "Dockerfile"),
		[]byte("FROM outpost/base:dev\nRUN echo the-recipe-step-ran && exit 7\n"), 0o644))
	results := filepath.Join(root, "results.jsonl")
	cmd := exec.Command(outpost, "batch", filepath.Join(root, "tasks"), "--agent", "claude", "--results", results, "--offline", "--no-store")
	cmd.Env = append(os.Environ(), "OUTPOST_STATE_DIR="+t.TempDir())
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee, string(out))
	assert.Equal(t, 2, ee.ExitCode(), string(out))
	assert.Contains(t, string(out), "configuration: job broken: environment ")
	assert.Contains(t, string(out), "returned a non-zero code: 7")
	assert.Contains(t, string(out), "the-recipe-step-ran", "the build log's tail")
	assert.NoFileExists(t, results)
	assert.Zero(t, owned(t, cli, cmd.Process.Pid))
}
